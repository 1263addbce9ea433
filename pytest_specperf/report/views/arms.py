"""What a report shows for a case measured on several arms (``--specperf-arms``, and A/B sweeps): the users x
arms grid as facts and one chart, per-user decode against users with a line per arm (plain data, no drawing).

Every number drawn is in the result's ``arms`` field as written to ``--specperf-json``.
"""

from __future__ import annotations

from pytest_specperf.report import arms_grid
from pytest_specperf.report.views.base import CaseView, Chart, ResultLike, Series, typed, users_text


def arms_view(result: ResultLike) -> CaseView:
    """The arms grid (one fact per level) and the per-user decode chart; empty without an arms comparison."""
    t = typed(result).arms
    if t is None or not t.levels:
        return CaseView()
    header, rows = arms_grid.grid(t)
    facts = [("arms", ", ".join(f"{n} ({t.trials.get(n, 0)} trials)" for n in t.names)
              + f"; baseline {t.baseline}, deployed {t.deployed}")]
    labelled = header[0] == "over"  # a replay's one level, the trace: no users axis to draw
    facts += [(row[0] if labelled else users_text(row[0]), "; ".join(
        f"{name} {cell}" for name, cell in zip(header[1:-1], row[1:-1], strict=True))) for row in rows]
    facts.append(("schedule", t.text or "-"))
    series = []
    for name in t.names:
        pts = [(float(row.users), float(fig.decode_tps)) for row in t.levels
               for fig in [row.arms.get(name)] if fig is not None and fig.decode_tps is not None]
        if pts:
            series.append(Series(name, [x for x, _ in pts], [y for _, y in pts]))
    chart = Chart("arms_per_user", "per-user decode against users, one line per arm", "users", "tok/s", series,
                  xscale="log")
    return CaseView(facts, [chart] if series and not labelled else [])
