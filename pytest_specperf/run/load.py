"""Load cases: N users at once (``sustained(concurrency=N)``) and concurrency sweeps (``load_sweep``).

Each stream is measured exactly as a single stream is (``stream_figures.stream_result``); on top of that a
load result has per-user figures (median and 10th-percentile decode, TTFT p50/p90) and the
aggregate output rate over the common window, the span in which every stream was decoding: from
the last stream's first token to the first stream's last token. Outside that window fewer than N
users are served, so the aggregate there would describe a smaller load.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from pytest_specperf.cases import lengths
from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.closed_loop import LoadSweepSpec, SustainedSpec
from pytest_specperf.cases.results import LoadLevel, LoadSweepResult, StreamResult, SustainedResult
from pytest_specperf.endpoint.concurrent import StreamRequest, traces
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.errors import MeasurementError
from pytest_specperf.run import acceptance, cached_share, categories, drift, lateness, stream_figures, workers
from pytest_specperf.run.context import CaseContext, Until, case_seed
from pytest_specperf.run.floors import JudgeSettings, judge_sustained, settle

#: The knee: the first level past which aggregate throughput grows less than this per doubling of users.
KNEE_GAIN = 0.10


def sustained_load(context: CaseContext, spec: SustainedSpec, nodeid: str) -> SustainedResult:
    """``spec.concurrency`` streams of distinct prompts at once (starts spread over ``ramp_s``), measured per user.

    With more requests than users (``requests=K``, or every prompt of a prompt file) each user sends its next
    request as soon as its last one ended (closed loop with refill), and the judged figures come from the
    steady window (``steady_window``); warm-up and drain are measured and shown, not judged.
    """
    seed = case_seed(nodeid)
    n = spec.concurrency
    context.senders.check(n, "concurrency")  # before a prompt is built: past the workers' bound is a usage error
    requests = []
    recs = categories.records(spec)
    k = request_count(spec, len(recs) if recs else None)
    # Each request's lengths: the case's, or drawn for this node id (cases/lengths.py)
    toks = lengths.per_request(spec.tokens_dist, spec.tokens, k, nodeid)
    ctxs = lengths.per_request(spec.ctx_dist, spec.ctx, k, nodeid)
    if recs:  # a prompt file: each request its own prompt, drawn from the file (categories.draw)
        drawn = categories.draw(recs, k, seed)
        for i, rec in enumerate(drawn):
            requests.append(StreamRequest(prompt=rec.text, max_tokens=toks[i], api=spec.api, seed=seed + i,
                                          temperature=spec.temperature, at_s=spec.ramp_s * min(i, n) / n,
                                          messages=categories.messages(rec, spec.api)))
    for i, prompt in enumerate([] if recs else context.prompts_of(spec.content, ctxs, [seed + i for i in range(k)],
                                                                   spec.api)):
        requests.append(StreamRequest(prompt=prompt.text, max_tokens=toks[i], api=spec.api, seed=seed + i,
                                      temperature=spec.temperature, at_s=spec.ramp_s * min(i, n) / n))
    before = context.scrape_metrics()
    senders, client = context.senders, context.client
    sent = senders.streams(client, requests) if k == n else senders.closed_loop(client, requests, n)
    outcomes = sent.outcomes
    after = context.scrape_metrics()
    found = traces(outcomes)
    streams, drifts = [], []
    for i, (o, trace) in enumerate(zip(outcomes, found, strict=True)):
        stream_figures.check_length(toks[i], trace.completion_tokens, trace.finish_reason, context.client.kind)
        s, d = stream_figures.stream_result(trace, coalesce_s=context.coalesce_s())
        s.sent_s, s.user = o.sent_s, o.user if k > n else i
        if spec.tokens_dist is not None or (spec.ctx_dist is not None and not recs):
            s.drawn_tokens, s.drawn_ctx = toks[i], None if recs else ctxs[i]
        if recs:
            s.category, s.prompt_id = drawn[i].category, drawn[i].id
        streams.append(s)
        drifts.append(d)
    steady = steady_window(found, [o.user for o in outcomes]) if k > n else None
    judged = [i for i in range(len(streams)) if steady is None or in_window(found[i], steady)]
    if not judged:  # a refill run whose every stream straddles the window's edges: judge them all
        judged = list(range(len(streams)))
    js, jt = [streams[i] for i in judged], [found[i] for i in judged]
    r = _result(context, spec, nodeid, js, found, steady, jt)
    r.drawn = lengths.described({"tokens": spec.tokens_dist, "ctx": None if recs else spec.ctx_dist})
    if r.drawn:  # the median request's lengths stand for the case
        r.tokens, r.ctx = int(np.median(toks)), int(np.median(ctxs))
    r.streams = js
    r.requests = k
    if steady is not None:
        _edges(r, streams, found, judged, steady, outcomes[0].origin)
    stream_figures.phases(r, js, jt, context.client.caps.step_chunks)
    if recs:  # per category over every request of the file, warm-up and drain included
        categories.attach(r, spec, streams, found, context.client.caps.step_chunks)
    bound = lateness.load_bound(s.total_s for s in streams)
    lateness.attach(r, [o.late_s for o in outcomes], bound, spread=True)
    workers.attach(r, sent, bound, spread=True)
    _no_common_window(r, spec, [o.late_s for o in outcomes])
    found_drifts = [d for i in judged if (d := drifts[i]) is not None]
    _drift(r, js, found_drifts, spec.max_drift if spec.max_drift is not None else context.judging.max_drift,
           context.timing_noise() if found_drifts else None)
    r.acceptance, r.attribution = context.acceptance_of(streams, before, after, *acceptance.response_fields(found))
    context.check_acceptance_gates(spec, r)
    return r


def request_count(spec: SustainedSpec, file_prompts: int | None) -> int:
    """Requests a load case sends: ``requests``; over a prompt file without it, every prompt once (at least one
    per user); else one per user."""
    if spec.requests is not None:
        return int(spec.requests)
    return max(file_prompts, spec.concurrency) if file_prompts is not None else spec.concurrency


#: A stream is judged with the steady window when at least this share of its decode lies inside it.
STEADY_SHARE = 0.5


def steady_window(found: Sequence[Trace], users: Sequence[int]) -> tuple[float, float]:
    """(start, end) on the client's clock of the span in which every user had a request in flight and had been
    served: from the last user's first token (warm-up: not every user decoding yet) to the first moment a user
    found no request left (its last stream's last token; after it, drain: fewer than N in flight).

    Without refill (one request per user) this is the common window of ``aggregate_tps``.
    """
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for t, u in zip(found, users, strict=True):
        a, b = t.t0 + t.chunks[0].t, t.t0 + t.chunks[-1].t
        first[u], last[u] = min(first.get(u, a), a), max(last.get(u, b), b)
    return max(first.values()), min(last.values())


def in_window(trace: Trace, window: tuple[float, float]) -> bool:
    """Whether at least STEADY_SHARE of the stream's decode (first to last token) lies inside ``window``."""
    a, b = trace.t0 + trace.chunks[0].t, trace.t0 + trace.chunks[-1].t
    inside = min(b, window[1]) - max(a, window[0])
    return b > a and inside >= STEADY_SHARE * (b - a)


def _edges(r: SustainedResult, streams: list[StreamResult], found: list[Trace], judged: list[int],
           steady: tuple[float, float], origin: float) -> None:
    """Warm-up and drain of a refill run: their spans and the requests left out of the judged figures."""
    start, end = steady
    last = max(t.t0 + t.chunks[-1].t for t in found)
    r.warmup_s, r.drain_s = max(0.0, start - origin), max(0.0, last - end)
    kept = set(judged)
    left = [i for i in range(len(streams)) if i not in kept]
    mid = {i: found[i].t0 + (found[i].chunks[0].t + found[i].chunks[-1].t) / 2 for i in left}
    r.warmup_requests = sum(1 for i in left if mid[i] < start)
    r.drain_requests = len(left) - r.warmup_requests
    r.warmup_drain_streams = [streams[i] for i in left]
    r.notes.append(f"steady window {end - start:.2f} s with {r.concurrency} in flight: {len(judged)} of "
                   f"{len(streams)} requests judged; warm-up {r.warmup_s:.2f} s ({r.warmup_requests} left out) "
                   f"and drain {r.drain_s:.2f} s ({r.drain_requests} left out) shown, not judged")


def _result(context: CaseContext, spec: SustainedSpec, nodeid: str, streams: list[StreamResult],
            found: list[Trace], steady: tuple[float, float] | None = None, judged: list[Trace] | None = None
            ) -> SustainedResult:
    """Per-user figures over the judged ``streams`` (``judged``: their traces; default every trace), the aggregate
    over every trace in ``found`` (over the ``steady`` window, with refill)."""
    judged = found if judged is None else judged
    decode = [s.decode_tps for s in streams]
    ttft = [s.ttft_s for s in streams]
    med = stream_figures.median
    total, window = aggregate_tps(found, steady)
    r: SustainedResult = context.new_result(
        SustainedResult, spec, spec.ctx, streams[0].prompt_tokens, nodeid,
        tokens=spec.tokens, repeat=1, streams=streams, concurrency=spec.concurrency, ramp_s=spec.ramp_s,
        completion_tokens=streams[0].completion_tokens, ttft_s=med(ttft), total_s=med([s.total_s for s in streams]),
        decode_tps=med(decode), client_tps=med([s.client_tps for s in streams]),
        decode_p10_tps=float(np.percentile(decode, 10)), total_tps=total, common_window_s=window,
        ttft_p50_s=float(np.percentile(ttft, 50)), ttft_p90_s=float(np.percentile(ttft, 90)),
        ttft_p99_s=float(np.percentile(ttft, 99)),
        tokens_per_chunk=med([s.tokens_per_chunk for s in streams]),
        stalls=sum(len(s.stalls) for s in streams), stall_s=sum(x.gap_s for s in streams for x in s.stalls),
        bursts=sum(len(s.bursts) for s in streams),
        counts_exact=all(s.counts_exact for s in streams), count_source=streams[0].count_source)
    if context.client.caps.step_chunks:
        r.step_ms = med([step_ms(t) for t in judged])
    return r


def _no_common_window(r: SustainedResult, spec: SustainedSpec, late_s: Sequence[float] = ()) -> None:
    """Streams that never all decoded at once: an error when that leaves the case unmeasured, else a note.

    Where the client fell behind and its lateness spread the starts more than the ramp asked (``late_s``), the
    client is to blame: inconclusive through lateness, never an error of the case."""
    if r.total_tps is not None:
        return
    window = r.common_window_s
    why = f"ramp_s={spec.ramp_s:g} spreads the starts: lower it" if spec.ramp_s else (
        "the server queued some of them, or they are too short: raise tokens")
    text = (f"no common window: the {spec.concurrency} streams all decoded at once for only "
            f"{window or 0:.3f} s, under {MIN_OVERLAP:.0%} of a stream's decode ({why})")
    client_spread = max(late_s) - min(late_s) if late_s else 0.0
    if r.client_behind and client_spread >= spec.ramp_s:
        # The client itself sent them apart: the verdict is inconclusive (lateness), not a judgement of the server.
        r.notes.append(f"{text}; aggregate tok/s not measured: {r.client_behind}")
        return
    # A ramp that spread the streams apart measured no load of N users, and a floor on their sum has
    # nothing to judge: the case could not measure what it was asked, an error and never a verdict.
    # (Without either, streams a busy server happened to serve apart keep their per-user figures.)
    if (spec.ramp_s and not window) or spec.min_total_tps is not None:
        gate = f"; min_total_tps {spec.min_total_tps:g} cannot be judged" if spec.min_total_tps else ""
        raise MeasurementError(f"could not measure {spec.concurrency} users at once: {text}{gate}")
    r.notes.append(f"{text}; aggregate tok/s not measured")


def _drift(r: SustainedResult, streams: list[StreamResult], drifts: list[drift.Drift], max_drift: float,
           noise_s: float | None) -> None:
    """The drift gate over every stream, as for a sustained case with repeats."""
    r.max_drift = max_drift
    judged = stream_figures.judge_drift(r, streams, drifts, max_drift, noise_s)
    if judged and len({len(s.window_tps) for s in streams}) == 1:
        r.window_tps = [float(x) for x in np.median(np.array([s.window_tps for s in streams]), axis=0)]


#: The common window must cover at least this share of the median stream's decode: shorter, it holds
#: a few bursts (a speculative step delivers many tokens at once) and the sum says nothing of the load.
MIN_OVERLAP = 0.5


def aggregate_tps(found: list[Trace], window: tuple[float, float] | None = None
                  ) -> tuple[float | None, float | None]:
    """(output tok/s summed over streams, window s) over the span in which every stream was decoding
    (with refill, over the given steady ``window``).

    Each stream's cumulative token count is a step curve over absolute time; tokens in the window
    are read off it at the window's edges, interpolating linearly inside a step so a chunk that
    straddles an edge is shared in proportion. (None, window) when the streams overlapped for less
    than MIN_OVERLAP of the median stream's decode (a server that queued them, a long ramp).
    """
    start, end = window or (max(t.t0 + t.chunks[0].t for t in found), min(t.t0 + t.chunks[-1].t for t in found))
    spans = [t.chunks[-1].t - t.chunks[0].t for t in found]
    if end - start < MIN_OVERLAP * float(np.median(spans)) or end <= start:
        return None, max(end - start, 0.0)
    tokens = 0.0
    for t in found:
        times = np.array([t.t0 + c.t for c in t.chunks])
        cum = np.cumsum([c.tokens for c in t.chunks], dtype=float)
        tokens += float(np.interp(end, times, cum) - np.interp(start, times, cum))
    return tokens / (end - start), end - start


def step_ms(trace: Trace) -> float:
    """Mean decode step time of one stream whose chunks are engine steps: decode time / steps after the first."""
    ch = trace.chunks
    return 1000.0 * (ch[-1].t - ch[0].t) / (len(ch) - 1) if len(ch) > 1 else math.nan


# -- sweeps -------------------------------------------------------------------------------------------


def load_sweep(context: CaseContext, spec: LoadSweepSpec, nodeid: str) -> LoadSweepResult:
    """A sustained load at each level, lowest first; levels are judged on their own floors."""
    context.senders.check(max(spec.concurrency), "concurrency")  # the highest level, before the lowest is sent
    levels = []
    for c in spec.concurrency:
        lspec = spec.level(c)
        r = sustained_load(context, lspec, f"{nodeid}@c={c}")
        # each level's TTFT floors are judged here, so each needs its own cached share first (the runner's comes after)
        cached_share.attach(r, context.cold_allowance(spec.api), spec.prefix_cache)
        judge_sustained(r, lspec, context.judging)
        levels.append(level_fields(r))
    info = context.client.info or context.client.detect()
    totals = [lv.total_tps for lv in levels if lv.total_tps is not None]
    prompt_tokens = levels[0].prompt_tokens
    result = LoadSweepResult(
        kind=spec.KIND, endpoint=context.client.url, model=str(context.client.model), server=info.kind,
        server_version=info.details.get("version"), ctx=spec.ctx,  # not result data
        prompt_tokens=None if prompt_tokens is None else int(prompt_tokens),
        nodeid=nodeid, content=spec.content, temperature=spec.temperature,
        tokens=spec.tokens, concurrency=list(spec.concurrency), levels=levels,
        knee=knee([(lv.concurrency, lv.total_tps) for lv in levels]),
        decode_tps=levels[-1].decode_tps, total_tps=max(totals) if totals else None,
        min_total_tps=spec.min_total_tps, min_speedup=spec.min_speedup)
    result.notes.append(knee_text(result.knee, levels))
    result.drawn = lengths.described({"tokens": spec.tokens_dist, "ctx": spec.ctx_dist})
    if spec.prompts is not None:  # figures per category at the highest level: the load a deploy is sized for
        result.prompts, result.categories = spec.prompts, levels[-1].categories
        result.content = categories.content_label(spec)
        result.ctx = int(prompt_tokens or result.ctx)
    return result


def knee_text(at: int | None, levels: Sequence[LoadLevel]) -> str:
    """The knee in words, with the aggregate figures around it; only measured levels are spoken of."""
    points = [(lv.concurrency, lv.total_tps) for lv in levels]
    if len(points) == 1:
        return (f"knee not judged: one level ({_users(points[0][0])}) has no growth to judge; give "
                "concurrency two or more levels, e.g. [1, 2, 4, 8]")
    if at is None:
        measured = list(itertools.takewhile(lambda p: p[1] is not None, points))
        if len(measured) < len(points):
            gap = points[len(measured)][0]
            if len(measured) < 2:
                return f"knee not judged: aggregate tok/s not measured at {_users(gap)}"
            last = _users(measured[-1][0])
            return (f"no knee up to {last}: aggregate grows >= {KNEE_GAIN:.0%} per doubling; knee not judged past "
                    f"{last} (aggregate not measured at {_users(gap)})")
        return f"no knee up to {points[-1][0]} users: aggregate grows >= {KNEE_GAIN:.0%} per doubling"
    i = next(i for i, p in enumerate(points) if p[0] == at)
    (_, here), (users, past) = points[i], points[i + 1]
    return (f"knee at {at} user{'' if at == 1 else 's'}: aggregate {here:.1f} -> {past:.1f} tok/s at "
            f"{users} users, under {KNEE_GAIN:.0%} growth per doubling")


def _users(n: int) -> str:
    return f"{n} user{'' if n == 1 else 's'}"


#: A level's own fields; every other field of a LoadLevel is its SustainedResult's of the same name.
_LEVEL_OWN = frozenset({"accept_len", "accept_source", "kind", "trials"})


def level_fields(r: SustainedResult) -> LoadLevel:
    """One level of a sweep: the load fields of its result (every LoadLevel field a sustained result has, so a
    figure added to both is carried without a word here), mean accepted length, verdict and streams."""
    shared = {f.name: getattr(r, f.name) for f in dataclasses.fields(LoadLevel) if f.name not in _LEVEL_OWN}
    shared["warnings"], shared["notes"] = list(r.warnings), list(r.notes)  # a level's own, appended to later
    acc = r.acceptance
    return LoadLevel(**shared, accept_len=acc.mean_len if acc is not None else None,
                     accept_source=acc.source if acc is not None else None,
                     kind="sustained")  # compared like a sustained case: per-stream decode, aggregate per level


def knee(points: list[tuple[int, float | None]]) -> int | None:
    """The first level past which aggregate tok/s grows less than KNEE_GAIN per doubling of users.

    Growth between neighbouring levels c1 < c2 is put per doubling, (T2/T1) ** (1 / log2(c2/c1)) - 1,
    so sweeps with uneven steps are judged alike. None when every step still grows enough, or when a level's
    aggregate is missing before a knee shows (``knee_text`` says how far it was judged).
    """
    for (c1, t1), (c2, t2) in itertools.pairwise(points):
        if t1 is None or t2 is None or t1 <= 0:
            return None  # not judged past an unmeasured level: the growth beyond it is unknown
        per_doubling = (t2 / t1) ** (1.0 / math.log2(c2 / c1)) - 1.0
        if per_doubling < KNEE_GAIN:
            return c1
    return None


def sweep_problems(result: LoadSweepResult) -> list[str]:
    """Every level that failed, by its users; the levels' warnings are the sweep's (with their users)."""
    result.warnings += [f"at {_users(lv.concurrency)}: {w}" for lv in result.levels for w in lv.warnings]
    return [f"at {_users(lv.concurrency)}: {lv.reason}" for lv in result.levels if lv.verdict == "failed"]


class LoadSweep:
    """The ``load_sweep`` kind (``sustained(concurrency=N)`` is the ``sustained`` kind, measured here)."""

    name: ClassVar[str] = "load_sweep"
    spec_type: ClassVar[type[CaseSpec]] = LoadSweepSpec

    def context_needed(self, spec: LoadSweepSpec) -> tuple[int, int]:
        """Every user's request: ctx prompt tokens (a load case gets no generation check up front)."""
        return categories.ctx_needed(spec), 0

    def measure(self, context: CaseContext, spec: LoadSweepSpec, nodeid: str, until: Until | None = None
                ) -> LoadSweepResult:
        """``load_sweep`` (``until`` does not apply: each level is one run of N users)."""
        return load_sweep(context, spec, nodeid)

    def judge(self, result: LoadSweepResult, spec: LoadSweepSpec, settings: JudgeSettings) -> None:
        """Each level was judged on its own floors as it was measured; the sweep fails where a level failed."""
        settle(result, spec, sweep_problems(result), settings.inconclusive)
