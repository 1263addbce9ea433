"""What a report shows for the single-stream kinds: ``sustained``, ``two_point`` and ``ctx_sweep`` (plain data).

Every number drawn is a field of the result as written to ``--specperf-json``: the streams' window rates,
a two-point case's samples, a sweep's points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_specperf.cases.results import StreamResult, SustainedResult, SweepResult, TwoPointResult
from pytest_specperf.report.table import finite_number
from pytest_specperf.report.views.base import (
    Band,
    CaseView,
    Chart,
    Level,
    ResultLike,
    Series,
    common_facts,
    count_text,
    fmt,
    pct,
    typed_as,
)
from pytest_specperf.report.views.lengths import drawn_charts
from pytest_specperf.run.acceptance import slowdown_split

#: share of the windows at each end that make the early and late medians (the drift definition)
EDGE_SHARE = 0.25
MIN_EDGE_WINDOWS = 3


def edge_windows(n: int) -> int:
    """How many windows at each end make the early and late medians."""
    return max(MIN_EDGE_WINDOWS, math.ceil(EDGE_SHARE * n))


# -- sustained -------------------------------------------------------------------------------------


def cumulative(stream: StreamResult) -> tuple[list[float], list[float], list[float], list[float]]:
    """Decode tokens against seconds since the request, and where stalls ended: (xs, ys, stall xs, stall ys).

    Rebuilt from the window rates (window i lasts W / rate_i seconds), so exact at every window edge;
    a stall inside a window is drawn as a flat run of its gap ending at its token, the rest of the
    window's time spread evenly over its tokens.
    """
    w = stream.window_tokens
    rates = [x for x in stream.window_tps or [] if finite_number(x)]
    stalls = sorted((float(s.at_token), float(s.gap_s)) for s in stream.stalls or []
                    if finite_number(s.at_token) is not None and finite_number(s.gap_s) is not None)
    t = float(stream.ttft_s or 0.0)
    xs, ys = [t], [0.0]
    sx: list[float] = []
    sy: list[float] = []
    if not w or not rates:
        return xs, ys, sx, sy
    for i, rate in enumerate(rates):
        start, d = i * w, w / rate
        inside = [(a, g) for a, g in stalls if start < a <= start + w]
        busy = max(d - sum(g for _, g in inside), 0.0)
        waited = 0.0
        for a, g in inside:
            before = t + (a - start) / w * busy + waited
            xs += [before, before + g]
            ys += [a, a]
            sx.append(before + g)
            sy.append(a)
            waited += g
        t += d
        xs.append(t)
        ys.append(float(start + w))
    return xs, ys, sx, sy


def _edge_bands(n: int, w: float, axis: str) -> list[Band]:
    if n < 2 * MIN_EDGE_WINDOWS:
        return []
    m = edge_windows(n)
    return [Band(0.0, m * w, "early windows", axis), Band((n - m) * w, n * w, "late windows", axis)]


def sustained(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """Cumulative tokens, window rates, tokens per step and step time per window, burst gap."""
    r = typed_as(result, SustainedResult)
    acc = r.acceptance
    att = r.attribution
    facts = [
        *common_facts(r),
        *_stream_facts(r),
        ttft_fact(r),
        ("early -> late", f"{fmt(r.early_tps)} -> {fmt(r.late_tps)} tok/s"),
        ("drift", f"{fmt(r.drift, '.2f')} (max {fmt(r.max_drift, 'g')}): {r.drift_verdict}"
                  + (f", {r.drift_gate}" if r.drift_gate else "")),
        *([] if (finite_number(r.concurrency) or 1) > 1 else [("floor", fmt(r.min_tps, "g", " tok/s"))]),
        ("stalls", f"{r.stalls} ({fmt(r.stall_s, '.2f', ' s')})"),
        ("acceptance", f"{fmt(acc.mean_len, '.2f')} tokens/step, rate {fmt(acc.rate, '.2f')} "
                       f"({acc.source})" if acc is not None else "-"),
        ("slowdown split", slowdown_split(att)),
    ]
    if r.burst_tps is not None:
        facts.append(("two-point / burst gap", f"{fmt(r.burst_tps)} tok/s / {fmt(r.burst_gap, '.2f')}"))
    facts += phase_facts(r)
    streams = r.streams
    charts = [_cumulative_chart(streams), _window_chart(r, streams)]
    charts += _step_charts(r)
    charts += drawn_charts(r, streams + r.warmup_drain_streams)  # lengths drawn: latency against each one's lengths
    mark_phases(r, charts)
    burst, decode = finite_number(r.burst_tps), finite_number(r.decode_tps)
    if burst is not None and decode is not None:
        charts.append(Chart("burst", f"two-point vs sustained decode (burst gap {fmt(r.burst_gap, '.2f')})",
                            "", "tok/s", [Series("decode", [0.0, 1.0], [burst, decode], "bars")],
                            categories=["two-point (burst)", "sustained"]))
    return CaseView(facts, [c for c in charts if c.series])


def ttft_fact(r: SustainedResult) -> tuple[str, str]:
    """TTFT, named by what it is: one stream's, the median stream's, or under load the p50 / p90 / p99 request's."""
    def ms(v: float | None) -> str:
        x = finite_number(v)
        return "-" if x is None else f"{x * 1000:.0f}"

    if (finite_number(r.concurrency) or 1) > 1 or r.ttft_p90_s is not None:
        tail = [r.ttft_p90_s] + ([r.ttft_p99_s] if r.ttft_p99_s is not None else [])
        names = "p50 / p90" + (" / p99" if r.ttft_p99_s is not None else "")
        return f"ttft {names}", " / ".join(ms(v) for v in [r.ttft_s, *tail]) + " ms"
    return ("ttft, median stream" if (r.repeat or 1) > 1 else "ttft"), fmt(
        finite_number(r.ttft_s) and r.ttft_s * 1000, ".0f", " ms")


def phase_facts(r: SustainedResult) -> list[tuple[str, str]]:
    """The reasoning phase's figures, where the streams had one (none otherwise)."""
    if not r.reasoning_tokens:
        return []
    accept = ""
    if finite_number(r.reasoning_accept_len) is not None:
        accept = f"; {fmt(r.reasoning_accept_len, '.2f')} vs {fmt(r.content_accept_len, '.2f')} tokens/step"
    first = finite_number(r.ttft_content_s)
    return [("reasoning / answer", f"{count_text(r.reasoning_tokens)} / {count_text(r.content_tokens)}"
                                   f" tokens; {fmt(r.reasoning_tps)} / {fmt(r.content_tps)} tok/s" + accept),
            ("first answer token", fmt(first and first * 1000, ".0f", " ms"))]


def mark_phases(r: SustainedResult, charts: list[Chart]) -> None:
    """Where the answer starts, on the charts drawn against decode tokens (the median stream's reasoning count)."""
    n = finite_number(r.reasoning_tokens)
    if not n:
        return
    for chart in charts:
        if chart.id == "cumulative":
            chart.levels.append(Level(n, f"reasoning | answer ({n:.0f} tokens)", "dashed"))
        elif chart.xlabel == "decode tokens":
            chart.levels.append(Level(n, f"reasoning | answer ({n:.0f} tokens)", "dashed", axis="x"))


def _stream_facts(r: SustainedResult) -> list[tuple[str, str]]:
    """Tokens and decode; a concurrent case (``concurrency`` > 1) names its users, aggregate and p10 user."""
    users = finite_number(r.concurrency)
    repeat = r.repeat or 1
    if users is None or users <= 1:
        streams = f" x {repeat} streams" if repeat != 1 else ""
        return [("tokens", fmt(r.completion_tokens, ".0f") + streams),
                ("decode" + (", median stream" if repeat != 1 else ""), fmt(r.decode_tps, ".1f", " tok/s"))]
    trials = f", {repeat} trials" if repeat != 1 else ""
    return [("users", f"{count_text(users)} concurrent streams{trials}"),
            ("tokens", fmt(r.completion_tokens, ".0f") + " per user"),
            ("decode per user", f"median {fmt(r.decode_tps)}, p10 {fmt(r.decode_p10_tps)} tok/s"),
            ("aggregate", fmt(r.total_tps, ".1f", " tok/s") + " (while every stream decoded)"),
            # a case judged since goals were recorded lists every floor and ceiling ("judged against", html.py)
            *([] if r.goals else [("floors", f"min_tps {fmt(r.min_tps, 'g', ' tok/s')} per user, "
                                             f"min_total_tps {fmt(r.min_total_tps, 'g', ' tok/s')} aggregate")])]


def _cumulative_chart(streams: list[StreamResult]) -> Chart:
    chart = Chart("cumulative", "decode tokens over time", "seconds since request", "decode tokens")
    for i, s in enumerate(streams):
        xs, ys, px, py = cumulative(s)
        if len(xs) < 2:
            continue
        chart.series.append(Series(f"stream {i + 1}", xs, ys))
        if px:
            chart.series.append(Series(f"stalls, stream {i + 1}", px, py, "points"))
    w = streams[0].window_tokens if streams else None
    if w:
        chart.bands = _edge_bands(len(streams[0].window_tps or []), float(w), "y")
    return chart


def _window_chart(r: SustainedResult, streams: list[StreamResult]) -> Chart:
    verdict = r.drift_verdict or "not judged"
    chart = Chart("window_rate", f"rate per window: drift {fmt(r.drift, '.2f')}, {verdict}",
                  "decode tokens", "tok/s")
    for i, s in enumerate(streams):
        w, rates = s.window_tokens, s.window_tps or []
        if w and rates:
            chart.series.append(Series(f"stream {i + 1}", [(j + 0.5) * w for j in range(len(rates))],
                                       [float(x) for x in rates]))
    for value, label in ((r.early_tps, "early median"), (r.late_tps, "late median")):
        if value is not None and finite_number(value) is not None:
            chart.levels.append(Level(float(value), f"{label} {value:.1f}"))
    if r.min_tps is not None and finite_number(r.min_tps) is not None:
        chart.levels.append(Level(float(r.min_tps), f"floor {r.min_tps:g}", "solid"))
    w0 = streams[0].window_tokens if streams else None
    if w0:
        chart.bands = _edge_bands(len(streams[0].window_tps or []), float(w0), "x")
    return chart


def _step_charts(r: SustainedResult) -> list[Chart]:
    acc, step = r.window_accept_len or [], r.window_step_ms or []
    streams = r.streams
    w = streams[0].window_tokens if streams else None
    if not w or not (acc or step):
        return []
    att = r.attribution
    out = []
    for key, values, what, unit, share in (
            ("accept", acc, "accepted tokens per step", "tokens/step", None if att is None else att.accept_share),
            ("step_ms", step, "step time", "ms", None if att is None else att.step_share)):
        pairs = [((j + 0.5) * w, float(v)) for j, v in enumerate(values) if finite_number(v) is not None]
        if not pairs:
            continue
        title = f"{what} per window" + (f": {pct(share)} of the slowdown" if att is not None else "")
        series = Series(what, [p[0] for p in pairs], [p[1] for p in pairs])
        out.append(Chart(key, title, "decode tokens", unit, [series], bands=_edge_bands(len(values), float(w), "x")))
    return out


# -- two-point and sweeps --------------------------------------------------------------------------


def two_point(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """The rate from a short and a long request, per repeat."""
    r = typed_as(result, TwoPointResult)
    facts = [*common_facts(r), ("short / long", f"{r.short} / {r.long} tokens"),
             ("t short / t long", f"{fmt(r.t_short_s, '.3f')} / {fmt(r.t_long_s, '.3f')} s"),
             ("decode (two-point)", fmt(r.decode_tps, ".1f", " tok/s")),
             ("floor", fmt(r.min_tps, "g", " tok/s"))]
    samples = [float(x) for x in r.samples_tps or [] if finite_number(x) is not None]
    chart = Chart("samples", "two-point decode rate per repeat", "repeat", "tok/s",
                  [Series("two-point", [float(i) for i in range(len(samples))], samples, "points")] if samples else [],
                  categories=[f"#{i + 1}" for i in range(len(samples))])
    _floor(r.min_tps, chart)
    return CaseView(facts, [chart] if chart.series else [])


def _floor(floor: float | None, chart: Chart) -> None:
    if floor is not None and finite_number(floor) is not None:
        chart.levels.append(Level(float(floor), f"floor {floor:g}", "solid"))


def ctx_sweep(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """Decode rate against context length, with the floor."""
    r = typed_as(result, SweepResult)
    pts = [p for p in r.points or [] if finite_number(p.decode_tps) is not None]
    xs = [float(p.prompt_tokens or p.ctx or 0) for p in pts]
    facts = [*common_facts(r)[:2], ("points", ", ".join(f"{x:.0f}: {p.decode_tps:.1f}" for x, p in zip(xs, pts,
                                                                                                     strict=True))),
             ("slowest", fmt(r.decode_tps, ".1f", " tok/s")), ("floor", fmt(r.min_tps, "g", " tok/s"))]
    chart = Chart("rate_vs_ctx", "decode rate against context length", "prompt tokens", "tok/s",
                  [Series("decode", xs, [float(p.decode_tps) for p in pts])] if pts else [])
    _floor(r.min_tps, chart)
    return CaseView(facts, [chart] if chart.series else [])
