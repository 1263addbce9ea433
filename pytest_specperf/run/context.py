"""What every case kind shares, below the kinds: the client, the prompt cache, new results, the warm-up,
the server's counters and acceptance, the acceptance gates, seeds and trial counts.

A kind measures through a ``CaseContext`` and never sees the runner that dispatched to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_specperf import stopping
from pytest_specperf.cases.base import AUTO_MAX_REPEAT, AUTO_MIN_TRIALS, CaseSpec
from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.cases.result_parts import Acceptance, Attribution
from pytest_specperf.cases.results import Result, StreamResult, SustainedResult
from pytest_specperf.endpoint.client import Client, Progress
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.errors import MeasurementError
from pytest_specperf.prompts import cold
from pytest_specperf.prompts.exact_length import COUNT_WORKERS, Prompt, build_prompt, build_prompts
from pytest_specperf.run import acceptance, drift
from pytest_specperf.run.floors import JudgeSettings
from pytest_specperf.run.stream_figures import median
from pytest_specperf.scale.senders import Local, Senders

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


def text_sha(prompt: str, trace: Trace) -> str:
    """A short hash of a stream's prompt and generated text: equal hashes decoded the same tokens."""
    h = hashlib.sha256(prompt.encode())
    h.update(b"\0")
    for c in trace.chunks:
        h.update(c.text.encode())
    return h.hexdigest()[:16]


#: back-to-back pairs of identical short requests whose median difference is the client's timing noise
NOISE_PAIRS = 3


class CaseContext:
    """One endpoint's shared means of measuring: its client, prompt cache, warm-up and judging settings."""

    def __init__(self, client: Client, judging: JudgeSettings | None = None,
                 progress: Callable[[str], Progress | None] | None = None, senders: Senders | None = None) -> None:
        self.client = client
        # who sends a load case's streams: this process (the default) or worker processes (scale/)
        self.senders: Senders = senders if senders is not None else Local()
        self.judging = judging or JudgeSettings()
        self._progress = progress
        self._prompts: dict[tuple[str, int, int, str], Prompt] = {}
        self._warm = False
        self._noise_s: float | None = None  # timing_noise, once measured
        # The running case's ``prefix_cache`` (the runner sets it per case): "cold" gives every request a
        # fresh tag; "warm" sends the built prompts as they are, each sent once untimed before its first use.
        self.prefix_cache = "cold"
        self._primed: set[tuple[str, str]] = set()
        self._allowance: dict[str, int] = {}

    def progress(self, nodeid: str) -> Progress | None:
        """The live-progress callback for a case's streams, or None."""
        return self._progress(nodeid) if self._progress else None

    def built(self, kind: str, ctx: int, variant: int, api: str = "completions") -> Prompt:
        """A prompt of ``ctx`` server tokens (cached per kind, ctx, variant and api), the same text in every run:
        what identifies a prompt (``text_sha``) and what ``prefix_cache="warm"`` sends. On a server that takes no
        cache salt it opens with the fixed tag, which each cold request swaps for its own."""
        return self.built_many(kind, ctx, [variant], api)[0]

    def built_many(self, kind: str, ctx: int, variants: list[int], api: str = "completions") -> list[Prompt]:
        """``built`` for many variants: the missing ones built side by side."""
        missing = [v for v in dict.fromkeys(variants) if (kind, ctx, v, api) not in self._prompts]
        # Where a cold request needs a tag, the prompt is built with one (counted in ctx) that each request swaps.
        head = "" if self.client.caps.cold_by else cold.head(cold.FIXED_TAG)
        # Chat prompts are counted with the server's chat template applied, so ctx holds for them too.
        if len(missing) == 1:
            self._prompts[(kind, ctx, missing[0], api)] = build_prompt(
                kind, ctx, self._counter(api), variant=missing[0], api=api, head=head)
        elif missing:
            built = build_prompts(kind, ctx, self._counter(api), missing, api=api, head=head)
            self._prompts.update({(kind, ctx, p.variant, api): p for p in built})
        return [self._prompts[(kind, ctx, v, api)] for v in variants]

    def prompt(self, kind: str, ctx: int, variant: int, api: str = "completions") -> Prompt:
        """The prompt one request sends, of ``ctx`` server tokens: with the case's ``prefix_cache="cold"`` (the
        default) the built text under a tag no earlier request sent, else the built text, sent once before."""
        return self.prompts(kind, ctx, [variant], api)[0]

    def prompts(self, kind: str, ctx: int, variants: list[int], api: str = "completions") -> list[Prompt]:
        """``prompt`` for many requests (a load case's users): built, then each tagged, side by side."""
        base = self.built_many(kind, ctx, variants, api)
        if self.prefix_cache == "warm":
            for p in base:
                self._prime(p.text, api)
            return base
        if self.client.caps.cold_by:  # the client keeps each request out of the cache with the text unchanged
            return base
        if len(base) == 1:
            return [self._fresh(base[0], api)]
        return stopping.thread_map(lambda p: self._fresh(p, api), base, min(COUNT_WORKERS, len(base)))

    def prompts_of(self, kind: str, ctxs: list[int], variants: list[int], api: str = "completions") -> list[Prompt]:
        """``prompts`` where each request has its own length (``ctxs[i]`` server tokens for ``variants[i]``): the
        requests of each length built together, the lengths side by side."""
        if len(set(ctxs)) <= 1:
            return self.prompts(kind, ctxs[0], variants, api) if ctxs else []
        groups: dict[int, list[int]] = {}
        for i, c in enumerate(ctxs):
            groups.setdefault(c, []).append(i)
        out: list[Prompt | None] = [None] * len(ctxs)

        def build(item: tuple[int, list[int]]) -> None:
            ctx, where = item
            for i, p in zip(where, self.prompts(kind, ctx, [variants[i] for i in where], api), strict=True):
                out[i] = p

        stopping.thread_map(build, list(groups.items()), min(COUNT_WORKERS, len(groups)))
        return [p for p in out if p is not None]

    def tags_prompts(self) -> bool:
        """Whether a cold request's prompt must open with a fresh tag: a cold case on a server the client cannot
        keep out of its cache otherwise (``Capabilities.cold_by``)."""
        return self.prefix_cache == "cold" and not self.client.caps.cold_by

    def salt(self) -> str | None:
        """A prefix-cache namespace for requests meant to share their cache (a session, two-point's pair): fresh
        for a cold case, None (the shared cache) for a warm one."""
        return cold.cold_salt() if self.prefix_cache == "cold" else None

    def _counter(self, api: str) -> Callable[[str], int]:
        def count(text: str) -> int:
            return self.client.count_tokens(text, api=api)
        return count

    def _fresh(self, base: Prompt, api: str) -> Prompt:
        """``base`` under a new tag, at its server-counted length (one count; rebuilt where the tag counts
        otherwise)."""
        new = cold.head(cold.new_tag())
        text = cold.retag(base.text, base.head, new)
        if self.client.count_tokens(text, api=api) == base.tokens:
            return dataclasses.replace(base, text=text, head=new)
        return build_prompt(base.kind, base.ctx, self._counter(api), variant=base.variant, api=api, head=new)

    def _prime(self, text: str, api: str) -> None:
        """``prefix_cache="warm"``: one untimed 1-token request puts the prompt in the server's cache before the
        first measured one."""
        if (text, api) not in self._primed:
            self.client.complete(text, 1, api=api)
            self._primed.add((text, api))

    def cold_allowance(self, api: str) -> int:
        """Cached tokens a cold request may still come back with: the tokens of a tag alone as the server counts
        it (the chat template's fixed head included), since a cache can hold only what precedes the tag's digits."""
        if api not in self._allowance:
            self._allowance[api] = self.client.count_tokens(cold.head(cold.FIXED_TAG), api=api)
        return self._allowance[api]

    def new_result(self, cls: type[Result], spec: CaseSpec, ctx: int, prompt_tokens: int | None, nodeid: str,
                   **fields: Any) -> Any:
        """A result of ``cls`` with what every case records: kind, endpoint, model, server, ctx, ``fields``."""
        info = self.client.info or self.client.detect()
        return cls(kind=spec.KIND, endpoint=self.client.url, model=str(self.client.model), server=info.kind,
                   ctx=ctx, prompt_tokens=prompt_tokens, nodeid=nodeid, content=spec.content,
                   temperature=spec.temperature, server_version=info.details.get("version"),  # not result data
                   **fields)

    def warm_up(self) -> None:
        """One short request before the first measured one (once per context)."""
        # The first request on a cold server pays for graph capture, allocator growth, and so on.
        if not self._warm:
            self.client.complete(self.built("prose", 32, 99_999).text, 8)
            self._warm = True

    def timing_noise(self) -> float:
        """The client's timing noise against this server (seconds): how far apart identical short requests took
        (the median of NOISE_PAIRS back-to-back pairs: one late wake-up is not the client's usual noise), measured
        once per context after the warm-up, for the rule that refuses a rate over a span shorter than ten times it
        (``stream_figures.SPAN_OVER_NOISE``)."""
        if self._noise_s is None:
            self.warm_up()
            text = self.built("prose", 32, 99_999).text
            took = [self.client.complete(text, 8).elapsed_s for _ in range(NOISE_PAIRS + 1)]
            self._noise_s = float(np.median(np.abs(np.diff(took))))
        return self._noise_s

    def coalesce_s(self) -> float:
        """Events closer than this are one delivery (0 where every chunk is an engine step)."""
        return 0.0 if self.client.caps.step_chunks else BURST_S

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
                      ) -> tuple[Acceptance | None, Attribution | None]:
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
            chunks = acceptance.from_chunks(median([s.tokens_per_chunk for s in streams]))
            if acc is not None:
                chunks.note = "counters moved more than this case explains (other traffic): " + chunks.note
            acc = chunks
        server_steps = bool(streams) and all(s.window_steps_from == "server" for s in streams)
        split = _attribution(streams) if step_chunks or server_steps else None
        return acc, split

    def check_acceptance_gates(self, spec: SustainedSpec, r: SustainedResult) -> None:
        """An acceptance gate asked for but without a trustworthy figure is an error, never a silent pass."""
        acc, url = r.acceptance, self.client.url
        hidden = (f"other traffic on {url} moved its spec-decode counters during this case and the server gives "
                  "no per-request counts, so the acceptance figure is hidden; run the case when the server is "
                  "otherwise idle")
        contaminated = acc is not None and acc.contaminated
        if spec.require_speculation and not _speculates(acc):
            if contaminated:
                raise MeasurementError(f"require_speculation cannot be judged: {hidden}")
            raise MeasurementError(
                f"require_speculation=True but {url} shows no speculative decoding "
                f"({_accept_note(acc)}); enable a draft method on the server or drop require_speculation")
        if spec.min_accept_len is not None and (acc is None or acc.mean_len is None):
            why = hidden if contaminated else (
                f"{self.client.kind} at {url} shows no mean acceptance length ({_accept_note(acc)}); expose "
                "spec-decode metrics (e.g. --metrics) or drop min_accept_len")
            raise MeasurementError(f"min_accept_len cannot be judged: {why}")
        if spec.max_accept_drop is not None and r.attribution is None:
            raise MeasurementError(
                f"max_accept_drop cannot be judged: per-window acceptance needs one stream chunk per engine step, "
                f"which {self.client.kind} does not send; gate on min_accept_len instead")


def _speculates(acc: Acceptance | None) -> bool:
    if acc is None:
        return False
    if acc.contaminated and acc.rate is None:
        return False  # hidden by other traffic: nothing shows speculation
    if acc.drafted == 0:
        return False
    return acc.mean_len is None or acc.mean_len > 1.01 or bool(acc.rate)


def _accept_note(acc: Acceptance | None) -> str:
    if acc is None:
        return "no spec-decode counters, fields or multi-token steps"
    return acc.note or f"mean acceptance length {acc.mean_len}"


def _attribution(streams: list[StreamResult]) -> Attribution | None:
    """Split log(late/early rate) into tokens-per-step and step-time parts (steps from chunks or the server)."""
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
    share_a, share_b = drift.split_log_change(a0, a1, b0, b1)
    split = Attribution(accept_early=a0, accept_late=a1, step_ms_early=b0, step_ms_late=b1,
                        accept_share=share_a, step_share=share_b)
    # With a reasoning phase the early windows are reasoning and the late ones the answer: say each phase's rate.
    reasoned = [s for s in streams if s.reasoning_tps is not None and s.content_tps is not None]
    if reasoned:
        split.reasoning_tps = reasoning = median([float(s.reasoning_tps or 0) for s in reasoned])
        split.content_tps = content = median([float(s.content_tps or 0) for s in reasoned])
        split.slower_phase = "reasoning" if reasoning < content else "answer"
    return split
