"""A case's trend against its history (``--specperf-history``): one chart per unit and gated metric.

Runs along x (their order in the history), each run's value with its 95 % interval, the change points as
vertical lines, and this run at the right end with the interval its history predicted for it. Plain data from
``result.history`` (``history/against_history.py``) or ``specperf trend`` (``history/trend.py``);
never imports pytest.

A history entry stays a dict for now (issue 36 plan: history/ builds it), so it is read by its keys here;
each such line says so (``# untyped part``).
"""

from __future__ import annotations

from typing import Any

from pytest_specperf.report.views.base import Chart, Level, ResultLike, Series, typed


def _chart(n: int, e: dict[str, Any], title: str) -> Chart | None:
    # untyped part: a history entry (history/against_history.py, history/trend.py) is a dict, read by its keys
    series = [s for s in e.get("series") or [] if isinstance(s, dict)]  # untyped part: a history entry
    if not series:
        return None
    first = int(e.get("first_shown") or 0) + 1  # untyped part; runs numbered from 1, in history order
    xs = [float(first + i) for i in range(len(series))]
    chart = Chart(f"trend{n}", title, "run (oldest first)", str(e.get("metric")))  # untyped part: a history entry
    chart.series.append(Series("earlier runs, 95% interval", xs, [s["value"] for s in series], "points",
                               low=[s["lo"] for s in series], high=[s["hi"] for s in series]))
    nxt = float(first + len(series))
    interval, predicted, value = e.get("interval"), e.get("predicted"), e.get("value")  # untyped part
    if isinstance(interval, list | tuple) and len(interval) == 2 and predicted is not None:
        label = "predicted for this run" if value is not None else "predicted for the next run"
        chart.series.append(Series(label, [nxt], [float(predicted)], "points",
                                   low=[float(interval[0])], high=[float(interval[1])]))
    if value is not None:
        verdict = e.get("verdict")  # untyped part: a history entry
        chart.series.append(Series("this run", [nxt], [float(value)], "points", labels=[str(verdict or "")]))
    for c in e.get("changes") or []:  # untyped part: a history entry
        x = float(int(c.get("index", 0)) + 1)  # untyped part: a history entry
        if x >= first:
            run, commit, effect = c.get("run") or "this", c.get("commit"), c.get("effect", 0)  # untyped part
            chart.levels.append(Level(x - 0.5, f"change at run {run} ({commit}): {effect:+.1%}", axis="x"))
    return chart


def charts(result: ResultLike) -> list[Chart]:
    """The trend charts of a result judged against its history (none without one)."""
    out = []
    for n, e in enumerate(x for x in typed(result).history or [] if isinstance(x, dict)):
        title = f"{e.get('metric')} over {e.get('runs')} runs: {e.get('verdict')}"  # untyped part
        effect = e.get("effect")  # untyped part: a history entry
        if effect is not None:
            title += f" ({float(effect):+.1%} vs predicted)"
        chart = _chart(n, e, title)
        if chart is not None:
            out.append(chart)
    return out


def trend_charts(entries: list[dict[str, Any]]) -> list[Chart]:
    """``specperf trend``'s charts: the history alone, with the interval the next run is predicted in."""
    out = []
    for n, e in enumerate(entries):  # not result data: history/trend.py's entries, no run's result
        chart = _chart(n, e, f"{e.get('key')} {e.get('metric')}: {e.get('runs')} runs, "  # untyped part
                             f"{len(e.get('changes') or [])} change point(s)")  # untyped part
        if chart is not None:
            out.append(chart)
    return out


def facts(result: ResultLike) -> list[tuple[str, str]]:
    """One line per judged metric: its change against the history's prediction, and the verdict."""
    out = []
    for e in typed(result).history or []:
        effect = e.get("effect") if isinstance(e, dict) else None  # untyped part: a history entry
        if effect is not None:
            began = e.get("began")  # untyped part: a history entry
            at, commit = (began.get("run") or "now", began.get("commit")) if began else (None, None)  # untyped part
            where = f"; change began at run {at} ({commit})" if began else ""
            metric, runs, verdict = e.get("metric"), e.get("runs"), e.get("verdict")  # untyped part
            out.append((f"history {metric}", f"{float(effect):+.1%} vs {runs} runs: {verdict}{where}"))
    return out
