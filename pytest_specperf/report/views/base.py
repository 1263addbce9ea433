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

from pytest_specperf.compare.trials import DIRECTIONS, case_key, sub_cases, trials
from pytest_specperf.report.table import finite_number
from pytest_specperf.run.acceptance import slowdown_split

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
    labels: list[str] | None = None  # a word written at each point (a level's verdict)


@dataclass
class Band:
    """A shaded span along ``axis`` ("x" or "y") from ``lo`` to ``hi``."""

    lo: float
    hi: float
    label: str
    axis: str = "x"


@dataclass
class Level:
    """A reference line (median, floor, threshold): horizontal at ``y``, or vertical there when ``axis`` is "x"."""

    y: float
    label: str
    style: str = "dashed"
    axis: str = "y"


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
    return "-" if x is None else _no_minus_zero(format(x, spec)) + unit


def _no_minus_zero(text: str) -> str:
    # -0.001 shown as "-0.00" reads as a sign that is not there
    return text[1:] if text.startswith("-") and not any(c in "123456789" for c in text.split("e")[0]) else text


def pct(v: Any) -> str:
    """A share as a whole percentage ("-" when missing)."""
    x = finite_number(v)
    return "-" if x is None else _no_minus_zero(f"{x * 100:.0f}") + "%"


def signed_pct(v: Any) -> str:
    """A change as a signed percentage with one decimal ("+12.5%"; "0.0%" for a change that rounds to none)."""
    x = finite_number(v)
    if x is None:
        return "-"
    text = f"{x * 100:+.1f}"
    return "0.0%" if text in ("+0.0", "-0.0") else text + "%"


def users_text(n: Any) -> str:
    """"1 user", "4 users" (``n`` may be a JSON key: "1")."""
    return f"{count_text(n)} user" + ("" if str(n) in ("1", "1.0") else "s")


def count_text(v: Any) -> str:
    """A whole count as plain digits (300000, never 3e+05); other values as they are."""
    x = finite_number(v)
    return str(v) if x is None else f"{x:.0f}" if x == int(x) else f"{x:g}"


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
            ("ctx (prompt tokens)", count_text(r.get("prompt_tokens") or r.get("ctx") or "-"))]


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
    streams = _streams(r)
    charts = [_cumulative_chart(streams), _window_chart(r, streams)]
    charts += _step_charts(r)
    if finite_number(r.get("burst_tps")) is not None and finite_number(r.get("decode_tps")) is not None:
        charts.append(Chart("burst", f"two-point vs sustained decode (burst gap {fmt(r.get('burst_gap'), '.2f')})",
                            "", "tok/s", [Series("decode", [0.0, 1.0], [float(r["burst_tps"]), float(r["decode_tps"])],
                                                 "bars")],
                            categories=["two-point (burst)", "sustained"]))
    return CaseView(facts, [c for c in charts if c.series])


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


def _other_side(r: dict[str, Any]) -> tuple[str, str]:
    """(other side, this side): ("A", "B") in an A/B run, else ("baseline", "current")."""
    return ("A", "B") if r.get("ab") else ("baseline", "current")


def _base_trials(r: dict[str, Any], cc: dict[str, Any], baseline: list[dict[str, Any]]) -> tuple[str, list[float]]:
    """The other side's trials for a comparison: A from an A/B run, else the matching baseline case."""
    metric = cc.get("metric") or ""
    ab = r.get("ab") or {}
    if ab:
        if metric == "decode_tps" and cc.get("ctx") is None:
            return "A", [float(x) for x in ab.get("a_decode_tps") or []]
        # A/B keeps only A's median of other figures
        a = finite_number((ab.get("a") or {}).get(metric))
        return "A", [] if a is None else [a]
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


def _change(c: dict[str, Any]) -> tuple[float, float, float] | None:
    """(change, interval low, interval high) of a comparison record, or None when any is missing."""
    ci = c.get("change_ci") or [None, None]
    values = [finite_number(c.get("change")), *(finite_number(x) for x in list(ci)[:2])]
    return None if len(values) != 3 or any(v is None for v in values) else (values[0], values[1], values[2])


def _span(c: dict[str, Any]) -> str:
    ch = _change(c)
    return "" if ch is None else f" {signed_pct(ch[0])} [{signed_pct(ch[1])}, {signed_pct(ch[2])}]"


def comparison_charts(r: dict[str, Any], baseline: list[dict[str, Any]]) -> list[Chart]:
    """Per compared metric: a sweep's change per level (``level_comparison_charts``); for other cases the trials
    of each side and the change with its interval against the threshold."""
    records = [cc for cc in r.get("comparisons") or [] if isinstance(cc, dict) and cc.get("comparison")]
    out = level_comparison_charts(r, [cc for cc in records if cc.get("users") is not None])
    for n, cc in enumerate(cc for cc in records if cc.get("users") is None):
        c = cc["comparison"]
        metric = str(c.get("metric"))
        where = "" if cc.get("ctx") is None else f" at ctx {count_text(cc['ctx'])}"
        base_name, base = _base_trials(r, cc, baseline)
        cand = _cand_trials(r, cc)
        cand_name = _other_side(r)[1]
        # The case's verdict (cc), which may differ from the raw comparison's (e.g. a TTFT noise floor).
        chart = Chart(f"cmp{n}", f"{metric}{where} vs {base_name}: {cc.get('verdict')}{_span(c)}", "", metric,
                      categories=[base_name, cand_name])
        for i, (name, values) in enumerate(((base_name, base), (cand_name, cand))):
            if values:
                chart.series.append(Series(name, [float(i)] * len(values), [float(v) for v in values], "points"))
        change = _change(c)
        if base and change is not None:
            # The interval of the change, drawn around the baseline's median on the metric's own scale.
            mid = statistics.median(base)
            chart.series.append(Series("change, 98% interval", [1.0], [mid * (1 + change[0])], "points",
                                       low=[mid * (1 + change[1])], high=[mid * (1 + change[2])]))
            worse = -1 if DIRECTIONS.get(metric, "higher") == "higher" else 1
            chart.levels.append(Level(mid * (1 + worse * c.get("threshold", 0.0)),
                                      f"max regression {c.get('threshold', 0) * 100:.0f}%"))
        if chart.series:
            out.append(chart)
    return out


def level_comparison_charts(r: dict[str, Any], records: list[dict[str, Any]]) -> list[Chart]:
    """A load sweep's comparisons: one chart per metric over users.

    Each level's ratio of B (or current) to A (or baseline), ``1 + change``, with its 98% interval
    ``1 + change_ci`` and the level's verdict written at its point; A is the line at 1, the allowed
    regression a dashed line, and the crossover (A/B) a vertical line. Every number is the level's
    comparison record's own. Ratios use a log axis: a halving and a doubling lie equally far from 1.
    """
    other, this = _other_side(r)
    metrics = list(dict.fromkeys(str(cc.get("metric")) for cc in records))
    cross = r.get("crossover") if isinstance(r.get("crossover"), dict) else {}
    out = []
    for metric in metrics:
        rows = []
        for cc in records:
            change = _change(cc["comparison"]) if cc.get("metric") == metric else None
            if change is not None and finite_number(cc.get("users")) is not None:
                rows.append((float(cc["users"]), change, str(cc.get("verdict") or "-"), cc["comparison"]))
        if not rows:
            continue
        rows.sort(key=lambda row: row[0])
        worst = next((v for v in ("regressed", "inconclusive", "improved", "passed") if v in {r[2] for r in rows}),
                     rows[0][2])
        where = [count_text(u) for u, _, v, _ in rows if v == worst]
        s = Series(f"{this} / {other}, 98% interval", [u for u, *_ in rows], [1 + ch[0] for _, ch, _, _ in rows],
                   "points", low=[1 + ch[1] for _, ch, _, _ in rows], high=[1 + ch[2] for _, ch, _, _ in rows],
                   labels=[v for _, _, v, _ in rows])
        positive = min(s.y) > 0  # an interval reaching 0 runs off the axis's foot
        title = f"{metric} per level, {this} vs {other}: {worst} at {users_text(', '.join(where))}"
        chart = Chart(f"cmp_{metric}", title, "users", f"{metric}: {this} / {other}", [s],
                      [Level(1.0, f"{other} (ratio 1)", "solid")], xscale="log", yscale="log" if positive else "linear")
        threshold = finite_number(rows[0][3].get("threshold"))
        if threshold:
            worse = -1 if DIRECTIONS.get(metric, "higher") == "higher" else 1
            chart.levels.append(Level(1 + worse * threshold, f"max regression {threshold * 100:.0f}%"))
        at = finite_number(cross.get("users"))
        if at is not None:
            chart.levels.append(Level(at, f"crossover at {users_text(cross['users'])}", "dashed", "x"))
        out.append(chart)
    return out


# Registers the load kinds' renderers; imported last because it builds on everything above.
from pytest_specperf.report.views import load as load_figures  # noqa: E402,F401
