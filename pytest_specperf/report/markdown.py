"""``--specperf-markdown``: the results (and comparisons) as a GitHub-flavoured Markdown table with notes.

Also appended to ``$GITHUB_STEP_SUMMARY`` when that is set (and only with ``--specperf-markdown``). Columns:
case, ctx, tokens, ttft, decode tok/s, early -> late, drift, verdict, plus a "vs baseline" column when the run
was compared. Sweep points get a row each; baseline-only cases are listed at the end. Below the table: the
comparison counts, each regression's reason, and, for inconclusive comparisons the noise cannot settle, the
minimum detectable effect and the trials per side needed. Cells escape ``|``. Never imports pytest.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_specperf.cases.result_parts import CaseComparison, case_key
from pytest_specperf.cases.results import Recorded, Result, SweepResult
from pytest_specperf.files import write_text_atomic
from pytest_specperf.report import arms_grid
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.report.table import (
    ATTENTION,
    COLUMNS,
    Row,
    as_case,
    as_row,
    category_rows,
    cells,
    has_load,
    label,
    level_rows,
    n_users,
    shown_case,
    signed_pct,
    with_load,
)
from pytest_specperf.settings import STEP_SUMMARY


def _cell(text: str) -> str:
    # GFM: a '|' ends the cell even inside a code span unless escaped; newlines end the row.
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def _case(nodeid: str, suffix: str = "") -> str:
    short = _cell(nodeid.rsplit("/", 1)[-1] or nodeid).replace("`", "'")
    return f"`{short}`{suffix}"


def _row(r: Row, case: str, *, verdict: bool = True, load: bool = False) -> list[str]:
    out = [case, *(_cell(c) for c in cells(r, verdict=verdict))]
    return with_load(out, r) if load else out


def _cmp_cell(ccs: Sequence[CaseComparison]) -> str:
    parts = []
    for cc in ccs:
        c = cc.comparison
        if c is None:
            parts.append(cc.verdict if cc.verdict in ("new", "missing") else f"{cc.verdict}: {cc.reason}")
        else:
            # The case comparison's verdict: the one JSON, JUnit and the terminal carry (noise floors applied).
            word = f"**{cc.verdict}**" if cc.verdict == "regressed" else cc.verdict
            low, high = signed_pct(c.change_ci[0]), signed_pct(c.change_ci[1])
            parts.append(f"{c.metric} {signed_pct(c.change)} [{low}, {high}] {word}")
    return "<br>".join(_cell(p) for p in parts)


def markdown_summary(results: Iterable[Recorded | Mapping[str, Any]],
                     comparisons: Iterable[CaseComparison] | None = None,
                     against: str = "baseline", plots: Sequence[str | None] | None = None) -> str:
    """The results (and comparisons against ``against``: "baseline" or "A") as a GitHub-flavoured Markdown table
    with notes below it.

    ``plots``: one image link per result (None where it has none), listed under the table.
    """
    typed = [as_case(r) for r in results]
    ccs = list(comparisons) if comparisons is not None else None
    by_key: dict[str, list[CaseComparison]] = {}
    for cc in ccs or []:
        by_key.setdefault(cc.key, []).append(cc)
    load = has_load(typed)
    columns = with_load(COLUMNS) if load else list(COLUMNS)
    header = [*columns, f"vs {against}"] if ccs is not None else columns
    rows: list[list[str]] = []
    shown: set[str] = set()

    def add(cells: list[str], key: str) -> None:
        if ccs is not None:
            cells = [*cells, _cmp_cell(by_key.get(key, []))]
            shown.add(key)
        rows.append(cells)

    for result in typed:
        r = as_row(result)
        nodeid = r.nodeid
        add(_row(shown_case(r), _case(nodeid, f" ({_cell(r.kind)})" if r.kind else ""), load=load), nodeid)
        if isinstance(result, SweepResult):
            for p in result.points:  # a row per context length, as compared (compare/trials.sub_cases)
                point = Row(kind="two_point", nodeid=nodeid, ctx=p.ctx, prompt_tokens=p.prompt_tokens,
                            decode_tps=p.decode_tps)
                add(_row(point, _case(nodeid, f" @ ctx {p.ctx}"), verdict=False, load=load),
                    case_key(nodeid, int(p.ctx)))
        for where, lv in level_rows(r):
            add(_row(lv, _case(nodeid, where), load=True),
                case_key(nodeid, None, lv.concurrency if isinstance(lv.concurrency, int) else None))
        for where, cat in category_rows(r):  # a prompt file's categories: a row each, over their own requests
            add(_row(cat, _case(nodeid, where), load=load), f"{nodeid}{where}")
    for key, group in by_key.items():
        if key not in shown:
            g = group[0]
            label = _case(g.nodeid, _where(g))
            add([label, *["-"] * (len(columns) - 2), ""], key)
    align = ["---", *["---:"] * (len(columns) - 2), "---", *(["---"] if ccs is not None else [])]
    lines = _attention(typed)
    lines += ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    if ccs:
        lines += _notes(ccs, against)
    lines += [line for r in typed if isinstance(r, Result) for line in arms_grid.markdown_lines(r)]
    return "\n".join(lines + _plot_links(typed, plots)) + "\n"


def _attention(results: list[Result | Row]) -> list[str]:
    """Above the table: the cases that errored or failed, errors first, each with its one-line reason."""
    bad = sorted((r for r in results if r.verdict in ATTENTION), key=lambda r: ATTENTION[r.verdict])
    if not bad:
        return []
    return [f"- **{r.verdict}** {_cell(label(r))}: {_cell(r.reason or 'no reason given')}"
            for r in bad] + [""]


def _plot_links(results: list[Result | Row], plots: Sequence[str | None] | None) -> list[str]:
    """The "Plots:" list under the table: one link per result that has a plot."""
    links = [(r, link) for r, link in zip(results, plots or [], strict=False) if link]
    if not links:
        return []
    return ["", "Plots:"] + [f"- [{_case(str(r.nodeid))}]({link.replace(' ', '%20')})"
                             for r, link in links]


def _where(cc: CaseComparison) -> str:
    if cc.users is not None:
        return f" @ {n_users(cc.users)}"
    return "" if cc.ctx is None else f" @ ctx {cc.ctx}"


def _notes(ccs: Sequence[CaseComparison], against: str) -> list[str]:
    counts = Counter(cc.verdict for cc in ccs)
    order = ("regressed", "inconclusive", "improved", "passed", "new", "missing", "skipped")
    who = "the baseline" if against == "baseline" else against
    out = ["", f"Compared with {who}: " + ", ".join(f"{counts[v]} {v}" for v in order if counts[v]) + "."]
    regressed = [cc for cc in ccs if cc.verdict == "regressed"]
    if regressed:
        out += ["", "Regressions:"]
        out += [f"- {_case(cc.nodeid, _where(cc))}: {_cell(cc.reason)}"
                for cc in regressed]
    noisy = [(cc, cc.comparison) for cc in ccs if cc.verdict == "inconclusive" and cc.comparison is not None
             and cc.comparison.mde > cc.comparison.threshold]
    if noisy:
        out += ["", "Too noisy to settle (minimum detectable effect above the threshold):"]
        for cc, c in noisy:
            where = _case(cc.nodeid, _where(cc))
            noise = f"noise {c.noise:.1%} per trial" + (" (assumed)" if c.noise_source == "floor" else "")
            out.append(f"- {where} {c.metric}: {noise}; with {c.n_base} vs {c.n_cand} trials the smallest detectable "
                       f"change is {c.mde:.1%}, above {c.threshold:.0%}; {c.trials_needed} trials per side needed.")
    return out


def links(meta: Meta, relative_to: Path | None) -> list[str | None]:
    """The case images as links from the folder of ``relative_to`` (the Markdown file), one per result."""
    return [None if p is None else os.path.relpath(p, relative_to.parent) if relative_to else str(p)
            for p in meta.images]


def render(results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, relative_to: Path | None) -> str:
    """The Markdown summary of ``results``, linking the case images from ``relative_to``'s folder."""
    return markdown_summary(results, meta.comparisons, against=meta.against, plots=links(meta, relative_to))


class MarkdownSummary(Output):
    """``--specperf-markdown``: the summary table in a file."""

    name = "markdown"
    option = "--specperf-markdown"
    setting = "markdown"

    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Write the summary (atomically)."""
        write_text_atomic(path, render(results, meta, path))


class StepSummary(Output):
    """The same summary appended to ``$GITHUB_STEP_SUMMARY``, only when ``--specperf-markdown`` asked for one."""

    name = "step_summary"
    option = f"${STEP_SUMMARY}"
    setting = "markdown"

    def path(self, settings: Any) -> Path | None:
        """The step summary file, when it is set and a Markdown summary was asked for."""
        summary = os.environ.get(STEP_SUMMARY)
        return Path(summary) if summary and settings.markdown else None

    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Append the summary under a ``## specperf`` heading (links as from the Markdown file)."""
        text = render(results, meta, meta.paths.get(MarkdownSummary.name))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("## specperf\n\n" + text)
