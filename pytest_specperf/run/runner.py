"""Runs case specs against one endpoint: prompts, requests under the endpoint lock, results, verdicts."""

from __future__ import annotations

import hashlib
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_specperf.cases.base import AUTO_MAX_REPEAT, AUTO_MIN_TRIALS, CaseSpec
from pytest_specperf.cases.build import fit_spec
from pytest_specperf.cases.closed_loop import CtxSweepSpec, LoadSweepSpec, SustainedSpec, TwoPointSpec
from pytest_specperf.cases.open_loop import CapacitySpec, RateSpec
from pytest_specperf.cases.results import Result, StreamResult, SustainedResult, SweepResult, TwoPointResult
from pytest_specperf.endpoint.client import Client, Progress
from pytest_specperf.endpoint.locks import endpoint_lock
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.prompts.builder import Prompt, build_prompt, build_prompts
from pytest_specperf.run import acceptance, capacity
from pytest_specperf.run import drift as stats
from pytest_specperf.run import load as loadcase
from pytest_specperf.run import rate as ratecase
from pytest_specperf.run import stream_figures as measure
from pytest_specperf.run.floors import judge

# Servers that send one event per token (llama.cpp, TGI) deliver a step's accepted drafts as a
# burst; events this close together are one delivery, so windows interpolate over the step.
# Merging neighbours only coarsens the cumulative curve (totals stay exact), so erring large is safe.
BURST_S = 0.005
#: ``until`` of repeat="auto": per-metric trial values so far (and ``text_sha`` per trial) -> True when decided.
Until = Callable[[dict[str, list[Any]]], bool]


def more_trials(spec: CaseSpec, n: int, undecided: Callable[[], bool]) -> bool:
    """Whether trial ``n + 1`` is needed: ``repeat`` trials, or with "auto" while a gate is undecided."""
    if spec.repeat != "auto":
        return n < int(spec.repeat)
    cap = spec.max_repeat or AUTO_MAX_REPEAT
    return n < AUTO_MIN_TRIALS or (n < cap and undecided())


def case_seed(nodeid: str) -> int:
    """A stable per-case number: distinct cases get distinct prompts (no prefix-cache flattery), runs repeat."""
    return zlib.crc32(nodeid.encode()) % 100_000


class Runner:
    """Measures specs on one endpoint; one request at a time (a file lock per endpoint URL)."""

    def __init__(self, client: Client, *, max_drift: float = 0.15, inconclusive: str = "warn",
                 progress: Callable[[str], Progress | None] | None = None,
                 size_cap: tuple[int, int, float] | None = None) -> None:
        self.client = client
        self.size_cap = size_cap  # (max ctx, max tokens, max floor) for small local engines
        self.max_drift = max_drift
        self.inconclusive = inconclusive  # what a drift the gate cannot decide does: pass | warn | fail
        self._progress = progress
        self._prompts: dict[tuple[str, int, int, str], Prompt] = {}
        self._warm = False

    # -- helpers --------------------------------------------------------------------------------

    def prompt(self, kind: str, ctx: int, variant: int, api: str = "completions") -> Prompt:
        """A prompt of ``ctx`` server tokens (cached per kind, ctx, variant and api)."""
        key = (kind, ctx, variant, api)
        if key not in self._prompts:
            # Chat prompts are counted with the server's chat template applied, so ctx holds for them too.
            def count(text: str) -> int:
                return self.client.count_tokens(text, api=api)

            self._prompts[key] = build_prompt(kind, ctx, count, variant=variant, api=api)
        return self._prompts[key]

    def prompts(self, kind: str, ctx: int, variants: list[int], api: str = "completions") -> list[Prompt]:
        """``prompt`` for many variants (a load case's users): the missing ones built side by side."""
        missing = [v for v in dict.fromkeys(variants) if (kind, ctx, v, api) not in self._prompts]
        built = build_prompts(kind, ctx, lambda text: self.client.count_tokens(text, api=api), missing, api=api)
        self._prompts.update({(kind, ctx, p.variant, api): p for p in built})
        return [self._prompts[(kind, ctx, v, api)] for v in variants]

    def new_result(self, cls: type[Result], spec: CaseSpec, ctx: int, prompt_tokens: int | None, nodeid: str,
                   **fields: Any) -> Any:
        """A result of ``cls`` with what every case records: kind, endpoint, model, server, ctx, ``fields``."""
        info = self.client.info or self.client.detect()
        return cls(kind=spec.KIND, endpoint=self.client.url, model=str(self.client.model), server=info.kind,
                   ctx=ctx, prompt_tokens=prompt_tokens, nodeid=nodeid, content=spec.content,
                   temperature=spec.temperature, server_version=info.details.get("version"), **fields)

    def warm_up(self) -> None:
        """One short request before the first measured one (once per runner)."""
        # The first request on a cold server pays for graph capture, allocator growth, and so on.
        if not self._warm:
            self.client.complete(self.prompt("prose", 32, 99_999).text, 8)
            self._warm = True

    # -- cases ----------------------------------------------------------------------------------

    def run(self, spec: CaseSpec, nodeid: str = "", *, until: Until | None = None) -> Result:
        """Measure one case and judge it (``until``: the comparison that ``repeat="auto"`` waits for)."""
        self.client.info or self.client.detect()
        asked = spec
        if self.size_cap is not None:
            spec = fit_spec(spec, *self.size_cap)
        self._check_context(spec)
        with endpoint_lock(self.client.url):
            self.warm_up()
            started = time.time()
            if isinstance(spec, SustainedSpec):
                result: Result = self.sustained(spec, nodeid, until=until)
            elif isinstance(spec, TwoPointSpec):
                result = self.two_point(spec, nodeid, until=until)
            elif isinstance(spec, CtxSweepSpec):
                result = self.ctx_sweep(spec, nodeid)
            elif isinstance(spec, LoadSweepSpec):
                result = loadcase.load_sweep(self, spec, nodeid, self._coalesce_s())
            elif isinstance(spec, RateSpec):
                result = ratecase.rate_case(self, spec, nodeid)
            elif isinstance(spec, CapacitySpec):
                result = capacity.search(self, spec, nodeid)
            else:
                raise TypeError(f"unknown spec {spec!r}")
            result.started_at, result.finished_at = started, time.time()
        if spec is not asked:
            result.sized_down = {k: v for k, v in spec.as_dict().items() if v != asked.as_dict()[k]}
        judge(result, spec, max_drift=self.max_drift, inconclusive=self.inconclusive)
        return result

    def _check_context(self, spec: CaseSpec) -> None:
        """A case that cannot fit the server's advertised context fails now, before a prompt is built."""
        info = self.client.info or self.client.detect()
        limit = info.max_context
        if limit is None:
            return
        ctx, out = _context_needed(spec)
        if ctx + out > limit:
            raise measure.MeasurementError(
                f"ctx {ctx} + {out} generated tokens need {ctx + out} tokens of context, but {self.client.url} "
                f"serves {self.client.model} with {limit} ({info.context_source}); lower ctx or tokens, or "
                "start the server with a longer context")

    def sustained(self, spec: SustainedSpec, nodeid: str = "", *, until: Until | None = None) -> SustainedResult:
        """k streams of distinct prompts of one kind and length; medians over streams, drift gate over all.

        With ``concurrency`` > 1 the streams run at once (a load case, see ``loadcase``). With
        ``repeat="auto"`` streams are added while the drift gate is inconclusive or ``until`` says the
        comparison is undecided, up to ``max_repeat``.
        """
        if spec.concurrency > 1 or spec.min_total_tps is not None:
            return loadcase.sustained_load(self, spec, nodeid, self._coalesce_s())
        seed = case_seed(nodeid)
        progress = self._progress(nodeid) if self._progress else None
        before = self.scrape_metrics()
        max_drift = spec.max_drift if spec.max_drift is not None else self.max_drift
        trials = self._sustained_trials(spec, seed, progress, before is not None, max_drift, until)
        streams = trials.streams
        r = self._sustained_result(spec, nodeid, streams, max_drift)
        if measure.judge_drift(r, streams, trials.drifts, max_drift):
            r.window_tps = [float(x) for x in np.median(np.array([s.window_tps for s in streams if s.window_tps]),
                                                        axis=0)]
        if self.client.caps.step_chunks:
            _step_windows(r, streams)
        after = self.scrape_metrics()
        r.acceptance, r.attribution = self.acceptance_of(streams, before, after,
                                                       *acceptance.response_fields(trials.traces))
        if r.acceptance is not None and trials.scrape_series and trials.scrape_series[0]:
            r.acceptance["over_time"] = trials.scrape_series[0]  # first stream: per scrape interval, from counters
        self.check_acceptance_gates(spec, r)
        if spec.max_burst_gap is not None:
            burst_spec = TwoPointSpec(ctx=spec.ctx, content=spec.content, api=spec.api, temperature=spec.temperature)
            burst = self.two_point(burst_spec, nodeid + "#burst", seed=seed)
            r.burst_tps = burst.decode_tps
            r.burst_gap = 1.0 - r.decode_tps / burst.decode_tps
        return r

    def _sustained_trials(self, spec: SustainedSpec, seed: int, progress: Progress | None, scraping: bool,
                          max_drift: float, until: Until | None) -> _Trials:
        """One stream per trial, while ``more_trials`` asks for one (the drift gate or ``until`` undecided)."""
        trials = _Trials()

        def undecided() -> bool:
            drifts, streams = trials.drifts, trials.streams
            drift_open = len(drifts) == len(streams) and stats.drift_gate(drifts, max_drift).outcome == "inconclusive"
            values = {"decode_tps": [s.decode_tps for s in streams], "ttft_s": [s.ttft_s for s in streams],
                      "text_sha": [s.text_sha for s in streams]}
            return drift_open or (until is not None and not until(values))

        while more_trials(spec, len(trials.streams), undecided):
            trace = self._sustained_stream(spec, seed + len(trials.streams), progress, trials, scraping)
            measure.check_length(spec.tokens, trace.completion_tokens, trace.finish_reason, self.client.kind)
            s, d = measure.stream_result(trace, coalesce_s=self._coalesce_s())
            # Trial i of a saved run and of a later one share prompt and seed; equal text pairs them (sequential).
            s.text_sha = text_sha(self.prompt(spec.content, spec.ctx, seed + len(trials.streams), spec.api).text, trace)
            trials.streams.append(s)
            trials.traces.append(trace)
            if d is not None:
                trials.drifts.append(d)
        return trials

    def _sustained_stream(self, spec: SustainedSpec, seed: int, progress: Progress | None, trials: _Trials,
                          scraping: bool) -> Trace:
        """One stream of a sustained case; on vLLM its counters are scraped alongside (they move per step)."""
        prompt = self.prompt(spec.content, spec.ctx, seed, spec.api)

        def stream() -> Trace:
            return self.client.stream(prompt.text, spec.tokens, api=spec.api, seed=seed,
                                      temperature=spec.temperature, on_progress=progress)

        if self.client.kind == "vllm" and scraping:
            with acceptance.Scraper(self.client.url, "vllm", headers=dict(self.client.http.headers)) as sc:
                trace = stream()
            trials.scrape_series.append(sc.series(trace.t0))
            return trace
        return stream()

    def _sustained_result(self, spec: SustainedSpec, nodeid: str, streams: list[StreamResult],
                          max_drift: float) -> SustainedResult:
        """The case's figures: medians over its streams, stalls and counts over all of them."""
        med = measure.median
        r: SustainedResult = self.new_result(
            SustainedResult, spec, spec.ctx, streams[0].prompt_tokens, nodeid,
            tokens=spec.tokens, repeat=len(streams), streams=streams, max_drift=max_drift,
            completion_tokens=streams[0].completion_tokens,
            ttft_s=med([s.ttft_s for s in streams]), total_s=med([s.total_s for s in streams]),
            decode_tps=med([s.decode_tps for s in streams]), client_tps=med([s.client_tps for s in streams]),
            tokens_per_chunk=med([s.tokens_per_chunk for s in streams]),
            stalls=sum(len(s.stalls) for s in streams),
            stall_s=sum(x["gap_s"] for s in streams for x in s.stalls),
            counts_exact=all(s.counts_exact for s in streams), count_source=streams[0].count_source)
        return r

    def _coalesce_s(self) -> float:
        return 0.0 if self.client.caps.step_chunks else BURST_S

    def check_acceptance_gates(self, spec: SustainedSpec, r: SustainedResult) -> None:
        """An acceptance gate asked for but without a trustworthy figure is an error, never a silent pass."""
        acc, url = r.acceptance, self.client.url
        hidden = (f"other traffic on {url} moved its spec-decode counters during this case and the server gives "
                  "no per-request counts, so the acceptance figure is hidden; run the case when the server is "
                  "otherwise idle")
        contaminated = bool(acc and acc.get("contaminated"))
        if spec.require_speculation and not _speculates(acc):
            if contaminated:
                raise measure.MeasurementError(f"require_speculation cannot be judged: {hidden}")
            raise measure.MeasurementError(
                f"require_speculation=True but {url} shows no speculative decoding "
                f"({_accept_note(acc)}); enable a draft method on the server or drop require_speculation")
        if spec.min_accept_len is not None and (acc is None or acc.get("mean_len") is None):
            why = hidden if contaminated else (
                f"{self.client.kind} at {url} shows no mean acceptance length ({_accept_note(acc)}); expose "
                "spec-decode metrics (e.g. --metrics) or drop min_accept_len")
            raise measure.MeasurementError(f"min_accept_len cannot be judged: {why}")
        if spec.max_accept_drop is not None and r.attribution is None:
            raise measure.MeasurementError(
                f"max_accept_drop cannot be judged: per-window acceptance needs one stream chunk per engine step, "
                f"which {self.client.kind} does not send; gate on min_accept_len instead")

    def scrape_metrics(self) -> dict[str, float] | None:
        """The server's /metrics counters now, or None where it has none."""
        if not self.client.caps.metrics:
            return None
        text = self.client.metrics_text()
        try:
            return acceptance.snapshot(text) if text else None
        except ValueError:
            return None  # unparsable /metrics: acceptance from other sources

    def acceptance_of(self, streams: list[StreamResult], before: dict[str, float] | None,
                      after: dict[str, float] | None, timings: list[dict[str, Any]],
                      resp_metrics: list[dict[str, Any]], spec_details: list[dict[str, Any]]
                      ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Best source first: counters, then per-response fields, then chunk sizes; plus the slowdown split.

        Per-response counts win over counters that lack a rate (SGLang) or were moved by other
        traffic: they belong to this request alone.
        """
        completion = sum(s.completion_tokens for s in streams)
        step_chunks = self.client.caps.step_chunks
        n_steps = sum(round(s.completion_tokens / s.tokens_per_chunk) for s in streams) if step_chunks else None
        acc = None
        if before is not None and after is not None:
            acc = acceptance.from_metrics(self.client.kind, before, after, completion, n_steps)
            if acc is None and self.client.kind == "tgi":
                acc = acceptance.from_tgi_summary(before, after)
        per_request = acceptance.from_vllm_response(resp_metrics) or acceptance.from_sglang_details(spec_details)
        if per_request is not None and (acc is None or acc.contaminated or acc.rate is None):
            if acc is not None and acc.contaminated:
                per_request.note = "counters moved more than this case explains (other traffic): per-request counts"
            acc = per_request
        if acc is None and timings:
            acc = acceptance.from_llamacpp_timings(timings)
        elif acc is not None and timings and acc.rate is None:
            resp = acceptance.from_llamacpp_timings(timings)
            acc.rate = resp.rate if resp else None
        if step_chunks and (acc is None or acc.contaminated):
            # Chunk sizes belong to this request alone, so they stand in for counters other traffic moved.
            chunks = acceptance.from_chunks(measure.median([s.tokens_per_chunk for s in streams]))
            if acc is not None:
                chunks.note = "counters moved more than this case explains (other traffic): " + chunks.note
            acc = chunks
        split = _attribution(streams) if step_chunks else None
        return (acc.as_dict() if acc else None), split

    def two_point(self, spec: TwoPointSpec, nodeid: str = "", *, seed: int | None = None,
                  until: Until | None = None) -> TwoPointResult:
        """(long - short) / (t_long - t_short) on one prompt, its prefix cache warmed first.

        ``seed`` defaults to the case's own; every request carries it and the case's temperature.
        With ``repeat="auto"`` pairs are added until ``until`` decides (``max_repeat`` at most).
        """
        seed = case_seed(nodeid) if seed is None else seed
        prompt = self.prompt(spec.content, spec.ctx, seed, spec.api)
        ask = {"api": spec.api, "temperature": spec.temperature, "seed": seed}
        samples: list[float] = []
        shorts, longs = [], []
        usage: dict[str, Any] = {}
        while more_trials(spec, len(samples), lambda: until is not None and not until({"decode_tps": samples})):
            # Warm the prefix cache so both requests prefill alike (servers that cache reuse it; others redo it).
            self.client.complete(prompt.text, 1, **ask)
            short = self.client.complete(prompt.text, spec.short, **ask)
            long = self.client.complete(prompt.text, spec.long, **ask)
            n_long = int(long.usage.get("completion_tokens", 0))
            measure.check_length(spec.long, n_long, long.finish_reason, self.client.kind)
            samples.append(measure.two_point_rate(short, long))
            shorts.append(short.elapsed_s)
            longs.append(long.elapsed_s)
            usage = long.usage
        med = measure.median
        return self.new_result(TwoPointResult, spec, spec.ctx, usage.get("prompt_tokens"), nodeid, short=spec.short,
                          long=spec.long, t_short_s=med(shorts), t_long_s=med(longs), decode_tps=med(samples),
                          repeat=len(samples), samples_tps=samples)

    def ctx_sweep(self, spec: CtxSweepSpec, nodeid: str = "") -> SweepResult:
        """A two-point measurement at each ctx (long = short + tokens)."""
        points = []
        for ctx in spec.ctxs:
            tp = TwoPointSpec(ctx=ctx, content=spec.content, repeat=spec.repeat, short=spec.short,
                              long=spec.short + spec.tokens, api=spec.api, temperature=spec.temperature)
            p = self.two_point(tp, f"{nodeid}@{ctx}")
            points.append({"ctx": ctx, "prompt_tokens": p.prompt_tokens, "decode_tps": p.decode_tps,
                           "t_short_s": p.t_short_s, "t_long_s": p.t_long_s, "samples_tps": p.samples_tps})
        return self.new_result(SweepResult, spec, max(spec.ctxs), points[-1]["prompt_tokens"], nodeid, points=points,
                          decode_tps=min(p["decode_tps"] for p in points))


def text_sha(prompt: str, trace: Trace) -> str:
    """A short hash of a stream's prompt and generated text: equal hashes decoded the same tokens."""
    h = hashlib.sha256(prompt.encode())
    h.update(b"\0")
    for c in trace.chunks:
        h.update(c.text.encode())
    return h.hexdigest()[:16]


def _context_needed(spec: CaseSpec) -> tuple[int, int]:
    """(prompt tokens, generated tokens) of the case's largest request."""
    if isinstance(spec, CtxSweepSpec):
        return max(spec.ctxs), spec.short + spec.tokens
    if isinstance(spec, TwoPointSpec):
        return spec.ctx, spec.long
    if isinstance(spec, SustainedSpec):
        burst = TwoPointSpec().long if spec.max_burst_gap is not None else 0
        return spec.ctx, max(spec.tokens, burst)
    return spec.ctx, 0


def _speculates(acc: dict[str, Any] | None) -> bool:
    if not acc:
        return False
    if acc.get("contaminated") and acc.get("rate") is None:
        return False  # hidden by other traffic: nothing shows speculation
    if acc.get("drafted") == 0:
        return False
    return acc.get("mean_len") is None or acc["mean_len"] > 1.01 or bool(acc.get("rate"))


def _accept_note(acc: dict[str, Any] | None) -> str:
    if not acc:
        return "no spec-decode counters, fields or multi-token steps"
    return acc.get("note") or f"mean acceptance length {acc.get('mean_len')}"


def _attribution(streams: list[StreamResult]) -> dict[str, Any] | None:
    """Split log(late/early rate) into tokens-per-step and step-time parts (chunks are steps here)."""
    parts = []
    for s in streams:
        tpc, cps = s.window_tokens_per_chunk, s.window_chunks_per_s
        if len(tpc) < 8 or any(not np.isfinite(x) for x in tpc + cps):
            continue
        m = max(3, int(np.ceil(0.25 * len(tpc))))
        parts.append((float(np.median(tpc[:m])), float(np.median(tpc[-m:])),
                      1000.0 / float(np.median(cps[:m])), 1000.0 / float(np.median(cps[-m:]))))
    if not parts:
        return None
    a0, a1, b0, b1 = (float(np.median([p[i] for p in parts])) for i in range(4))
    share_a, share_b = stats.split_log_change(a0, a1, b0, b1)
    return {"accept_early": a0, "accept_late": a1, "step_ms_early": b0, "step_ms_late": b1,
            "accept_share": share_a, "step_share": share_b}


@dataclass
class _Trials:
    """What the streams of one sustained case gathered."""

    streams: list[StreamResult] = field(default_factory=list)
    drifts: list[stats.Drift] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    scrape_series: list[list[dict[str, float]]] = field(default_factory=list)  # vLLM counters, per stream


def _step_windows(r: SustainedResult, streams: list[StreamResult]) -> None:
    """Per-window acceptance length and step time, where every stream has the same windows (chunks are steps)."""
    per_stream = [s for s in streams if s.window_tokens_per_chunk]
    if per_stream and len({len(s.window_tokens_per_chunk) for s in per_stream}) == 1:
        r.window_accept_len = [float(x) for x in np.median([s.window_tokens_per_chunk for s in per_stream], axis=0)]
        r.window_step_ms = [1000.0 / float(x) for x in np.median([s.window_chunks_per_s for s in per_stream], axis=0)]
