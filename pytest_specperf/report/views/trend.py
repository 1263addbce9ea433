"""A case's trend against its history (``--specperf-history``): one chart per unit and gated metric.

Runs along x (their order in the history), each run's value with its 95 % interval, the change points as
vertical lines, and this run at the right end with the interval its history predicted for it. Drawn from
``result.history``'s ``HistoryEntry`` records (``history/against_history.py``) or ``specperf trend``'s
``MetricTrend`` records (``history/trend.py``); never imports pytest.
"""

from __future__ import annotations

from pytest_specperf.cases.result_parts import HistoryEntry, MetricTrend
from pytest_specperf.report.views.base import Chart, Level, ResultLike, Series, typed


def axis(metric: str) -> tuple[str, float]:
    """The y axis of a metric's trend and the factor its values are drawn at: times in ms, as the table shows them,
    and named as what the history judges (the geometric mean of a run's trials, not a percentile)."""
    if metric.endswith("_s"):
        return f"{metric.removesuffix('_s')}, ms (geometric mean of the run's trials)", 1000.0
    return f"{metric} (geometric mean of the run's trials)", 1.0


def _chart(n: int, e: HistoryEntry | MetricTrend, title: str) -> Chart | None:
    series = e.series
    if not series:
        return None
    first = e.first_shown + 1  # runs numbered from 1, in history order
    xs = [float(first + i) for i in range(len(series))]
    label_y, k = axis(e.metric)
    chart = Chart(f"trend{n}", title, "run (oldest first)", label_y)
    chart.series.append(Series("earlier runs, 95% interval", xs, [s.value * k for s in series], "points",
                               low=[s.lo * k for s in series], high=[s.hi * k for s in series]))
    nxt = float(first + len(series))
    # a judged entry has this run's value and verdict; a trend only the history's prediction for the next run
    value, verdict = (e.value, e.verdict) if isinstance(e, HistoryEntry) else (None, None)
    if e.interval is not None and len(e.interval) == 2 and e.predicted is not None:
        label = "predicted for this run" if value is not None else "predicted for the next run"
        chart.series.append(Series(label, [nxt], [float(e.predicted) * k], "points",
                                   low=[float(e.interval[0]) * k], high=[float(e.interval[1]) * k]))
    if value is not None:
        chart.series.append(Series("this run", [nxt], [float(value) * k], "points", labels=[str(verdict or "")]))
    for c in e.changes:
        x = float(c.index + 1)
        if x >= first:
            chart.levels.append(Level(x - 0.5, f"change at run {c.run or 'this'} ({c.commit}): {c.effect:+.1%}",
                                      axis="x"))
    return chart


def charts(result: ResultLike) -> list[Chart]:
    """The trend charts of a result judged against its history (none without one)."""
    out = []
    for n, e in enumerate(typed(result).history or []):
        title = f"{e.metric} over {e.runs} runs: {e.verdict} ({e.effect:+.1%} vs predicted)"
        chart = _chart(n, e, title)
        if chart is not None:
            out.append(chart)
    return out


def trend_charts(entries: list[MetricTrend]) -> list[Chart]:
    """``specperf trend``'s charts: the history alone, with the interval the next run is predicted in."""
    out = []
    for n, e in enumerate(entries):
        chart = _chart(n, e, f"{e.key} {e.metric}: {e.runs} runs, {len(e.changes)} change point(s)")
        if chart is not None:
            out.append(chart)
    return out


def facts(result: ResultLike) -> list[tuple[str, str]]:
    """One line per judged metric: its change against the history's prediction, and the verdict."""
    out = []
    for e in typed(result).history or []:
        began = e.began
        where = f"; change began at run {began.run or 'now'} ({began.commit})" if began is not None else ""
        out.append((f"history {e.metric}", f"{float(e.effect):+.1%} vs {e.runs} runs: {e.verdict}{where}"))
    return out
