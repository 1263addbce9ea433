"""The ``sustained`` case: streams of distinct prompts of one kind and length, decode judged over time.

One stream per trial (``repeat``, or "auto" while a gate is undecided); with ``concurrency`` > 1 the
streams run at once, a load case (``load``). ``max_burst_gap`` compares it with a two-point burst.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.closed_loop import SustainedSpec, TwoPointSpec
from pytest_specperf.cases.result_parts import AcceptanceSample
from pytest_specperf.cases.results import StreamResult, SustainedResult
from pytest_specperf.endpoint.client import Progress
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.prompts import cold
from pytest_specperf.prompts.files import PromptRecord
from pytest_specperf.run import acceptance, categories, drift, load, stream_figures
from pytest_specperf.run.context import CaseContext, Until, case_seed, more_trials, text_sha
from pytest_specperf.run.floors import JudgeSettings, judge_sustained
from pytest_specperf.run.two_point import two_point


def sustained(context: CaseContext, spec: SustainedSpec, nodeid: str = "", *, until: Until | None = None
              ) -> SustainedResult:
    """k streams of distinct prompts of one kind and length; medians over streams, drift gate over all.

    With ``concurrency`` > 1 the streams run at once (a load case, see ``load``). With
    ``repeat="auto"`` streams are added while the drift gate is inconclusive or ``until`` says the
    comparison is undecided, up to ``max_repeat``.
    """
    if spec.concurrency > 1 or spec.min_total_tps is not None or spec.requests is not None:
        return load.sustained_load(context, spec, nodeid)
    seed = case_seed(nodeid)
    progress = context.progress(nodeid)
    before = context.scrape_metrics()
    max_drift = spec.max_drift if spec.max_drift is not None else context.judging.max_drift
    trials = _trials(context, spec, seed, progress, before is not None, max_drift, until)
    # the counters are read before the timing-noise requests below, which would move them past what the case explains
    after = context.scrape_metrics()
    streams = trials.streams
    r = _result(context, spec, nodeid, streams, max_drift)
    if spec.prompts is not None:
        categories.attach(r, spec, streams, trials.traces, context.client.caps.step_chunks)
    noise = context.timing_noise() if trials.drifts else None  # only a case with windows asks for it
    if stream_figures.judge_drift(r, streams, trials.drifts, max_drift, noise):
        r.window_tps = [float(x) for x in np.median(np.array([s.window_tps for s in streams if s.window_tps]),
                                                    axis=0)]
    if context.client.caps.step_chunks:
        _step_windows(r, streams)
    stream_figures.phases(r, streams, trials.traces, context.client.caps.step_chunks)
    r.acceptance, r.attribution = context.acceptance_of(streams, before, after,
                                                    *acceptance.response_fields(trials.traces))
    if r.acceptance is not None and trials.scrape_series and trials.scrape_series[0]:
        r.acceptance.over_time = trials.scrape_series[0]  # first stream: per scrape interval, from counters
    context.check_acceptance_gates(spec, r)
    if spec.max_burst_gap is not None:
        burst_spec = TwoPointSpec(ctx=spec.ctx, content=spec.content, api=spec.api, temperature=spec.temperature)
        burst = two_point(context, burst_spec, nodeid + "#burst", seed=seed)
        r.burst_tps = burst.decode_tps
        r.burst_gap = 1.0 - r.decode_tps / burst.decode_tps
    return r


@dataclass
class _Trials:
    """What the streams of one sustained case gathered."""

    streams: list[StreamResult] = field(default_factory=list)
    drifts: list[drift.Drift] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    scrape_series: list[list[AcceptanceSample]] = field(default_factory=list)  # vLLM counters, per stream


def _trials(context: CaseContext, spec: SustainedSpec, seed: int, progress: Progress | None, scraping: bool,
            max_drift: float, until: Until | None) -> _Trials:
    """One stream per trial, while ``more_trials`` asks for one (the drift gate or ``until`` undecided)."""
    trials = _Trials()

    def undecided() -> bool:
        drifts, streams = trials.drifts, trials.streams
        drift_open = len(drifts) == len(streams) and drift.drift_gate(drifts, max_drift).outcome == "inconclusive"
        values: dict[str, list[Any]] = {"decode_tps": [s.decode_tps for s in streams],
                                        "ttft_s": [s.ttft_s for s in streams],
                                        "text_sha": [s.text_sha for s in streams]}
        return drift_open or (until is not None and not until(values))

    recs = categories.records(spec)
    if recs:  # one prompt a trial, cycling through the file in a seeded order (categories.draw)
        recs = categories.draw(recs, len(recs), seed, tag=False)
    while more_trials(spec, len(trials.streams), undecided):
        rec = recs[len(trials.streams) % len(recs)] if recs else None
        trace = _stream(context, spec, seed + len(trials.streams), progress, trials, scraping,
                        cold.fresh_record(rec) if rec is not None and context.tags_prompts() else rec)
        stream_figures.check_length(spec.tokens, trace.completion_tokens, trace.finish_reason, context.client.kind)
        s, d = stream_figures.stream_result(trace, coalesce_s=context.coalesce_s())
        # Trial i of a saved run and of a later one share prompt and seed; equal text pairs them (sequential):
        # the prompt as built, without the trial's own tag.
        text = rec.text if rec else context.built(spec.content, spec.ctx, seed + len(trials.streams), spec.api).text
        s.text_sha = text_sha(text, trace)
        if rec is not None:
            s.category, s.prompt_id = rec.category, rec.id
        trials.streams.append(s)
        trials.traces.append(trace)
        if d is not None:
            trials.drifts.append(d)
    return trials


def _stream(context: CaseContext, spec: SustainedSpec, seed: int, progress: Progress | None, trials: _Trials,
            scraping: bool, rec: PromptRecord | None = None) -> Trace:
    """One stream of a sustained case (of ``rec``, a prompt file's, when given); on vLLM its counters are
    scraped alongside (they move per step)."""
    client = context.client
    text = rec.text if rec is not None else context.prompt(spec.content, spec.ctx, seed, spec.api).text
    msgs = categories.messages(rec, spec.api) if rec is not None else None

    def stream() -> Trace:
        return client.stream(text, spec.tokens, api=spec.api, seed=seed, temperature=spec.temperature,
                             on_progress=progress, messages=list(msgs) if msgs else None)

    if client.kind == "vllm" and scraping:
        with acceptance.Scraper(client.base_url, "vllm", headers=dict(client.http.headers),
                                params=client.params) as sc:
            trace = stream()
        trials.scrape_series.append(sc.series(trace.t0))
        return trace
    return stream()


def _result(context: CaseContext, spec: SustainedSpec, nodeid: str, streams: list[StreamResult],
            max_drift: float) -> SustainedResult:
    """The case's figures: medians over its streams, stalls and counts over all of them."""
    med = stream_figures.median
    r: SustainedResult = context.new_result(
        SustainedResult, spec, spec.ctx, streams[0].prompt_tokens, nodeid,
        tokens=spec.tokens, repeat=len(streams), streams=streams, max_drift=max_drift,
        completion_tokens=streams[0].completion_tokens,
        ttft_s=med([s.ttft_s for s in streams]), total_s=med([s.total_s for s in streams]),
        decode_tps=med([s.decode_tps for s in streams]), client_tps=med([s.client_tps for s in streams]),
        tokens_per_chunk=med([s.tokens_per_chunk for s in streams]),
        stalls=sum(len(s.stalls) for s in streams),
        stall_s=sum(x.gap_s for s in streams for x in s.stalls),
        bursts=sum(len(s.bursts) for s in streams),
        counts_exact=all(s.counts_exact for s in streams), count_source=streams[0].count_source)
    return r


def _step_windows(r: SustainedResult, streams: list[StreamResult]) -> None:
    """Per-window acceptance length and step time, where every stream has the same windows (chunks are steps)."""
    per_stream = [s for s in streams if s.window_tokens_per_chunk]
    if per_stream and len({len(s.window_tokens_per_chunk) for s in per_stream}) == 1:
        r.window_accept_len = [float(x) for x in np.median([s.window_tokens_per_chunk for s in per_stream], axis=0)]
        r.window_step_ms = [1000.0 / float(x) for x in np.median([s.window_chunks_per_s for s in per_stream], axis=0)]


class Sustained:
    """The ``sustained`` kind (``concurrency`` > 1 included: its streams then run at once)."""

    name: ClassVar[str] = "sustained"
    spec_type: ClassVar[type[CaseSpec]] = SustainedSpec

    def context_needed(self, spec: SustainedSpec) -> tuple[int, int]:
        """ctx prompt tokens; ``tokens`` generated, or the burst's long request where that is longer."""
        burst = TwoPointSpec().long if spec.max_burst_gap is not None else 0
        return categories.ctx_needed(spec), max(spec.tokens, burst)

    def measure(self, context: CaseContext, spec: SustainedSpec, nodeid: str, until: Until | None = None
                ) -> SustainedResult:
        """``sustained``."""
        return sustained(context, spec, nodeid, until=until)

    def judge(self, result: SustainedResult, spec: SustainedSpec, settings: JudgeSettings) -> None:
        """Drift, decode (per user under load), burst gap, acceptance and TTFT gates (``floors``)."""
        judge_sustained(result, spec, settings)
