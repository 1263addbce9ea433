"""A case's trend against its history (``--specperf-history``): one chart per unit and gated metric.

Runs along x (their order in the history), each run's value with its 95 % interval, the change points as
vertical lines, and this run at the right end with the interval its history predicted for it. Plain data from
``result["history"]`` (``history/against_history.py``) or ``specperf trend`` (``history/trend.py``);
never imports pytest.
"""

from __future__ import annotations

from typing import Any

from pytest_specperf.report.views.base import Chart, Level, Series


def _chart(n: int, e: dict[str, Any], title: str) -> Chart | None:
    series = [s for s in e.get("series") or [] if isinstance(s, dict)]
    if not series:
        return None
    first = int(e.get("first_shown") or 0) + 1  # runs numbered from 1, in history order
    xs = [float(first + i) for i in range(len(series))]
    chart = Chart(f"trend{n}", title, "run (oldest first)", str(e.get("metric")))
    chart.series.append(Series("earlier runs, 95% interval", xs, [s["value"] for s in series], "points",
                               low=[s["lo"] for s in series], high=[s["hi"] for s in series]))
    nxt = float(first + len(series))
    interval = e.get("interval")
    if isinstance(interval, list | tuple) and len(interval) == 2 and e.get("predicted") is not None:
        label = "predicted for this run" if e.get("value") is not None else "predicted for the next run"
        chart.series.append(Series(label, [nxt], [float(e["predicted"])], "points",
                                   low=[float(interval[0])], high=[float(interval[1])]))
    if e.get("value") is not None:
        chart.series.append(Series("this run", [nxt], [float(e["value"])], "points",
                                   labels=[str(e.get("verdict") or "")]))
    for c in e.get("changes") or []:
        x = float(int(c.get("index", 0)) + 1)
        if x >= first:
            chart.levels.append(Level(x - 0.5, f"change at run {c.get('run') or 'this'} ({c.get('commit')}): "
                                               f"{c.get('effect', 0):+.1%}", axis="x"))
    return chart


def charts(result: dict[str, Any]) -> list[Chart]:
    """The trend charts of a result judged against its history (none without one)."""
    out = []
    for n, e in enumerate(x for x in result.get("history") or [] if isinstance(x, dict)):
        title = f"{e.get('metric')} over {e.get('runs')} runs: {e.get('verdict')}"
        if e.get("effect") is not None:
            title += f" ({float(e['effect']):+.1%} vs predicted)"
        chart = _chart(n, e, title)
        if chart is not None:
            out.append(chart)
    return out


def trend_charts(entries: list[dict[str, Any]]) -> list[Chart]:
    """``specperf trend``'s charts: the history alone, with the interval the next run is predicted in."""
    out = []
    for n, e in enumerate(entries):
        chart = _chart(n, e, f"{e.get('key')} {e.get('metric')}: {e.get('runs')} runs, "
                             f"{len(e.get('changes') or [])} change point(s)")
        if chart is not None:
            out.append(chart)
    return out


def facts(result: dict[str, Any]) -> list[tuple[str, str]]:
    """One line per judged metric: its change against the history's prediction, and the verdict."""
    out = []
    for e in result.get("history") or []:
        if isinstance(e, dict) and e.get("effect") is not None:
            began = e.get("began")
            where = f"; change began at run {began.get('run') or 'now'} ({began.get('commit')})" if began else ""
            out.append((f"history {e.get('metric')}", f"{float(e['effect']):+.1%} vs {e.get('runs')} runs: "
                                                       f"{e.get('verdict')}{where}"))
    return out
