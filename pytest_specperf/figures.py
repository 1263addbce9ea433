"""What a report shows for each kind of case: key figures and charts, as plain data (no drawing here).

Never imports pytest or a plotting library: ``plots`` draws these charts, ``html_report`` lays them out,
and the numbers a chart holds are exactly the numbers drawn (the report also embeds them as JSON).

A kind of case adds one renderer::

    @register("load")
    def _load(result: dict, baseline: list[dict]) -> CaseView: ...

Kinds without a renderer get the generic view: a table of their scalar fields.
Load kinds (``load_sweep``, ``rate``, ``capacity``) live in ``load_figures``, registered on import below.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .acceptance import slowdown_split
from .compare import DIRECTIONS, case_key, sub_cases, trials
from .report import finite_number

#: share of the windows at each end that make the early and late medians (the drift definition)
EDGE_SHARE = 0.25
MIN_EDGE_WINDOWS = 3


@dataclass
class Series:
    """One drawn series; ``style`` is line, points or bars. ``low``/``high`` give interval bars for points."""

    name: str
    x: list[float]
    y: list[float]
    style: str = "line"
    low: list[float] | None = None
    high: list[float] | None = None


@dataclass
class Band:
    """A shaded span along ``axis`` ("x" or "y") from ``lo`` to ``hi``."""

    lo: float
    hi: float
    label: str
    axis: str = "x"


@dataclass
class Level:
    """A horizontal reference line (median, floor, threshold)."""

    y: float
    label: str
    style: str = "dashed"


@dataclass
class Chart:
    """One chart: series plus reference lines and shaded spans; ``categories`` names x = 0, 1, ..."""

    id: str
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    levels: list[Level] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    xscale: str = "linear"  # "log": a base-2 axis, for users and request rates that double
    yscale: str = "linear"  # "log": for latencies that span orders of magnitude past saturation

    def data(self) -> dict[str, Any]:
        """The chart as JSON-able data: every value it draws."""
        return asdict(self)


@dataclass
class CaseView:
    """What the report shows for one result: key figures (label, text) and charts."""

    facts: list[tuple[str, str]] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)


Renderer = Callable[[dict[str, Any], list[dict[str, Any]]], CaseView]
RENDERERS: dict[str, Renderer] = {}


def register(kind: str) -> Callable[[Renderer], Renderer]:
    """Decorator: the renderer for results of ``kind``."""

    def add(fn: Renderer) -> Renderer:
        RENDERERS[kind] = fn
        return fn

    return add


def view(result: dict[str, Any], baseline: list[dict[str, Any]] | None = None) -> CaseView:
    """The view of one result: its kind's renderer (generic fields otherwise), plus its comparisons."""
    render = RENDERERS.get(str(result.get("kind", "")), generic)
    if result.get("verdict") == "error":
        render = generic  # nothing was measured: show what is known, draw nothing
    v = render(result, baseline or [])
    v.charts += comparison_charts(result, baseline or [])
    return v


# -- formatting ------------------------------------------------------------------------------------


def fmt(v: Any, spec: str = ".1f", unit: str = "") -> str:
    """A number as text ("-" when missing or not finite)."""
    x = finite_number(v)
    return "-" if x is None else format(x, spec) + unit


def pct(v: Any) -> str:
    """A share as a whole percentage ("-" when missing)."""
    x = finite_number(v)
    return "-" if x is None else f"{x * 100:.0f}%"


def edge_windows(n: int) -> int:
    """How many windows at each end make the early and late medians."""
    return max(MIN_EDGE_WINDOWS, math.ceil(EDGE_SHARE * n))


# -- generic ---------------------------------------------------------------------------------------


@register("generic")
def generic(result: dict[str, Any], baseline: list[dict[str, Any]]) -> CaseView:
    """Every scalar field as a row: the view of kinds without their own renderer."""
    facts = []
    for key, value in result.items():
        if isinstance(value, bool) or value is None:
            facts.append((key, str(value).lower() if isinstance(value, bool) else "-"))
        elif isinstance(value, int | float):
            facts.append((key, fmt(value, ".4g")))
        elif isinstance(value, str) and key not in ("nodeid",):
            facts.append((key, value or "-"))
    return CaseView(facts=facts)


def common_facts(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The facts every kind shows first: server and model, content, prompt size."""
    return [("server", f"{r.get('server', '-')} ({r.get('model', '-')})"), ("content", str(r.get("content", "-"))),
            ("ctx (prompt tokens)", fmt(r.get("prompt_tokens") or r.get("ctx"), ".0f"))]


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
    xs, ys, sx, sy = [t], [0.0], [], []
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


@register("sustained")
def sustained(r: dict[str, Any], baseline: list[dict[str, Any]]) -> CaseView:
    """Cumulative tokens, window rates, tokens per step and step time per window, burst gap."""
    acc = r.get("acceptance") or {}
    att = r.get("attribution") or {}
    facts = [
        *common_facts(r),
        ("tokens", fmt(r.get("completion_tokens"), ".0f") + f" x {r.get('repeat', 1)} stream(s)"),
        ("ttft", fmt(finite_number(r.get("ttft_s")) and r["ttft_s"] * 1000, ".0f", " ms")),
        ("decode", fmt(r.get("decode_tps"), ".1f", " tok/s")),
        ("early -> late", f"{fmt(r.get('early_tps'))} -> {fmt(r.get('late_tps'))} tok/s"),
        ("drift", f"{fmt(r.get('drift'), '.2f')} (max {fmt(r.get('max_drift'), 'g')}): {r.get('drift_verdict', '-')}"
                  + (f", {r['drift_gate']}" if r.get("drift_gate") else "")),
        ("floor", fmt(r.get("min_tps"), "g", " tok/s")),
        ("stalls", f"{r.get('stalls', 0)} ({fmt(r.get('stall_s'), '.2f', ' s')})"),
        ("acceptance", f"{fmt(acc.get('mean_len'), '.2f')} tokens/step, rate {fmt(acc.get('rate'), '.2f')} "
                       f"({acc.get('source', '-')})" if acc else "-"),
        ("slowdown split", slowdown_split(att)),
    ]
    if r.get("burst_tps") is not None:
        facts.append(("two-point / burst gap", f"{fmt(r.get('burst_tps'))} tok/s / {fmt(r.get('burst_gap'), '.2f')}"))
    streams = _streams(r)
    charts = [_cumulative_chart(streams), _window_chart(r, streams)]
    charts += _step_charts(r)
    if finite_number(r.get("burst_tps")) is not None and finite_number(r.get("decode_tps")) is not None:
        charts.append(Chart("burst", f"two-point vs sustained decode (burst gap {fmt(r.get('burst_gap'), '.2f')})",
                            "", "tok/s", [Series("decode", [0.0, 1.0], [float(r["burst_tps"]), float(r["decode_tps"])],
                                                 "bars")],
                            categories=["two-point (burst)", "sustained"]))
    return CaseView(facts, [c for c in charts if c.series])


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


@register("two_point")
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


@register("ctx_sweep")
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


# -- comparisons -----------------------------------------------------------------------------------


def _base_trials(r: dict[str, Any], cc: dict[str, Any], baseline: list[dict[str, Any]]) -> tuple[str, list[float]]:
    """The other side's trials for a comparison: A from an A/B run, else the matching baseline case."""
    metric = cc.get("metric") or ""
    ab = r.get("ab") or {}
    if ab and metric == "decode_tps" and cc.get("ctx") is None:
        return "A", [float(x) for x in ab.get("a_decode_tps") or []]
    key = case_key(str(cc.get("nodeid", r.get("nodeid", ""))), cc.get("ctx"))
    for b in baseline:
        for nodeid, ctx, case in sub_cases(b):
            if case_key(nodeid, ctx) == key:
                return "baseline", trials(case, metric)
    return "baseline", []


def _cand_trials(r: dict[str, Any], cc: dict[str, Any]) -> list[float]:
    metric = cc.get("metric") or ""
    ab = r.get("ab") or {}
    if ab and metric == "decode_tps" and cc.get("ctx") is None:
        return [float(x) for x in ab.get("b_decode_tps") or []]
    for _nodeid, ctx, case in sub_cases(r):
        if ctx == cc.get("ctx"):
            return trials(case, metric)
    return []


def comparison_charts(r: dict[str, Any], baseline: list[dict[str, Any]]) -> list[Chart]:
    """Per compared metric: the trials of each side, and the change with its interval against the threshold."""
    out = []
    for n, cc in enumerate(r.get("comparisons") or []):
        c = cc.get("comparison") if isinstance(cc, dict) else None
        if not c:
            continue
        metric = str(c.get("metric"))
        where = "" if cc.get("ctx") is None else f" at ctx {cc['ctx']}"
        base_name, base = _base_trials(r, cc, baseline)
        cand = _cand_trials(r, cc)
        cand_name = "B" if base_name == "A" else "current"
        # The case's verdict (cc), which may differ from the raw comparison's (e.g. a TTFT noise floor).
        chart = Chart(f"cmp{n}", f"{metric}{where} vs {base_name}: {cc.get('verdict')} "
                      f"{c.get('change', 0) * 100:+.1f}% [{c['change_ci'][0] * 100:+.1f}%, "
                      f"{c['change_ci'][1] * 100:+.1f}%]", "", metric, categories=[base_name, cand_name])
        for i, (name, values) in enumerate(((base_name, base), (cand_name, cand))):
            if values:
                chart.series.append(Series(name, [float(i)] * len(values), [float(v) for v in values], "points"))
        if base:
            # The interval of the change, drawn around the baseline's median on the metric's own scale.
            mid = statistics.median(base)
            lo, hi = (mid * (1 + x) for x in c["change_ci"])
            chart.series.append(Series("change, 98% interval", [1.0], [mid * (1 + c["change"])], "points",
                                       low=[lo], high=[hi]))
            worse = -1 if DIRECTIONS.get(metric, "higher") == "higher" else 1
            chart.levels.append(Level(mid * (1 + worse * c.get("threshold", 0.0)),
                                      f"max regression {c.get('threshold', 0) * 100:.0f}%"))
        if chart.series:
            out.append(chart)
    return out


# Registers the load kinds' renderers; imported last because it builds on everything above.
from . import load_figures  # noqa: E402,F401
