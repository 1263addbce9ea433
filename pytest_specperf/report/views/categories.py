"""The category x metric view of a case over a prompt file: one bar per category for each figure, like a
Spec-Bench leaderboard row; each category's n (requests) is in the view's facts beside the charts."""

from __future__ import annotations

from pytest_specperf.cases.result_parts import CategoryFigures
from pytest_specperf.cases.results import CapacityResult, LoadSweepResult, RateResult, Result, SustainedResult
from pytest_specperf.report.table import category_count, finite_number
from pytest_specperf.report.views.base import Chart, Level, ResultLike, Series, fmt, typed, users_text

#: (figure key, chart title, y label) of each metric drawn per category, where the server showed it
METRICS = (("decode_tps_p50", "decode tok/s per category (median; p10 as points)", "tokens/s"),
           ("accept_len", "mean accepted length per category", "tokens/step"),
           ("ttft_p50_ms", "TTFT p50 per category", "ms"),
           ("drift", "drift per category (median stream's)", "1 - late/early"),
           ("speedup", "speculation's speedup per category (B / A, with interval)", "x"))
FLOORS = {"decode_tps_p50": "min_tps", "accept_len": "min_accept_len"}


#: The kinds whose results can run over a prompt file's categories (``categories`` per category).
WITH_CATEGORIES = (SustainedResult, LoadSweepResult, RateResult, CapacityResult)


def _categories(r: Result) -> dict[str, CategoryFigures]:
    return (r.categories or {}) if isinstance(r, WITH_CATEGORIES) else {}


def _level(r: Result) -> int | None:
    """The sweep level a case's categories are from: a load sweep's highest (``categories_users`` in its JSON);
    None for the other kinds, whose categories ran under the case's one load."""
    return r.levels[-1].concurrency if isinstance(r, LoadSweepResult) and r.levels else None


def charts(result: ResultLike) -> list[Chart]:
    """One bar chart per metric shown for some category; none for a case without categories."""
    r = typed(result)
    cats = _categories(r)
    if not cats:
        return []
    names = list(cats)
    labels = list(names)  # each category's n is in the facts above the charts
    level = _level(r)
    at = f", at {users_text(level)}" if level is not None else ""  # a sweep's categories are one level's
    out = []
    for key, title, ylabel in METRICS:
        ys = [_figure(cats[n], key) for n in names]
        if all(y is None for y in ys):
            continue
        xs = [float(i) for i, y in enumerate(ys) if y is not None]
        chart = Chart(f"categories-{key}", title + at, "category", ylabel, categories=labels)
        chart.series.append(Series(key, xs, [y for y in ys if y is not None], style="bars",
                                   labels=[fmt(y, ".1f" if key == "ttft_p50_ms" else ".2f") for y in ys
                                           if y is not None]))
        if key == "decode_tps_p50":
            all_p10 = [(float(i), finite_number(cats[n].decode_tps_p10)) for i, n in enumerate(names)]
            p10 = [(x, y) for x, y in all_p10 if y is not None]
            if p10:
                chart.series.append(Series("decode_tps_p10", [x for x, _ in p10], [y for _, y in p10], style="points"))
        if key == "speedup":  # points with their interval, as the crossover's speedup chart draws them
            ivs: list[list[float | None]] = [[*(cats[n].speedup_interval or []), None, None] for n in names]
            first = chart.series[0]
            first.style = "points"
            first.low = [finite_number(ivs[int(x)][0]) or y for x, y in zip(first.x, first.y, strict=True)]
            first.high = [finite_number(ivs[int(x)][1]) or y for x, y in zip(first.x, first.y, strict=True)]
            chart.levels.append(Level(1.0, "no speedup"))
        floor = FLOORS.get(key)
        for i, n in enumerate(names):
            v = finite_number(getattr(cats[n], floor)) if floor else None
            if v is not None:  # over its own bar only: another category's floor is not this one's
                chart.levels.append(Level(v, f"{n} {floor} {v:g}", span=[i - BAR_REACH, i + BAR_REACH]))
        out.append(chart)
    return out


#: How far a category's floor line reaches either side of its bar's centre (bars are 0.6 wide).
BAR_REACH = 0.4


def _figure(f: CategoryFigures, key: str) -> float | None:
    """A category's figure as drawn: TTFT in ms (a few ms would read 0.00 s), the others as recorded."""
    if key == "ttft_p50_ms":
        s = finite_number(f.ttft_p50_s)
        return None if s is None else s * 1000
    return finite_number(getattr(f, key))


def facts(result: ResultLike) -> list[tuple[str, str]]:
    """One line per category: n, decode, TTFT, acceptance, drift."""
    r = typed(result)
    cats = _categories(r)
    if not cats:
        return []
    level = _level(r)
    at = f" @ {users_text(level)}" if level is not None else ""
    out = []
    for name, f in cats.items():
        out.append((f"category {name}" + at,
                    f"{category_count(f)}, decode {fmt(f.decode_tps_p50)} tok/s "
                    f"(p10 {fmt(f.decode_tps_p10)}), TTFT p50 {fmt(_figure(f, 'ttft_p50_ms'), '.1f', ' ms')}, "
                    f"accept {fmt(f.accept_len, '.2f')}/step, rate {fmt(f.accept_rate, '.2f')}, "
                    f"drift {fmt(f.drift, '.2f')}"))
    return out
