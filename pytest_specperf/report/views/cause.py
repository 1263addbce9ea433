"""What a compared metric's change comes from, as tables: the other side and this one side by side per factor
(``compare/cause.py``), for every comparison and history entry that carries a cause. Plain data, no drawing."""

from __future__ import annotations

from pytest_specperf.cases.result_parts import Cause, case_key, value_text
from pytest_specperf.report.views.base import ResultLike, Table, signed_pct, typed, users_text


def _share(v: float | None) -> str:
    return "-" if v is None else f"{round(v * 100)}%"


def table(cause: Cause, title: str) -> Table:
    """One cause: a row for the metric, then one per factor (the cause first): each side's figure, the change, and
    the share of the metric's change it explains."""
    other, this = [*cause.sides, "baseline", "current"][:2] if len(cause.sides) < 2 else cause.sides[:2]
    # a time in seconds is shown in ms, as the results table shows it
    scale, unit = (1000.0, "ms") if cause.metric.endswith("_s") else (1.0, "")
    base, now = (None if v is None else v * scale for v in (cause.base, cause.now))
    rows = [[f"{cause.metric} ({unit})" if unit else cause.metric, value_text(base, unit), value_text(now, unit),
             signed_pct(cause.change), "100%" if cause.named else "-"]]
    for f in cause.factors:
        if f.name == "other":
            rows.append(["other (not measured apart)", "", "", "", _share(f.share)])
            continue
        unit = f" ({f.unit}{', from ' + f.source if f.source else ''})" if f.unit else ""
        rows.append([f"{f.name}{unit}", value_text(f.base, f.unit), value_text(f.now, f.unit),
                     "-" if f.change is None else signed_pct(f.change), _share(f.share)])
    named = f"the cause: {cause.named}" if cause.named else "too small or too little measured to split"
    return Table(f"{title}: {named}", ["", other, this, "change", "explains"], rows)


def tables(result: ResultLike) -> list[Table]:
    """A table per comparison, arms level and history entry with a cause, in the order the result holds them."""
    r = typed(result)
    out = []
    for cc in r.comparisons or []:
        if cc.cause is not None:
            where = f" at {users_text(cc.users)}" if cc.users is not None else \
                f" at ctx {cc.ctx}" if cc.ctx is not None else ""
            out.append(table(cc.cause, f"why {cc.metric}{where} {cc.verdict}"))
    gate = r.arms.gate if r.arms is not None else None
    if gate is not None:
        for lv in gate.levels:
            if lv.cause is not None:
                out.append(table(lv.cause, f"why {gate.deployed} at {users_text(lv.users)} is {lv.verdict} against "
                                           f"the best arm {lv.best}"))
    for e in r.history or []:
        if e.cause is not None:
            unit = "" if e.key == case_key(r.nodeid, None) else f" ({e.key.rpartition('@')[2]})"
            out.append(table(e.cause, f"why {e.metric}{unit} {e.verdict} against its history"))
    return out
