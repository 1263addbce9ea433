"""From traces to results: pure functions, no I/O (the runner does the requests)."""

from __future__ import annotations

import time

import numpy as np

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
    if decode is None and len(t) > 1:  # chunks enough, but no time between the first and the last
        raise MeasurementError(f"all {int(k.sum())} tokens ({len(k)} chunks) arrived in one read: no decode span to "
                               "time (the client was busy for the whole stream, or a proxy buffers it); raise tokens=")
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


def timing_noise(noise_s: float) -> float:
    """The client's timing noise: what was measured (two identical requests' times apart), never below the
    clock's resolution."""
    return max(noise_s, time.get_clock_info("perf_counter").resolution)


def span_timed(span_s: float, noise_s: float) -> bool:
    """Whether a span is over SPAN_OVER_NOISE times the client's timing noise: timed, not guessed."""
    return span_s >= SPAN_OVER_NOISE * timing_noise(noise_s)


def check_span(what: str, span_s: float, noise_s: float, tokens: int) -> None:
    """Refuse a rate whose span is within SPAN_OVER_NOISE times the client's timing noise (MeasurementError,
    inconclusive): a span that short is timed, not measured, and its rate says nothing."""
    if not span_timed(span_s, noise_s):
        floor = SPAN_OVER_NOISE * timing_noise(noise_s)
        noise_ms = 1000 * timing_noise(noise_s)
        raise MeasurementError(f"{what} inconclusive: the {tokens} extra tokens took {1000 * span_s:.1f} ms, within "
                               f"{SPAN_OVER_NOISE:g}x the client's timing noise ({noise_ms:.1f} ms, "
                               f"two identical requests apart); the server is too fast for this size, raise long= "
                               f"(tokens= in a ctx_sweep) until that span is over {1000 * floor:.0f} ms")


def drift_span_problem(streams: list[StreamResult], drifts: list[stats.Drift], noise_s: float) -> str | None:
    """Why no stream's early and late rates can be told apart from timing noise, or None: each group's span (its
    tokens over its rate) must be SPAN_OVER_NOISE times the client's measured timing noise, as a two-point's."""
    spans = [d.edge_windows * s.window_tokens / rate for s, d in zip(streams, drifts, strict=True)
             if s.window_tokens for rate in (d.early_tps, d.late_tps) if rate > 0]
    floor = SPAN_OVER_NOISE * timing_noise(noise_s)  # the shortest group span that is timed, not guessed
    if not spans or min(spans) >= floor:
        return None
    return (f"drift not judged: the early or late windows took {1000 * min(spans):.1f} ms, within "
            f"{SPAN_OVER_NOISE:g}x the client's timing noise ({1000 * timing_noise(noise_s):.1f} ms, two identical "
            f"requests apart), so their rates say nothing; the server is too fast for this length, raise tokens= "
            f"until that span is over {1000 * floor:.0f} ms")


def two_point_rate(short: Completion, long: Completion) -> float:
    """(long - short) tokens / (t_long - t_short) seconds, from the server's own counts."""
    n_short = int(short.usage.get("completion_tokens", 0))  # not result data
    n_long = int(long.usage.get("completion_tokens", 0))  # not result data
    dt = long.elapsed_s - short.elapsed_s
    if n_long <= n_short or dt <= 0:
        raise MeasurementError(f"two-point inconclusive: the long request ({n_long} tokens, {long.elapsed_s:.3f} s) "
                               f"was not longer than the short ({n_short} tokens, {short.elapsed_s:.3f} s); "
                               "the server is too noisy at this size, raise long=")
    return (n_long - n_short) / dt


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
