"""The shared shape of a report's views: chart types, formatting, the generic view and comparison charts.

Plain data, no drawing: ``plots`` draws these charts, ``html`` lays them out, and the numbers a chart holds are
exactly the numbers drawn (the report also embeds them as JSON). Never imports pytest or a plotting library.
The views of each kind build on this module (``single``, ``load``); ``registry`` maps a kind to its view.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pytest_specperf.cases.figures import DIRECTIONS, sub_cases, trials
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import CaseComparison, Comparison, case_key
from pytest_specperf.cases.results import ErrorRecord, LoadSweepResult, Recorded, Result
from pytest_specperf.cases.saved_results import as_result, load_record
from pytest_specperf.report.table import finite_number


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
    span: list[float] | None = None  # [x from, x to]: drawn over that stretch only (one category's bar), not across


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
class Table:
    """A small table of text: a title, its column headers and its rows (a cause's two sides, ``views/cause.py``)."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class CaseView:
    """What the report shows for one result: key figures (label, text), charts and tables."""

    facts: list[tuple[str, str]] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


#: What a view takes: a typed result, or its JSON (a saved run's, an xdist report's).
ResultLike = Recorded | Mapping[str, Any]

#: A kind's view: (result, baseline results) -> what the report shows for it.
View = Callable[[ResultLike, Sequence[ResultLike]], CaseView]


def typed(result: ResultLike) -> Result:
    """A view's result as one typed record: a record as it is, JSON (a saved run's) loaded once at the entry.
    TypeError for an error record: it has no figures (``registry.view`` shows it as recorded)."""
    if isinstance(result, ErrorRecord):
        raise TypeError(f"{result.nodeid} could not be measured: its error record has no figures to show")
    return as_result(result)


R = TypeVar("R", bound=Result)


def typed_as(result: ResultLike, cls: type[R]) -> R:
    """``typed(result)``, which must be of the record ``cls`` (a kind's view is for that kind only)."""
    r = typed(result)
    if not isinstance(r, cls):
        raise TypeError(f"a {r.kind} result cannot be shown as a {cls.__name__}: show it with views.registry.view")
    return r


def typed_all(results: Sequence[ResultLike]) -> list[Result]:
    """A baseline run's results, each typed (``typed``)."""
    # each through the one loader (a saved run's JSON too): a case that could not be measured measured nothing
    return [r for r in (load_record(x) if isinstance(x, Mapping) else x for x in results) if isinstance(r, Result)]


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


# -- generic ---------------------------------------------------------------------------------------


def generic(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """Every scalar field as a row: the view of kinds without their own renderer.

    The fields as recorded, not typed: an errored case's record holds only what the case asked (no endpoint,
    no figures), and its row shows just that."""
    facts = []
    for key, value in (result if isinstance(result, Mapping) else to_dict(result)).items():
        if isinstance(value, bool) or value is None:
            facts.append((key, str(value).lower() if isinstance(value, bool) else "-"))
        elif isinstance(value, int):
            facts.append((key, count_text(value)))  # ctx 300000, never 3e+05
        elif isinstance(value, float):
            facts.append((key, fmt(value, ".4g")))
        elif isinstance(value, str) and key not in ("nodeid",):
            facts.append((key, value or "-"))
    return CaseView(facts=facts)


def common_facts(result: ResultLike) -> list[tuple[str, str]]:
    """The facts every kind shows first: server and model, content, prompt size."""
    r = typed(result)
    return [("server", f"{r.server} ({r.model})"), ("content", str(r.content)),
            ("ctx (prompt tokens)", count_text(r.prompt_tokens or r.ctx or "-"))]


# -- comparisons -----------------------------------------------------------------------------------


def _other_side(r: Result) -> tuple[str, str]:
    """(other side, this side): ("A", "B") in an A/B run, else ("baseline", "current")."""
    return ("A", "B") if r.ab is not None else ("baseline", "current")


def _base_trials(r: Result, cc: CaseComparison, baseline: list[Result]) -> tuple[str, list[float]]:
    """The other side's trials for a comparison: A from an A/B run, else the matching baseline case."""
    metric = cc.metric or ""
    ab = r.ab
    if ab is not None:
        if metric == "decode_tps" and cc.ctx is None:
            return "A", [float(x) for x in ab.a_decode_tps]
        # A/B keeps only A's median of other figures
        a = finite_number(ab.a.get(metric))
        return "A", [] if a is None else [a]
    key = case_key(cc.nodeid, cc.ctx)
    for b in baseline:
        for nodeid, ctx, case in sub_cases(b):
            if case_key(nodeid, ctx) == key:
                return "baseline", trials(case, metric)
    return "baseline", []


def _cand_trials(r: Result, cc: CaseComparison) -> list[float]:
    metric = cc.metric or ""
    ab = r.ab
    if ab is not None and metric == "decode_tps" and cc.ctx is None:
        return [float(x) for x in ab.b_decode_tps]
    for _nodeid, ctx, case in sub_cases(r):
        if ctx == cc.ctx:
            return trials(case, metric)
    return []


def _change(c: Comparison) -> tuple[float, float, float] | None:
    """(change, interval low, interval high) of a comparison record, or None when any is missing."""
    values = [finite_number(c.change), *(finite_number(x) for x in list(c.change_ci or [])[:2])]
    kept = [v for v in values if v is not None]
    return (kept[0], kept[1], kept[2]) if len(kept) == 3 else None


def _span(c: Comparison) -> str:
    ch = _change(c)
    return "" if ch is None else f" {signed_pct(ch[0])} [{signed_pct(ch[1])}, {signed_pct(ch[2])}]"


def comparison_charts(result: ResultLike, baseline: Sequence[ResultLike]) -> list[Chart]:
    """Per compared metric: a sweep's change per level (``level_comparison_charts``); for other cases the trials
    of each side and the change with its interval against the threshold."""
    r = typed(result)
    records = [cc for cc in r.comparisons or [] if cc.comparison is not None]
    # A session's users are its sessions at once, not a level of a sweep: no one-point "users" axis.
    levels = [cc for cc in records if cc.users is not None and r.kind != "session"]
    out = level_comparison_charts(r, levels)
    base_results: list[Result] | None = None  # typed once, and only when a case is matched in the baseline
    for n, cc in enumerate(cc for cc in records if cc not in levels):
        c = cc.comparison
        assert c is not None  # records hold only comparisons with one
        metric = str(c.metric)
        where = "" if cc.ctx is None else f" at ctx {count_text(cc.ctx)}"
        if base_results is None and r.ab is None:
            base_results = typed_all(baseline)
        base_name, base = _base_trials(r, cc, base_results or [])
        cand = _cand_trials(r, cc)
        cand_name = _other_side(r)[1]
        # The case's verdict (cc), which may differ from the raw comparison's (e.g. a TTFT noise floor).
        chart = Chart(f"cmp{n}", f"{metric}{where} vs {base_name}: {cc.verdict}{_span(c)}", "", metric,
                      categories=[base_name, cand_name])
        if not base and not cand:
            continue
        for i, (name, values) in enumerate(((base_name, base), (cand_name, cand))):
            # both sides always: each keeps its colour, and a side without kept trials says so in the legend
            label = name if values else f"{name} (no trials kept)"
            chart.series.append(Series(label, [float(i)] * len(values), [float(v) for v in values], "points"))
        change = _change(c)
        if base and change is not None:
            # The interval of the change, drawn around the baseline's median on the metric's own scale.
            mid = statistics.median(base)
            chart.series.append(Series("change, 98% interval", [1.0], [mid * (1 + change[0])], "points",
                                       low=[mid * (1 + change[1])], high=[mid * (1 + change[2])]))
            worse = -1 if DIRECTIONS.get(metric, "higher") == "higher" else 1
            chart.levels.append(Level(mid * (1 + worse * c.threshold), f"max regression {c.threshold * 100:.0f}%"))
        out.append(chart)
    return out


def level_comparison_charts(result: ResultLike, records: Sequence[CaseComparison]) -> list[Chart]:
    """A load sweep's comparisons: one chart per metric over users.

    Each level's ratio of B (or current) to A (or baseline), ``1 + change``, with its 98% interval
    ``1 + change_ci`` and the level's verdict written at its point; A is the line at 1, the allowed
    regression a dashed line, and the crossover (A/B) a vertical line. Every number is the level's
    comparison record's own. Ratios use a log axis: a halving and a doubling lie equally far from 1.
    """
    r = typed(result)
    other, this = _other_side(r)
    metrics = list(dict.fromkeys(str(cc.metric) for cc in records))
    cross = r.crossover if isinstance(r, LoadSweepResult) else None
    out = []
    for metric in metrics:
        rows: list[tuple[float, tuple[float, float, float], str, Comparison]] = []
        for cc in records:
            change = _change(cc.comparison) if cc.metric == metric and cc.comparison is not None else None
            if change is not None and cc.comparison is not None and finite_number(cc.users) is not None:
                rows.append((float(cc.users or 0), change, str(cc.verdict or "-"), cc.comparison))
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
        threshold = finite_number(rows[0][3].threshold)
        if threshold:
            worse = -1 if DIRECTIONS.get(metric, "higher") == "higher" else 1
            chart.levels.append(Level(1 + worse * threshold, f"max regression {threshold * 100:.0f}%"))
        users = cross.users if cross is not None else None
        at = finite_number(users)
        if at is not None:
            chart.levels.append(Level(at, f"crossover at {users_text(users)}", "dashed", "x"))
        out.append(chart)
    return out
