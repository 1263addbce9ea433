"""What a report shows for the load kinds: ``load_sweep``, ``rate`` and ``capacity`` (plain data, no drawing).

Every number drawn is a field of the result as written to ``--specperf-json``: a sweep's levels, a
rate case's ``per_request`` records, a capacity search's ``probes``. Users and offered rates double
from one level or probe to the next, so their axis is base-2 logarithmic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_specperf.cases.result_parts import Crossover, RateRequest
from pytest_specperf.cases.results import CapacityResult, LoadLevel, LoadSweepResult, Probe, RateResult
from pytest_specperf.report.table import finite_number, goal_text
from pytest_specperf.report.views.base import (
    Band,
    CaseView,
    Chart,
    Level,
    ResultLike,
    Series,
    common_facts,
    fmt,
    pct,
    typed_as,
    users_text,
)
from pytest_specperf.report.views.lengths import drawn_charts

#: The latencies a rate case records per request: field -> (name, unit shown).
LATENCIES = {"ttft_s": ("TTFT", "s"), "tpot_ms": ("TPOT", "ms"), "e2e_s": ("end-to-end", "s"),
             "ttft_content_s": ("first answer token", "s")}


def _num(v: Any) -> float | None:
    x = finite_number(v)
    return None if x is None else float(x)


def _pairs(rows: Sequence[object], xkey: str, ykey: str) -> tuple[list[float], list[float]]:
    """(x, y) of the rows (levels, probes, requests) where both fields are finite numbers, in row order."""
    pts = [(_num(getattr(row, xkey)), _num(getattr(row, ykey))) for row in rows]
    kept = [(x, y) for x, y in pts if x is not None and y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def _series(name: str, rows: Sequence[object], xkey: str, ykey: str, style: str = "line") -> list[Series]:
    """The series of ``ykey`` against ``xkey`` over ``rows``; none when no row has both."""
    xs, ys = _pairs(rows, xkey, ykey)
    return [Series(name, xs, ys, style)] if xs else []


def _percentiles(name: str, r: RateResult, unit: str) -> str:
    """"p50 / p90 / p99" of one latency, e.g. ``ttft_p50_s``."""
    base, suffix = name.rsplit("_", 1)
    return " / ".join(fmt(getattr(r, f"{base}_{q}_{suffix}"), ".3g") for q in ("p50", "p90", "p99")) + f" {unit}"


def _slo_text(slo: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k} <= {v:g}" for k, v in slo.items() if finite_number(v) is not None) if slo else "-"


# -- load sweep ------------------------------------------------------------------------------------


def _floor_marks(floor: Any, what: str, users: list[float]) -> tuple[list[Level], list[Series]]:
    """A floor: one number is a line; ``{level: floor}`` is a mark at each level it names."""
    if isinstance(floor, dict):
        pts = [(float(k), float(v)) for k, v in floor.items() if finite_number(v) is not None and float(k) in users]
        return [], [Series(f"floor ({what})", [p[0] for p in pts], [p[1] for p in pts], "points")] if pts else []
    x = _num(floor)
    return ([Level(x, f"floor ({what}) {x:g}", "solid")] if x is not None else []), []


def _sweep_charts(r: LoadSweepResult, levels: list[LoadLevel]) -> list[Chart]:
    users = [float(lv.concurrency) for lv in levels]
    total = Chart("aggregate", "aggregate output against users", "users", "tok/s",
                  _series("aggregate", levels, "concurrency", "total_tps"), xscale="log")
    knee = next((lv for lv in levels if lv.concurrency == r.knee), None)
    knee_tps = None if knee is None else _num(knee.total_tps)
    if knee is not None and knee_tps is not None:
        total.series.append(Series(f"knee at {users_text(r.knee)}", [float(knee.concurrency)], [knee_tps], "points"))
    per_user = Chart("per_user", "per-user decode against users", "users", "tok/s",
                     _series("median user", levels, "concurrency", "decode_tps")
                     + _series("10th-percentile user", levels, "concurrency", "decode_p10_tps"), xscale="log")
    for chart, floor, what in ((total, r.min_total_tps, "min_total_tps"), (per_user, r.min_tps, "min_tps")):
        lines, marks = _floor_marks(floor, what, users)
        chart.levels += lines
        chart.series += marks
    ttft = Chart("ttft_users", "time to first token against users", "users", "seconds",
                 _series("TTFT p50", levels, "concurrency", "ttft_p50_s")
                 + _series("TTFT p90", levels, "concurrency", "ttft_p90_s")
                 + _series("first answer token p50", levels, "concurrency", "ttft_content_s"), xscale="log")
    return [total, per_user, ttft, *_speedup_chart(r.crossover)]


def _speedup_chart(cross: Crossover | None) -> list[Chart]:
    """A/B: B's per-user speedup over A at each level, with its interval and the floor."""
    rows = [lv for lv in (cross.levels if cross is not None else []) if _num(lv.speedup) is not None]
    if cross is None or not rows:
        return []
    s = Series("B / A per user, 98% interval", [float(lv.users) for lv in rows],
               [float(lv.speedup) for lv in rows], "points",
               low=[float(lv.interval[0]) for lv in rows], high=[float(lv.interval[1]) for lv in rows])
    floor = float(cross.floor or 1.0)
    levels = [Level(floor, f"floor {floor:g}", "solid")]
    if _num(cross.users) is not None:
        levels.append(Level(float(cross.users or 0), f"crossover at {users_text(cross.users)}", "dashed", "x"))
    # a ratio: log axis when it can be, so a wide interval at one level does not flatten the others
    positive = min(s.y) > 0  # an interval reaching 0 runs off the axis's foot
    text = cross.text
    return [Chart("speedup", f"speculation's speedup for users: {text}", "users", "B / A",
                  [s], levels, xscale="log", yscale="log" if positive else "linear")]


def load_sweep(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """Aggregate and per-user decode, TTFT against users; the knee, floors and (A/B) speedup."""
    r = typed_as(result, LoadSweepResult)
    levels = [lv for lv in r.levels if _num(lv.concurrency) is not None]
    top = levels[-1] if levels else None
    top_users: Any = "-" if top is None else top.concurrency
    knee = r.knee
    facts = [*common_facts(r), ("users", ", ".join(str(lv.concurrency) for lv in levels) or "-"),
             ("tokens", f"{r.tokens} per user"),
             ("aggregate", " -> ".join(fmt(lv.total_tps) for lv in levels) + " tok/s"),
             (f"per user at {users_text(top_users)}",
              f"median {fmt(top and top.decode_tps)}, p10 {fmt(top and top.decode_p10_tps)} tok/s"),
             ("TTFT p90", " -> ".join(fmt(_ms(lv.ttft_p90_s), ".0f") for lv in levels) + " ms"),
             # measured since this field was added: a run saved before shows no line rather than dashes
             *([("TTFT p99", " -> ".join(fmt(_ms(lv.ttft_p99_s), ".0f") for lv in levels) + " ms")]
               if any(lv.ttft_p99_s is not None for lv in levels) else []),
             ("knee", f"at {users_text(knee)}" if knee is not None else f"none up to {users_text(top_users)}"),
             *_level_goals(levels, r)]
    phased = [lv for lv in levels if lv.reasoning_tokens]
    if phased:
        facts.append(("reasoning / answer", "; ".join(
            f"{users_text(lv.concurrency)}: {lv.reasoning_tokens} / {lv.content_tokens} tokens at "
            f"{fmt(lv.reasoning_tps)} / {fmt(lv.content_tps)} tok/s" for lv in phased)))
    failed = [f"{users_text(lv.concurrency)}: {lv.reason or lv.verdict}" for lv in levels
              if lv.verdict not in ("passed", None)]
    if failed:
        facts.append(("levels not passed", "; ".join(failed)))
    if r.crossover is not None:
        facts.append(("crossover", r.crossover.text))
    # two aggregations of one arm's trials side by side: say which is which
    if r.arms is not None and r.arms.levels:
        facts.append(("figures", f"per user and aggregate above: medians over arm {r.arms.deployed}'s trials; "
                                 "the arms below (and the terminal's level rows): each arm's geometric mean over its "
                                 "trials, the centre of its interval"))
    return CaseView(facts, [c for c in _sweep_charts(r, levels) if c.series])


def _level_goals(levels: list[LoadLevel], r: LoadSweepResult) -> list[tuple[str, str]]:
    """Each level's floors with the figure it read and its margin ('min_tps 10 tok/s at 4 users: p10 user decode
    546.0 tok/s (+5360.0%)'); a run saved before levels recorded their goals names the floors alone."""
    judged = [goal_text(g, f" at {users_text(lv.concurrency)}") for lv in levels for g in lv.goals or []]
    if judged:
        return [("judged against", ", ".join(judged))]
    return [("floors", f"min_tps {_floor_text(r.min_tps)}, min_total_tps {_floor_text(r.min_total_tps)}")]


def _ms(v: Any) -> float | None:
    x = _num(v)
    return None if x is None else x * 1000


def _floor_text(floor: Any) -> str:
    if isinstance(floor, dict):
        return ", ".join(f"{v:g} at {users_text(k)}" for k, v in floor.items() if finite_number(v) is not None) or "-"
    return fmt(floor, "g", " tok/s")


# -- rate ------------------------------------------------------------------------------------------


def _latency_chart(r: RateResult, key: str, reqs: list[RateRequest]) -> Chart:
    """One latency per answered request against its scheduled send time; SLO bound and p90 as lines.

    Split by this bound alone, so a request that met it but missed another bound is not marked here.
    """
    name, unit = LATENCIES[key]
    slo = r.slo or {}
    answered = [q for q in reqs if q.status == 200]
    bound = _num(slo.get(key))
    if bound is not None:
        within = [q for q in answered if (_num(getattr(q, key)) or math.inf) <= bound]
        series = (_series("within bound", within, "at_s", key, "points")
                  + _series("missed bound", [q for q in answered if q not in within], "at_s", key, "points"))
    else:
        series = _series("answered", answered, "at_s", key, "points")
    chart = Chart(f"{key}_per_request", f"{name} per request (from its scheduled send)", "scheduled send (s)", unit,
                  series)
    base, suffix = key.rsplit("_", 1)
    p90 = _num(getattr(r, f"{base}_p90_{suffix}"))
    if p90 is not None:
        chart.levels.append(Level(p90, f"p90 {p90:.3g} {unit}"))
    if bound is not None:
        chart.levels.append(Level(bound, f"SLO {bound:g} {unit}", "solid"))
    return chart


def _cumulative(name: str, rows: list[RateRequest]) -> list[Series]:
    xs = sorted(x for x in (_num(q.at_s) for q in rows) if x is not None)
    return [Series(name, xs, [float(i + 1) for i in range(len(xs))])] if xs else []


def _outcome_chart(reqs: list[RateRequest], slo: bool) -> Chart:
    """Requests so far against scheduled send time: all, met, refused (429/503), failed (other errors)."""
    series = _cumulative("scheduled", reqs)
    if slo:
        series += _cumulative("met SLO", [q for q in reqs if q.met])
    series += _cumulative("refused (429/503)", [q for q in reqs if q.status in (429, 503)])
    series += _cumulative("failed (no answer)", [q for q in reqs if q.status not in (200, 429, 503)])
    return Chart("outcomes", "requests so far, by outcome", "scheduled send (s)", "requests", series)


def rate(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """Open-loop arrivals: attainment, goodput, percentiles; each request's latencies and outcome over time."""
    r = typed_as(result, RateResult)
    reqs = list(r.per_request)
    slo = r.slo or {}
    facts = [*common_facts(r),
             ("offered / achieved", f"{fmt(r.rps, 'g')} req/s {r.arrivals}, {r.requests}"
                                    f" requests / {fmt(r.achieved_rps, '.2f')} req/s"),
             ("SLO", _slo_text(slo)),
             ("attainment", f"{pct(r.attainment)} ({r.met} of {len(reqs) or '-'} met)" if slo else "- (no slo)"),
             ("goodput", fmt(r.goodput_rps, ".2f", " req/s")),
             ("missed, per bound", ", ".join(f"{k} {v}" for k, v in (r.missed or {}).items()) or "-"),
             ("refused / failed", f"{r.refused} / {r.failed}"),
             *((f"{name} p50 / p90 / p99", _percentiles(key, r, unit)) for key, (name, unit) in LATENCIES.items()),
             ("output", f"{fmt(r.output_tps)} tok/s, {fmt(r.decode_tps)} tok/s per request"),
             ("client late p99", fmt(_ms(r.late_p99_s), ".1f", " ms"))]
    charts = [_latency_chart(r, key, reqs) for key in LATENCIES if key in slo or key in ("ttft_s", "e2e_s")]
    charts.append(_outcome_chart(reqs, bool(slo)))
    charts += drawn_charts(r, reqs)  # lengths drawn from a distribution: latency against each request's lengths
    return CaseView(facts, [c for c in charts if c.series])


# -- capacity --------------------------------------------------------------------------------------


def _bracket(r: CapacityResult) -> tuple[Any, Any]:
    """[highest passing, lowest failing] rate; either may be None."""
    lo, hi, *_ = [*list(r.bracket or []), None, None]
    return lo, hi


def _bracket_band(r: CapacityResult) -> list[Band]:
    lo, hi = _bracket(r)
    if _num(lo) is None or _num(hi) is None:
        return []
    return [Band(float(lo), float(hi), f"bracket {lo:.3g}..{hi:.3g} req/s")]


def _capacity_charts(r: CapacityResult, probes: list[Probe]) -> list[Chart]:
    bands = _bracket_band(r)
    att = Chart("attainment", f"SLO attainment per probe: max {fmt(r.max_rps, '.3g')} req/s",
                "offered rate (req/s)", "attainment",
                _series("passed probes", [p for p in probes if p.passed], "rps", "attainment", "points")
                + _series("failed probes", [p for p in probes if not p.passed], "rps", "attainment", "points"),
                bands=list(bands), xscale="log")
    if _num(r.target) is not None:
        att.levels.append(Level(float(r.target), f"target {r.target:g}", "solid"))
    rates = Chart("goodput", "goodput and achieved rate per probe", "offered rate (req/s)", "req/s",
                  _series("offered", probes, "rps", "rps") + _series("achieved", probes, "rps", "achieved_rps")
                  + _series("goodput", probes, "rps", "goodput_rps"), bands=list(bands), xscale="log")
    charts = [att, rates]
    for key, bound in (r.slo or {}).items():
        if key not in LATENCIES:
            continue
        name, unit = LATENCIES[key]
        base, suffix = key.rsplit("_", 1)
        chart = Chart(f"{key}_probes", f"{name} per probe against its SLO", "offered rate (req/s)", unit,
                      [s for q in ("p50", "p90", "p99") for s in _series(q, probes, "rps", f"{base}_{q}_{suffix}")],
                      bands=list(bands), xscale="log", yscale="log")
        if _num(bound) is not None:
            chart.levels.append(Level(float(bound), f"SLO {bound:g} {unit}", "solid"))
        charts.append(chart)
    return charts


def capacity(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """The search: attainment, goodput and latency percentiles per probe; the target, the bracket found."""
    r = typed_as(result, CapacityResult)
    probes = sorted((p for p in r.probes if _num(p.rps) is not None), key=lambda p: float(p.rps))
    lo, hi = _bracket(r)
    facts = [*common_facts(r), ("SLO", _slo_text(r.slo)), ("target attainment", pct(r.target)),
             ("max rate", f"{fmt(r.max_rps, '.3g')} req/s (bracket {fmt(lo, '.3g')}..{fmt(hi, '.3g')})"),
             ("at the max", f"attainment {pct(r.attainment)}, goodput {fmt(r.goodput_rps, '.2f')} "
                            f"req/s, decode {fmt(r.decode_tps)} tok/s per request"),
             ("floor", fmt(r.min_rps, "g", " req/s")),
             ("probes", f"{len(probes)} in {fmt(r.search_s, '.0f')} s: "
                        + ", ".join(f"{p.rps:.3g}" for p in probes) + " req/s"),
             ("stopped", str(r.stop or "-"))]
    return CaseView(facts, [c for c in _capacity_charts(r, probes) if c.series])
