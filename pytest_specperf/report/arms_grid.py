"""The arms table as text: the users x arms grid of ``compare/arms.py``'s ``ArmsTable``, for the terminal and the
Markdown summary (the HTML view draws the same grid, ``views/arms.py``)."""

from __future__ import annotations

from pytest_specperf.cases.result_parts import ArmFigures, ArmsLevel, ArmsTable
from pytest_specperf.cases.results import Result


def _cell(arm: ArmFigures | None, mark: str) -> str:
    if arm is None or not arm.n or arm.decode_interval is None:
        return "-"
    lo, hi = arm.decode_interval
    return f"{arm.decode_tps:.1f} [{lo:.1f}, {hi:.1f}]{mark}"


def _mark(row: ArmsLevel, name: str) -> str:
    return " *" if row.best == name else " ~" if name in row.tied else ""


def grid(t: ArmsTable) -> tuple[list[str], list[list[str]]]:
    """The users x arms grid: header and rows of per-user decode [interval], best ``*``, tied with it ``~``."""
    header = ["over" if any(row.label for row in t.levels) else "users", *t.names, "aggregate of the best"]
    rows = []
    for row in t.levels:
        best = row.arms[row.best]
        rows.append([row.label or str(row.users), *(_cell(row.arms.get(n), _mark(row, n)) for n in t.names),
                     "-" if best.total_tps is None else f"{best.total_tps:.1f}"])
    return header, rows


def _table_of(result: Result) -> ArmsTable | None:
    """The result's arms table when it compared arms at some level."""
    return result.arms if result.arms is not None and result.arms.levels else None


def text_lines(result: Result) -> list[str]:
    """The terminal's arms table of one result (none when it has no arms comparison)."""
    t = _table_of(result)
    if t is None:
        return []
    header, rows = grid(t)
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    lines = [f"arms of {result.nodeid}: per-user decode tok/s [98% interval], * best, ~ tied with it"]
    lines += ["  " + "  ".join(x[i].rjust(widths[i]) for i in range(len(header))) for x in [header, *rows]]
    return [*lines, "  " + t.text]


def markdown_lines(result: Result) -> list[str]:
    """The Markdown arms table of one result (none when it has no arms comparison)."""
    t = _table_of(result)
    if t is None:
        return []
    header, rows = grid(t)
    out = ["", f"Arms of `{result.nodeid}`: per-user decode tok/s [98% interval], "
               "**best** in bold, ~ tied with it", "",
           "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for row, cells in zip(t.levels, rows, strict=True):
        # the best in bold instead of its " *": "** *" would read as emphasis markers
        shown = [f"**{c.removesuffix(' *')}**" if 0 < i <= len(t.names) and t.names[i - 1] == row.best
                 else c for i, c in enumerate(cells)]
        out.append("| " + " | ".join(shown) + " |")
    return [*out, "", t.text]
