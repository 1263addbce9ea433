"""From traces to results: pure functions, no I/O (the runner does the requests)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import scipy  # scipy.special loads on first use

from pytest_specperf.cases.base import MIN_DRIFT_TOKENS
from pytest_specperf.cases.result_parts import Burst, Stall
from pytest_specperf.cases.results import StreamResult, SustainedResult
from pytest_specperf.endpoint.client import Completion
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.errors import MeasurementError
from pytest_specperf.run import drift as stats


def check_length(asked: int, got: int, finish_reason: str | None, server: str) -> None:
    """A completion shorter than asked cannot be measured fairly: say why, as an error."""
    if got < asked:
        why = f"finish_reason={finish_reason}" if finish_reason else "no finish_reason"
        hint = ("the server cannot force the length (no ignore_eos/min_tokens)"
                if server in ("tgi", "ollama", "openai") else "the server stopped early despite ignore_eos")
        raise MeasurementError(f"output {got} tokens < {asked} asked ({why}): {hint}; lower tokens= or use a "
                               "server that honours ignore_eos")


def coalesce(t: np.ndarray, k: np.ndarray, gap_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge chunks that arrived within ``gap_s`` of the previous one (a burst of per-token events)."""
    if gap_s <= 0 or len(t) < 2:
        return t, k
    starts = np.concatenate([[True], np.diff(t) > gap_s])
    groups = np.cumsum(starts) - 1
    last = np.concatenate([np.flatnonzero(starts)[1:] - 1, [len(t) - 1]])
    return t[last], np.bincount(groups, weights=k).astype(int)


def stream_result(trace: Trace, coalesce_s: float = 0.0) -> tuple[StreamResult, stats.Drift | None]:
    """Decode rate, windows, drift and stalls of one stream (drift is None when too short for windows).

    ``coalesce_s`` > 0 merges bursts of per-token events into deliveries before windowing; the first
    chunk (TTFT) is never merged with what follows it.
    """
    t, k = _deliveries(trace, coalesce_s)
    decode = stats.decode_tps(t, k)
    if decode is None:
        raise MeasurementError(f"only {int(k.sum())} tokens in {len(k)} chunk(s): too few to measure a decode rate")
    result = StreamResult(
        prompt_tokens=trace.prompt_tokens,
        completion_tokens=trace.completion_tokens,
        ttft_s=float(t[0]),
        total_s=trace.total_s,
        decode_tps=decode,
        client_tps=trace.completion_tokens / trace.total_s if trace.total_s > 0 else 0.0,
        # n/a until _add_windows sets them
        window_tokens=None,
        window_tps=[],
        early_tps=None,
        late_tps=None,
        drift=None,
        trend_p=None,
        stalls=[],
        tokens_per_chunk=float(k[1:].mean()) if len(k) > 1 else float(k[0]),
        count_source=trace.count_source,
        counts_exact=trace.exact,
        response_id=trace.response_id,
        server_timings=trace.timings,
    )
    result.cached_tokens = trace.cached_tokens
    if trace.reasoning_tokens > 0:
        rates = phase_decode_tps(trace)
        result.ttft_content_s = trace.ttft_content_s
        result.reasoning_tokens, result.content_tokens = trace.reasoning_tokens, trace.content_tokens
        result.reasoning_tps, result.content_tps = rates["reasoning"], rates["content"]
    d = _add_windows(result, t, k, server_step_tokens(trace))
    result.stalls = [Stall(at_token=s.at_token, gap_s=s.gap_s) for s in stats.find_stalls(t, k)]
    result.bursts = [Burst(at_token=b.at_token, tokens=b.tokens, span_s=b.span_s) for b in stats.find_bursts(t, k)]
    return result, d


def _deliveries(trace: Trace, coalesce_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(times, tokens) of the stream's chunks; with ``coalesce_s`` bursts after the first chunk are merged."""
    t = np.array([c.t for c in trace.chunks], dtype=float)
    k = np.array([c.tokens for c in trace.chunks], dtype=int)
    if coalesce_s > 0 and len(t) > 1:
        t1, k1 = coalesce(t[1:], k[1:], coalesce_s)
        t, k = np.concatenate([t[:1], t1]), np.concatenate([k[:1], k1])
    return t, k


def server_step_tokens(trace: Trace) -> list[int] | None:
    """Tokens of each decode step, in order, from vLLM's ``per_step_accepted`` (``--per-request-spec-decode-metrics
    detailed``); None unless those steps account for every decode token (vLLM lists only steps that drafted)."""
    metrics = trace.extras.get("metrics")  # not result data
    sd = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None  # not result data
    accepted = sd.get("per_step_accepted") if isinstance(sd, dict) else None  # not result data
    if not isinstance(accepted, list) or not accepted or not all(isinstance(a, int) for a in accepted):
        return None
    steps = [a + 1 for a in accepted]  # the accepted drafts and the step's own (bonus) token
    return steps if sum(steps) == trace.completion_tokens - 1 else None  # the first token is the prefill's


def _add_windows(result: StreamResult, t: np.ndarray, k: np.ndarray, server_steps: list[int] | None = None
                 ) -> stats.Drift | None:
    """Set the stream's window rates, drift and per-window step split; None (all n/a) when too short for windows.

    With the server's own per-step token counts the split is exact whatever the chunks hold (a chunk is
    not a step under vLLM's ``--stream-interval``); else chunks are taken as steps."""
    try:
        windows = stats.window_rates(t, k)
    except ValueError:
        return None  # too short for windows: rates and drift stay n/a
    d = stats.drift(windows, trace=(t, k))
    result.window_tokens, result.window_tps = windows.window_tokens, list(windows.rates)
    result.early_tps, result.late_tps, result.drift, result.trend_p = d.early_tps, d.late_tps, d.drift, d.mk_p
    if server_steps is not None:
        # Windows start after the first chunk's tokens, the steps after the prefill's one token.
        cum = np.concatenate([[0], np.cumsum(server_steps)]) - (int(k[0]) - 1)
        result.window_steps_from = "server"
    else:
        cum = np.concatenate([[0], np.cumsum(k[1:])])
        result.window_steps_from = "chunks"
    result.window_tokens_per_chunk, result.window_chunks_per_s = _split_windows(
        cum, windows.bounds_s, windows.window_tokens)
    return d


def _split_windows(cum: np.ndarray, bounds: list[float], window_tokens: int) -> tuple[list[float], list[float]]:
    """Per window: tokens per step and steps per second, ``cum`` the decode tokens done after each step (0 first).

    Windows are cut at token counts, which rarely fall on step edges, so a step is shared between
    the windows its tokens fall in, in proportion: a window holding half of a 5-token step counts
    half a step. Counting whole steps instead aliases (exactly 5 tokens per step reads 5.33, 4.57,
    5.33, ... over 64-token windows).
    """
    dur = np.diff(np.asarray(bounds, dtype=float))
    if dur.size == 0:
        return [], []
    edges = np.arange(dur.size + 1, dtype=float) * window_tokens
    # Steps done by token x: piecewise linear in x, one per chunk, so fractions split a chunk.
    steps = np.diff(np.interp(edges, cum, np.arange(cum.size, dtype=float)))
    tpc = [float(window_tokens / n) if n > 0 else float("nan") for n in steps]
    cps = [float(n / d) if d > 0 else float("nan") for n, d in zip(steps, dur, strict=True)]
    return tpc, cps


def judge_drift(r: SustainedResult, streams: list[StreamResult], drifts: list[stats.Drift], max_drift: float,
                noise_s: float | None = None) -> bool:
    """The drift gate over every stream into ``r``; False ("not judged") when a stream was too short for one, or
    (given the client's measured timing ``noise_s``) its early or late windows too short to time."""
    if len(drifts) < len(streams):
        r.drift_verdict = "not judged"
        r.drift_gate = (f"drift not judged: {streams[0].completion_tokens} tokens are too few, it needs "
                        f"{MIN_DRIFT_TOKENS} (8 windows of 32 decode tokens)")
        return False
    untimed = None if noise_s is None else drift_span_problem(streams, drifts, noise_s)
    if untimed is not None:
        r.drift_verdict, r.drift_gate = "not judged", untimed
        for s in streams:  # no early, late or drift figure from spans that short
            s.early_tps = s.late_tps = s.drift = s.trend_p = None
        return False
    gate = stats.drift_gate(drifts, max_drift=max_drift)
    r.drift, r.drift_p, r.drift_gate, r.drift_failed = gate.drift, gate.p, gate.reason, gate.failed
    r.drift_verdict = gate.outcome
    r.early_tps = median([d.early_tps for d in drifts])
    r.late_tps = median([d.late_tps for d in drifts])
    return True


#: a rate's span must be this many times the client's timing noise: the noise then moves the rate by 10 % at most
SPAN_OVER_NOISE = 10.0
#: the timing noise is the upper bound, at this confidence, of what the identical requests measured
NOISE_CONFIDENCE = 0.95


def spread_of(groups: Sequence[Sequence[float]], leave_out: int = 0) -> float:
    """The standard deviation of one of several identical measurements (seconds), each group measured back to back:
    their variance pooled over the groups, at the NOISE_CONFIDENCE upper bound for the degrees of freedom the groups
    give (the sum of each group's size less one: a chi-square bound), never below the clock's resolution. With
    ``leave_out`` the measurements farthest from their group's median are left out first (each costs a degree of
    freedom): the client's usual noise, which one late wake-up among them is not.

    A spread from two measurements can be near zero by chance (one time in twelve within a tenth of its typical
    size), so a rule that trusts it accepts spans that the noise swamps; the bound is wide from few measurements (16
    times the estimate from two, 4.4 from three, 1.9 from six or seven, 1.8 from eight) and narrows as more are added.
    """
    kept = [sorted(g, key=lambda x: abs(x - float(np.median(g))))[:len(g) - leave_out] for g in groups]
    sizes = [len(g) for g in kept if len(g) > 1]
    dof = sum(sizes) - len(sizes)
    if dof < 1:
        raise ValueError("a spread needs at least one group of two identical measurements")
    squares = sum(float(np.sum((np.asarray(g, dtype=float) - np.mean(g)) ** 2)) for g in kept if len(g) > 1)
    bound = math.sqrt(dof / float(scipy.special.chdtri(dof, NOISE_CONFIDENCE)))  # chdtri: the upper-tail inverse
    return timing_noise(math.sqrt(squares / dof) * bound)


def noise_of(groups: Sequence[Sequence[float]]) -> float:
    """The timing noise of a span between two requests (a two-point's), from groups of identical requests' times:
    the standard deviation of the gap between two of them, sqrt(2) times one request's (``spread_of``)."""
    return math.sqrt(2.0) * spread_of(groups)


def timing_noise(noise_s: float) -> float:
    """The client's timing noise: what was measured, never below the clock's resolution."""
    return max(noise_s, time.get_clock_info("perf_counter").resolution)


def check_span(what: str, span_s: float, noise_s: float, tokens: int, grow: str = "long=") -> None:
    """Refuse a rate whose span is within SPAN_OVER_NOISE times the client's timing noise (MeasurementError,
    inconclusive): a span that short is timed, not measured, and its rate says nothing. ``grow`` is the keyword
    whose raising lengthens the span (``long=`` for a two-point, ``tokens=`` for a ctx_sweep's points)."""
    floor = SPAN_OVER_NOISE * timing_noise(noise_s)
    if span_s < floor:
        noise_ms = 1000 * timing_noise(noise_s)
        raise MeasurementError(f"{what} inconclusive: the {tokens} extra tokens took {1000 * span_s:.1f} ms, within "
                               f"{SPAN_OVER_NOISE:g}x the client's timing noise ({noise_ms:.1f} ms, the spread of "
                               f"identical requests' times); the server is too fast for this size: "
                               f"{_raise(grow, floor)}")


def _raise(grow: str, floor_s: float | None = None) -> str:
    """The fix for a span too short to time: raise the keyword ``grow`` that lengthens it (until the span clears
    ``floor_s``), or ``grow`` itself where it is a sentence (no keyword lengthens that span)."""
    if not grow.endswith("="):
        return grow
    return f"raise {grow}" + ("" if floor_s is None else f" until that span is over {1000 * floor_s:.0f} ms")


def decode_span_s(trace: Trace) -> float:
    """The stream's decode span on the client's clock: its first token-carrying chunk to its last."""
    return trace.chunks[-1].t - trace.chunks[0].t if trace.chunks else 0.0


def check_decode_spans(traces: Sequence[Trace], noise_s: float, what: str = "decode") -> None:
    """Refuse whole-stream decode rates (MeasurementError, inconclusive) when any stream's decode span (first to
    last token) is within SPAN_OVER_NOISE times the client's timing noise: its rate would be timed, not measured
    (a 5 ms span read 2,943 and 18,752 tok/s on one server), and the case's figures are read from every stream."""
    if not traces:
        return
    floor = SPAN_OVER_NOISE * timing_noise(noise_s)
    shortest = min(traces, key=decode_span_s)
    span = decode_span_s(shortest)
    if span >= floor:
        return
    tokens = shortest.completion_tokens - (shortest.chunks[0].tokens if shortest.chunks else 0)
    which = "the stream's" if len(traces) == 1 else f"the shortest of {len(traces)} streams'"
    raise MeasurementError(f"{what} inconclusive: {which} {tokens} decode tokens took {1000 * span:.1f} ms, within "
                           f"{SPAN_OVER_NOISE:g}x the client's timing noise ({1000 * timing_noise(noise_s):.1f} ms, "
                           f"the spread of identical streams' decode); the server is too fast for this length: "
                           f"raise tokens= until that span is over {1000 * floor:.0f} ms")


def drift_span_problem(streams: list[StreamResult], drifts: list[stats.Drift], noise_s: float) -> str | None:
    """Why no stream's early and late rates can be told apart from timing noise, or None: each group's span (its
    tokens over its rate) must be SPAN_OVER_NOISE times the client's measured timing noise, as a two-point's."""
    spans = [d.edge_windows * s.window_tokens / rate for s, d in zip(streams, drifts, strict=True)
             if s.window_tokens for rate in (d.early_tps, d.late_tps) if rate > 0]
    floor = SPAN_OVER_NOISE * timing_noise(noise_s)  # the shortest group span that is timed, not guessed
    if not spans or min(spans) >= floor:
        return None
    return (f"drift not judged: the early or late windows took {1000 * min(spans):.1f} ms, within "
            f"{SPAN_OVER_NOISE:g}x the client's timing noise ({1000 * timing_noise(noise_s):.1f} ms, the spread of "
            f"identical streams' decode), so their rates say nothing; the server is too fast for this length, raise "
            f"tokens= until that span is over {1000 * floor:.0f} ms")


def two_point_rate(shorts: Sequence[Completion], long: Completion, grow: str = "long=", what: str = "two-point"
                   ) -> float:
    """(long - short) tokens / (t_long - t_short) seconds, from the server's own counts; t_short is the median of the
    identical short requests' times (``what`` names the measurement and ``grow`` the keyword that lengthens its
    span, for the error)."""
    n_short = int(shorts[0].usage.get("completion_tokens", 0))  # not result data
    n_long = int(long.usage.get("completion_tokens", 0))  # not result data
    t_short = median([s.elapsed_s for s in shorts])
    dt = long.elapsed_s - t_short
    if n_long <= n_short or dt <= 0:
        raise MeasurementError(f"{what} inconclusive: the long request ({n_long} tokens, {long.elapsed_s:.3f} s) "
                               f"was not longer than the short ({n_short} tokens, {t_short:.3f} s); "
                               f"the server is too noisy at this size: {_raise(grow)}")
    return (n_long - n_short) / dt


def two_point_span(shorts: Sequence[Sequence[float]], longs: Sequence[float], endpoint_noise_s: float
                   ) -> tuple[float, float]:
    """(span, noise) of a two-point measurement from its requests' times: the span is the median long request's
    time less the median pair's short time (each pair's the median of its identical shorts); the noise the larger
    of the spread of the identical shorts at this prompt (``noise_of``, pooled over the pairs) and the client's
    noise on the endpoint (``endpoint_noise_s``, CaseContext.timing_noise)."""
    span = median(list(longs)) - median([median(list(g)) for g in shorts])
    return span, max(noise_of(shorts), endpoint_noise_s)


def server_two_point_rate(short: Completion, long: Completion) -> float | None:
    """The same two-point rate on the server's own clock: llama.cpp's ``timings.predicted_ms`` of each request.

    None where either response lacks ``timings`` (only llama.cpp sends them) or the difference is not positive.
    """
    ts, tl = short.body.get("timings"), long.body.get("timings")  # not result data
    if not (isinstance(ts, dict) and isinstance(tl, dict)):
        return None
    try:
        dn = float(tl["predicted_n"]) - float(ts["predicted_n"])
        dt_ms = float(tl["predicted_ms"]) - float(ts["predicted_ms"])
    except (KeyError, TypeError, ValueError):
        return None
    return 1000.0 * dn / dt_ms if dn > 0 and dt_ms > 0 else None


def median(values: list[float]) -> float:
    """Median of a non-empty list."""
    return float(np.median(np.asarray(values, dtype=float)))


def phase_deliveries(trace: Trace, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """(times, tokens) of the chunks that carried tokens of one phase, ``"reasoning"`` or ``"content"`` (the
    answer: content and tool calls), each chunk counted for its tokens of that phase only."""
    if phase not in ("reasoning", "content"):
        raise ValueError(f"phase must be 'reasoning' or 'content', got {phase!r}")
    t, k = [], []
    for c in trace.chunks:
        n = c.reasoning if phase == "reasoning" else c.tokens - c.reasoning
        if n > 0:
            t.append(c.t)
            k.append(n)
    return np.array(t, dtype=float), np.array(k, dtype=int)


def phase_decode_tps(trace: Trace) -> dict[str, float | None]:
    """Decode tok/s of each phase: its tokens after its first chunk over the time from that chunk to its last.

    ``{"reasoning": ..., "content": ...}``; None for a phase with fewer than two chunks (a stream without
    reasoning has ``reasoning: None`` and its content rate is the stream's decode rate). The answer's
    first chunk is its time to first answer token, so it is left out of the answer's rate as TTFT is
    left out of the stream's.
    """
    return {phase: stats.decode_tps(*phase_deliveries(trace, phase)) for phase in ("reasoning", "content")}


def phase_accept_len(trace: Trace) -> dict[str, float | None]:
    """Tokens per chunk of each phase after its first chunk: its mean accepted length where a chunk is a step."""
    out: dict[str, float | None] = {}
    for phase in ("reasoning", "content"):
        _, k = phase_deliveries(trace, phase)
        out[phase] = float(k[1:].mean()) if len(k) > 1 else None
    return out


def _median_or_none(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return median(got) if got else None


def phases(r: SustainedResult, streams: list[StreamResult], traces: list[Trace], step_chunks: bool) -> None:
    """The reasoning-phase fields of a sustained or load result: medians over the streams that reasoned.

    Nothing is set where no stream carried reasoning (a server without a reasoning parser): the
    fields stay None. Accepted length per phase only where chunks are engine steps.
    """
    reasoned = [s for s in streams if s.reasoning_tokens]
    if not reasoned:
        return
    r.ttft_content_s = _median_or_none([s.ttft_content_s for s in reasoned])
    r.reasoning_tokens = round(median([float(s.reasoning_tokens or 0) for s in reasoned]))
    r.content_tokens = round(median([float(s.content_tokens or 0) for s in reasoned]))
    r.reasoning_tps = _median_or_none([s.reasoning_tps for s in reasoned])
    r.content_tps = _median_or_none([s.content_tps for s in reasoned])
    if r.reasoning_tps is not None and r.content_tps is not None:
        r.slower_phase = "reasoning" if r.reasoning_tps < r.content_tps else "answer"
    if step_chunks:
        lens = [phase_accept_len(t) for t in traces if t.reasoning_tokens]
        r.reasoning_accept_len = _median_or_none([x["reasoning"] for x in lens])
        r.content_accept_len = _median_or_none([x["content"] for x in lens])


def slower_phase(r: SustainedResult) -> str:
    """'the reasoning phase decoded at 40.1 tok/s, the answer at 80.3 (reasoning slower; 2.9 vs 5.0 tokens/step)',
    or '' without a reasoning phase: which phase a drift or slowdown belongs to."""
    if r.reasoning_tps is None or r.content_tps is None:
        return ""
    text = (f"the reasoning phase decoded at {r.reasoning_tps:.1f} tok/s, the answer at {r.content_tps:.1f} "
            f"({r.slower_phase} slower")
    if r.reasoning_accept_len is not None and r.content_accept_len is not None:
        text += f"; {r.reasoning_accept_len:.1f} vs {r.content_accept_len:.1f} tokens/step"
    return text + ")"
