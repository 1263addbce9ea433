"""What a report shows for the single-stream kinds: ``sustained``, ``two_point`` and ``ctx_sweep`` (plain data).

Every number drawn is a field of the result as written to ``--specperf-json``: the streams' window rates,
a two-point case's samples, a sweep's points.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_specperf.report.table import finite_number
from pytest_specperf.report.views.base import (
    Band,
    CaseView,
    Chart,
    Level,
    Series,
    common_facts,
    count_text,
    fmt,
    pct,
)
from pytest_specperf.run.acceptance import slowdown_split

#: share of the windows at each end that make the early and late medians (the drift definition)
EDGE_SHARE = 0.25
MIN_EDGE_WINDOWS = 3


def edge_windows(n: int) -> int:
    """How many windows at each end make the early and late medians."""
    return max(MIN_EDGE_WINDOWS, math.ceil(EDGE_SHARE * n))


# -- sustained -------------------------------------------------------------------------------------


def cumulative(stream: dict[str, Any]) -> tuple[list[float], list[float], list[float], list[float]]:
    """Decode tokens against seconds since the request, and where stalls ended: (xs, ys, stall xs, stall ys).

    Rebuilt from the window rates (window i lasts W / rate_i seconds), so exact at every window edge;
    a stall inside a window is drawn as a flat run of its gap ending at its token, the rest of the
    window's time spread evenly over its tokens.
    """
    w = stream.get("window_tokens")
    rates = [x for x in stream.get("window_tps") or [] if finite_number(x)]
    stalls = sorted((float(s["at_token"]), float(s["gap_s"])) for s in stream.get("stalls") or []
                    if finite_number(s.get("at_token")) is not None and finite_number(s.get("gap_s")) is not None)
    t = float(stream.get("ttft_s") or 0.0)
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


def _streams(r: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in r.get("streams") or [] if isinstance(s, dict)]


def sustained(r: dict[str, Any], baseline: list[dict[str, Any]]) -> CaseView:
    """Cumulative tokens, window rates, tokens per step and step time per window, burst gap."""
    acc = r.get("acceptance") or {}
    att = r.get("attribution") or {}
    facts = [
        *common_facts(r),
        *_stream_facts(r),
        ("ttft", fmt(finite_number(r.get("ttft_s")) and r["ttft_s"] * 1000, ".0f", " ms")),
        ("early -> late", f"{fmt(r.get('early_tps'))} -> {fmt(r.get('late_tps'))} tok/s"),
        ("drift", f"{fmt(r.get('drift'), '.2f')} (max {fmt(r.get('max_drift'), 'g')}): {r.get('drift_verdict', '-')}"
                  + (f", {r['drift_gate']}" if r.get("drift_gate") else "")),
        *([] if (finite_number(r.get("concurrency")) or 1) > 1 else [("floor", fmt(r.get("min_tps"), "g", " tok/s"))]),
        ("stalls", f"{r.get('stalls', 0)} ({fmt(r.get('stall_s'), '.2f', ' s')})"),
        ("acceptance", f"{fmt(acc.get('mean_len'), '.2f')} tokens/step, rate {fmt(acc.get('rate'), '.2f')} "
                       f"({acc.get('source', '-')})" if acc else "-"),
        ("slowdown split", slowdown_split(att)),
    ]
    if r.get("burst_tps") is not None:
        facts.append(("two-point / burst gap", f"{fmt(r.get('burst_tps'))} tok/s / {fmt(r.get('burst_gap'), '.2f')}"))
    facts += phase_facts(r)
    streams = _streams(r)
    charts = [_cumulative_chart(streams), _window_chart(r, streams)]
    charts += _step_charts(r)
    mark_phases(r, charts)
    if finite_number(r.get("burst_tps")) is not None and finite_number(r.get("decode_tps")) is not None:
        charts.append(Chart("burst", f"two-point vs sustained decode (burst gap {fmt(r.get('burst_gap'), '.2f')})",
                            "", "tok/s", [Series("decode", [0.0, 1.0], [float(r["burst_tps"]), float(r["decode_tps"])],
                                                 "bars")],
                            categories=["two-point (burst)", "sustained"]))
    return CaseView(facts, [c for c in charts if c.series])


def phase_facts(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The reasoning phase's figures, where the streams had one (none otherwise)."""
    if not r.get("reasoning_tokens"):
        return []
    accept = ""
    if finite_number(r.get("reasoning_accept_len")) is not None:
        accept = (f"; {fmt(r.get('reasoning_accept_len'), '.2f')} vs {fmt(r.get('content_accept_len'), '.2f')} "
                  "tokens/step")
    return [("reasoning / answer", f"{count_text(r.get('reasoning_tokens'))} / {count_text(r.get('content_tokens'))}"
                                   f" tokens; {fmt(r.get('reasoning_tps'))} / {fmt(r.get('content_tps'))} tok/s"
                                   + accept),
            ("first answer token", fmt(finite_number(r.get("ttft_content_s")) and r["ttft_content_s"] * 1000, ".0f",
                                       " ms"))]


def mark_phases(r: dict[str, Any], charts: list[Chart]) -> None:
    """Where the answer starts, on the charts drawn against decode tokens (the median stream's reasoning count)."""
    n = finite_number(r.get("reasoning_tokens"))
    if not n:
        return
    for chart in charts:
        if chart.id == "cumulative":
            chart.levels.append(Level(n, f"reasoning | answer ({n:.0f} tokens)", "dashed"))
        elif chart.xlabel == "decode tokens":
            chart.levels.append(Level(n, f"reasoning | answer ({n:.0f} tokens)", "dashed", axis="x"))


def _stream_facts(r: dict[str, Any]) -> list[tuple[str, str]]:
    """Tokens and decode; a concurrent case (``concurrency`` > 1) names its users, aggregate and p10 user."""
    users = finite_number(r.get("concurrency"))
    repeat = r.get("repeat") or 1
    if users is None or users <= 1:
        streams = f" x {repeat} streams" if repeat != 1 else ""
        return [("tokens", fmt(r.get("completion_tokens"), ".0f") + streams),
                ("decode" + (", median stream" if repeat != 1 else ""), fmt(r.get("decode_tps"), ".1f", " tok/s"))]
    trials = f", {repeat} trials" if repeat != 1 else ""
    return [("users", f"{count_text(users)} concurrent streams{trials}"),
            ("tokens", fmt(r.get("completion_tokens"), ".0f") + " per user"),
            ("decode per user", f"median {fmt(r.get('decode_tps'))}, p10 {fmt(r.get('decode_p10_tps'))} tok/s"),
            ("aggregate", fmt(r.get("total_tps"), ".1f", " tok/s") + " (while every stream decoded)"),
            ("floors", f"min_tps {fmt(r.get('min_tps'), 'g', ' tok/s')} per user, "
                       f"min_total_tps {fmt(r.get('min_total_tps'), 'g', ' tok/s')} aggregate")]


def _cumulative_chart(streams: list[dict[str, Any]]) -> Chart:
    chart = Chart("cumulative", "decode tokens over time", "seconds since request", "decode tokens")
    for i, s in enumerate(streams):
        xs, ys, px, py = cumulative(s)
        if len(xs) < 2:
            continue
        chart.series.append(Series(f"stream {i + 1}", xs, ys))
        if px:
            chart.series.append(Series(f"stalls, stream {i + 1}", px, py, "points"))
    if streams and streams[0].get("window_tokens"):
        chart.bands = _edge_bands(len(streams[0].get("window_tps") or []), float(streams[0]["window_tokens"]), "y")
    return chart


def _window_chart(r: dict[str, Any], streams: list[dict[str, Any]]) -> Chart:
    verdict = r.get("drift_verdict") or "not judged"
    chart = Chart("window_rate", f"rate per window: drift {fmt(r.get('drift'), '.2f')}, {verdict}",
                  "decode tokens", "tok/s")
    for i, s in enumerate(streams):
        w, rates = s.get("window_tokens"), s.get("window_tps") or []
        if w and rates:
            chart.series.append(Series(f"stream {i + 1}", [(j + 0.5) * w for j in range(len(rates))],
                                       [float(x) for x in rates]))
    for key, label in (("early_tps", "early median"), ("late_tps", "late median")):
        if finite_number(r.get(key)) is not None:
            chart.levels.append(Level(float(r[key]), f"{label} {r[key]:.1f}"))
    if finite_number(r.get("min_tps")) is not None:
        chart.levels.append(Level(float(r["min_tps"]), f"floor {r['min_tps']:g}", "solid"))
    if streams and streams[0].get("window_tokens"):
        chart.bands = _edge_bands(len(streams[0].get("window_tps") or []), float(streams[0]["window_tokens"]), "x")
    return chart


def _step_charts(r: dict[str, Any]) -> list[Chart]:
    acc, step = r.get("window_accept_len") or [], r.get("window_step_ms") or []
    streams = _streams(r)
    w = streams[0].get("window_tokens") if streams else None
    if not w or not (acc or step):
        return []
    att = r.get("attribution") or {}
    out = []
    for key, values, what, unit, share in (("accept", acc, "accepted tokens per step", "tokens/step", "accept_share"),
                                           ("step_ms", step, "step time", "ms", "step_share")):
        pairs = [((j + 0.5) * w, float(v)) for j, v in enumerate(values) if finite_number(v) is not None]
        if not pairs:
            continue
        title = f"{what} per window" + (f": {pct(att.get(share))} of the slowdown" if share in att else "")
        series = Series(what, [p[0] for p in pairs], [p[1] for p in pairs])
        out.append(Chart(key, title, "decode tokens", unit, [series], bands=_edge_bands(len(values), float(w), "x")))
    return out


# -- two-point and sweeps --------------------------------------------------------------------------


def two_point(r: dict[str, Any], baseline: list[dict[str, Any]]) -> CaseView:
    """The rate from a short and a long request, per repeat."""
    facts = [*common_facts(r), ("short / long", f"{r.get('short', '-')} / {r.get('long', '-')} tokens"),
             ("t short / t long", f"{fmt(r.get('t_short_s'), '.3f')} / {fmt(r.get('t_long_s'), '.3f')} s"),
             ("decode (two-point)", fmt(r.get("decode_tps"), ".1f", " tok/s")),
             ("floor", fmt(r.get("min_tps"), "g", " tok/s"))]
    samples = [float(x) for x in r.get("samples_tps") or [] if finite_number(x) is not None]
    chart = Chart("samples", "two-point decode rate per repeat", "repeat", "tok/s",
                  [Series("two-point", [float(i) for i in range(len(samples))], samples, "points")] if samples else [],
                  categories=[f"#{i + 1}" for i in range(len(samples))])
    if finite_number(r.get("min_tps")) is not None:
        chart.levels.append(Level(float(r["min_tps"]), f"floor {r['min_tps']:g}", "solid"))
    return CaseView(facts, [chart] if chart.series else [])


def ctx_sweep(r: dict[str, Any], baseline: list[dict[str, Any]]) -> CaseView:
    """Decode rate against context length, with the floor."""
    pts = [p for p in r.get("points") or [] if finite_number(p.get("decode_tps")) is not None]
    xs = [float(p.get("prompt_tokens") or p.get("ctx") or 0) for p in pts]
    facts = [*common_facts(r)[:2], ("points", ", ".join(f"{x:.0f}: {p['decode_tps']:.1f}" for x, p in zip(xs, pts,
                                                                                                        strict=True))),
             ("slowest", fmt(r.get("decode_tps"), ".1f", " tok/s")), ("floor", fmt(r.get("min_tps"), "g", " tok/s"))]
    chart = Chart("rate_vs_ctx", "decode rate against context length", "prompt tokens", "tok/s",
                  [Series("decode", xs, [float(p["decode_tps"]) for p in pts])] if pts else [])
    if finite_number(r.get("min_tps")) is not None:
        chart.levels.append(Level(float(r["min_tps"]), f"floor {r['min_tps']:g}", "solid"))
    return CaseView(facts, [chart] if chart.series else [])
