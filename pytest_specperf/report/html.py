"""The self-contained HTML report (``--specperf-html``, ``specperf report``): Jinja2 over the views and their drawings.

Everything is inline (SVG charts, CSS, a few lines of script, the results as JSON), so the file opens
offline and asks no network address for anything. Never imports pytest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.cases.results import Recorded, Result
from pytest_specperf.files import write_text_atomic
from pytest_specperf.report import table as report
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.report.views import base as figures
from pytest_specperf.report.views.registry import view
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.version import __version__

#: summary order: what needs attention first
VERDICT_ORDER = {"error": 0, "failed": 1, "regressed": 2, "inconclusive": 3, "passed": 4}


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("pytest_specperf", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)


def _short(nodeid: str) -> str:
    return nodeid.rsplit("/", 1)[-1] or nodeid


def metadata(results: Sequence[Result | report.Row | Mapping[str, Any]], meta: dict[str, Any]) -> list[tuple[str, str]]:
    """The header rows: endpoint, model, server kind and version, commit, machine, plugin version, time."""
    typed = [report.as_case(r) for r in results]
    first = typed[0] if typed else None
    # ``meta`` is the run's metadata (a saved run's header, or this run's): not result data, read by its keys
    commit = meta.get("commit") or {}  # not result data
    machine = meta.get("machine") or {}  # not result data
    commit_text = "-"
    if commit:
        dirty = " (dirty)" if commit.get("dirty") else ""  # not result data
        commit_text = f"{str(commit.get('id', '-'))[:12]}{dirty}"  # not result data
        if commit.get("branch"):  # not result data
            commit_text += f" on {commit['branch']}"
    machine_text = "-"
    if machine:
        system, arch = machine.get("system", "?"), machine.get("machine", "")  # not result data
        cpus = machine.get("cpu_count", "?")  # not result data
        python, host = machine.get("python_version", "?"), machine.get("host_id", "?")  # not result data
        machine_text = f"{system} {arch}, {cpus} CPUs, Python {python}, host {host}"
    server = meta.get("server") or (first.server if first else None) or "-"  # not result data
    version = meta.get("server_version") or next(  # not result data
        (r.server_version for r in typed if r.server_version), None)
    endpoint = str(meta.get("endpoint") or (first.endpoint if first else None) or "-")  # not result data
    ab = next((r.ab for r in typed if r.ab is not None), None)
    if ab:  # an A/B run measured two endpoints: name both
        endpoint = f"A {ab.a_endpoint} (baseline), B {ab.b_endpoint} (candidate)"
    arms = next((r.arms for r in typed if r.arms is not None and r.arms.endpoints), None)
    if arms and arms.endpoints and not ab:  # an arms run measured one endpoint per arm: name each
        endpoint = ", ".join(f"{n} {u}" + (" (baseline)" if n == arms.baseline else "")
                             for n, u in arms.endpoints.items())
    return [
        ("endpoint", endpoint),
        ("model", str(meta.get("model") or (first.model if first else None) or "-")),  # not result data
        ("server", f"{server} {version}" if version else str(server)),
        ("commit", commit_text),
        ("machine", machine_text),
        ("pytest-specperf", str(meta.get("plugin_version") or __version__)),  # not result data
        ("time", str(meta.get("created") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))),  # not result data
    ]


#: which level of a sweep the summary names per metric: the one that needs attention first
_LEVEL_ORDER = {"regressed": 0, "inconclusive": 1, "improved": 2, "passed": 3}


def _change(cc: CaseComparison) -> float | None:
    return None if cc.comparison is None else cc.comparison.change


def _cmp_summary(result: Result | report.Row | Mapping[str, Any]) -> str:
    r = report.as_case(result)
    parts = []
    records = list(r.comparisons or [])
    # a session's users are its sessions at once, not a sweep's levels
    levels = [cc for cc in records if cc.users is not None and cc.comparison and r.kind != "session"]
    for cc in records:
        c = cc.comparison
        if cc in levels:
            continue  # a sweep's levels: one entry per metric below
        if c:
            parts.append(f"{c.metric} {figures.signed_pct(c.change)} {cc.verdict}")
        else:
            parts.append(str(cc.verdict))
    for metric in dict.fromkeys(str(cc.metric) for cc in levels):
        mine = [cc for cc in levels if str(cc.metric) == metric]
        worst = min(mine, key=lambda cc: _LEVEL_ORDER.get(str(cc.verdict), 4))
        verdict = worst.verdict
        alike = [cc for cc in mine if cc.verdict == verdict]
        if len(alike) == len(mine) > 1:  # the same at every level: say so, with the range of the changes
            found = [report.finite_number(_change(cc)) for cc in alike]
            changes = sorted(x for x in found if x is not None)
            span = (f"{figures.signed_pct(changes[0])} to {figures.signed_pct(changes[-1])}" if len(changes) > 1
                    else figures.signed_pct(changes[0]) if changes else "-")
            parts.append(f"{metric} {verdict} at every level ({span}; {report.plural(len(mine), 'level')})")
            continue
        where = figures.users_text(", ".join(str(cc.users) for cc in alike)) if len(alike) > 1 else \
            figures.users_text(worst.users)
        parts.append(f"{metric} {verdict} at {where} (worst {figures.signed_pct(_change(worst))}; "
                     f"{report.plural(len(alike), 'level')} of {len(mine)})" if len(alike) > 1 else
                     f"{metric} {verdict} at {where} ({figures.signed_pct(_change(worst))}; "
                     f"{report.plural(len(mine), 'level')} compared)")
    return "; ".join(parts)


def goal_facts(row: report.Row) -> list[tuple[str, str]]:
    """The floors and ceilings a case was judged against, each with the figure it read and its margin."""
    return [("judged against", ", ".join(report.goal_text(g) for g in row.goals))] if row.goals else []


def context(results: Sequence[Recorded | Mapping[str, Any]], meta: dict[str, Any] | None = None,
            baseline: Sequence[Recorded | Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What the template needs: header rows, summary rows (failures first), one section per case."""
    from pytest_specperf.report import drawing  # matplotlib is loaded only by runs that draw

    meta = meta or {}
    typed = [report.as_case(r) for r in results]
    data_of = [_json_of(r) for r in results]  # embedded in the page; the views read it too, for now (issue 36)
    base = None if baseline is None else [_json_of(b) for b in baseline]
    cases: list[dict[str, Any]] = []
    for i, (r, data) in enumerate(zip(typed, data_of, strict=True)):
        v = view(data, base)
        row = report.as_row(r)
        charts = [{"id": c.id, "title": c.title, "data": c.data(),
                   **dict(zip(("svg", "note"), drawing.svg_or_note(c, salt=f"c{i}-{c.id}"), strict=True))}
                  for c in v.charts]
        verdict = str(r.verdict or "-")
        cases.append({"anchor": f"case-{i + 1}", "index": i, "nodeid": str(r.nodeid),
                      "short": _short(str(r.nodeid)), "kind": str(r.kind or "-"),
                      "verdict": verdict, "reason": str(r.reason or ""), "facts": [*v.facts, *goal_facts(row)],
                      "charts": charts, "tables": v.tables,
                      # each once: an A/B case gathers the same note from every trial, a session from every turn
                      "warnings": report.once([*(r.warnings or []), *report.notes(row)]),
                      "decode": figures.fmt(row.decode_tps), "drift": figures.fmt(row.drift, ".2f"),
                      "headline": report.headline(row),
                      "compared": _cmp_summary(r)})
    summary = sorted(cases, key=lambda c: (VERDICT_ORDER.get(c["verdict"], 5), c["index"]))
    counts: dict[str, int] = {}
    for c in summary:  # in the summary's order: what needs attention first
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    data = {"results": data_of, "charts": {c["anchor"]: [ch["data"] for ch in c["charts"]] for c in cases}}
    return {"meta": metadata(typed, meta), "cases": cases, "summary": summary, "counts": counts,
            "counts_text": ", ".join(report.count_text(n, v) for v, n in counts.items()),
            "data": _json_safe(data)}


def _json_of(result: Recorded | Mapping[str, Any]) -> dict[str, Any]:
    """A result's JSON: a record's ``to_dict``, a result given as JSON (a saved run's) as it is."""
    return dict(result) if isinstance(result, Mapping) else to_dict(result)


def _json_safe(obj: Any) -> Any:
    # NaN and infinities are not JSON: the embedded data must parse in a browser (JSON.parse).
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    return obj


def render(results: Sequence[Recorded | Mapping[str, Any]], meta: dict[str, Any] | None = None,
           baseline: Sequence[Recorded | Mapping[str, Any]] | None = None) -> str:
    """The report as one HTML document."""
    return _env().get_template("report.html.j2").render(**context(results, meta, baseline))


def write(path: Path | str, results: Sequence[Recorded | Mapping[str, Any]], meta: dict[str, Any] | None = None,
          baseline: Sequence[Recorded | Mapping[str, Any]] | None = None, redact: list[str] | None = None) -> Path:
    """Write the report atomically (a reader never sees half of it); API keys in ``redact`` become ``***``."""
    text = render(results, meta, baseline)
    for secret in redact or []:
        if secret:
            text = text.replace(secret, "***")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
    return path


class HtmlReport(Output):
    """``--specperf-html`` (and ``specperf report``): the self-contained HTML report."""

    name = "html"
    option = "--specperf-html"
    setting = "html"
    done = "HTML report written to {path}"

    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Write the report; its header is ``meta.about``, or this run's commit and machine when that is None."""
        about = meta.about if meta.about is not None else storage.run_meta(  # the plugin's records (the CLI gives
            [r for r in results if not isinstance(r, Mapping)], root=meta.root or Path.cwd())  # its ``about``)
        write(path, results, about, meta.baseline, redact=list(meta.redact))
