"""pytest-html extras: each perf case's row in a pytest-html report carries its key figures and its plot.

Active only when pytest-html is installed and ``--html`` is given. Works on the reports themselves
(``pytest_runtest_logreport``, before pytest-html reads them), so it also works under xdist, where the
controller receives the results as plain data.

The figures (a table, cheap) are added as each case ends; its image is drawn after the last case, never
between cases: a row gets a placeholder image, and ``draw_images`` (called by the reporter once the run is
saved) puts the case's PNG in its place, reusing the ``--specperf-plots`` file when there is one. This
relies on pytest-html 4 keeping the extra dicts it was given (it rewrites their ``content`` in place) and
writing its report in its own ``pytest_sessionfinish``, after ours.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from pytest_specperf.errors import shorten
from pytest_specperf.pytest_plugin.keys import Recorded, carried
from pytest_specperf.report.output import DrawError

#: a 1x1 transparent PNG, replaced by the case's image after the last case
PLACEHOLDER = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg=="


def wanted(config: pytest.Config) -> bool:
    """pytest-html is active for this run."""
    return config.pluginmanager.hasplugin("html") and bool(config.getoption("htmlpath", None))


def _facts_html(result: dict[str, Any], facts: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    verdict = escape(result.get("verdict", ""))
    reason = f"<p>{escape(result['reason'])}</p>" if result.get("reason") and result.get("verdict") != "passed" else ""
    return (f'<div class="specperf"><b>specperf {escape(result.get("kind", ""))}: {verdict}</b>{reason}'
            f"<table>{rows}</table></div>")


def _note_html(result: dict[str, Any], exc: BaseException) -> str:
    return (f'<div class="specperf"><b>specperf {escape(result.get("kind", ""))}: '
            f'{escape(result.get("verdict", ""))}</b><p>the figures could not be drawn ({type(exc).__name__}: '
            f"{escape(shorten(str(exc), 200))}); the JSON file has the results</p></div>")


class HtmlExtras:
    """Adds ``extras`` to reports carrying specperf results; draws their images after the last case."""

    def __init__(self, config: pytest.Config, baseline: Sequence[Recorded] | None = None) -> None:
        self.config = config
        self.baseline = baseline
        self.pending: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (image extra, its result)
        self.problems: list[str] = []  # cases whose figures could not be drawn
        html = str(config.getoption("htmlpath", None) or "report.html")
        # Where pytest-html puts its assets (it resolves the path the same way, at configure time).
        self.report_dir = (Path.cwd() / Path(os.path.expandvars(html)).expanduser()).parent

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Before pytest-html renders the row: one HTML block of figures and one (placeholder) PNG per result."""
        results = carried(report)  # the plain data views read; the writer finds its image by this object
        if not results:
            return
        from pytest_html import extras

        from pytest_specperf.report.views.registry import view

        added = []
        for r in results:
            try:
                v = view(r, self.baseline)
            except Exception as exc:  # one case's figures never take the row, or the run, with them
                added.append(extras.html(_note_html(r, exc)))
                self.problems.append(f"{r.get('nodeid')}: {type(exc).__name__}: {shorten(str(exc), 200)}")
                continue
            added.append(extras.html(_facts_html(r, v.facts)))
            if v.charts:
                image = extras.png(PLACEHOLDER, name=f"specperf {r.get('kind')}")
                self.pending.append((image, r))
                added.append(image)
        report.extras = [*getattr(report, "extras", []), *added]  # type: ignore[attr-defined]

    def draw_images(self, files: Any = None) -> None:
        """Put each case's PNG in place of its placeholder; raise, naming the cases, if any could not be drawn.

        ``files`` is the report writer: a case ``--specperf-plots`` drew is read back, not drawn again.
        """
        from pytest_specperf.report import drawing, plots
        from pytest_specperf.report.views.registry import view

        for image, r in self.pending:
            try:
                path = files.image_of(r) if files is not None else None
                png = path.read_bytes() if path is not None else drawing.case_image(
                    view(r, self.baseline), title=plots.case_title(r))
                self._replace(image, base64.b64encode(png).decode("ascii"), png)
            except Exception as exc:
                self.problems.append(f"{r.get('nodeid')}: {type(exc).__name__}: {shorten(str(exc), 200)}")
        self.pending = []
        if self.problems:
            raise DrawError("; ".join(self.problems))

    def _replace(self, image: dict[str, Any], b64: str, png: bytes) -> None:
        content = str(image.get("content", ""))
        if content.startswith("data:"):  # a self-contained report: the image is inline
            image["content"] = f"data:image/png;base64,{b64}"
        elif content == PLACEHOLDER:  # pytest-html has not processed this row yet
            image["content"] = b64
        else:  # pytest-html wrote the placeholder as an asset file: overwrite it
            (self.report_dir / content).write_bytes(png)

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        """A direct call that could not measure is an error in pytest-html too, as in the terminal (ERROR)."""
        if report.when != "call" or not getattr(report, "specperf_error", False) or not cells:
            return
        cells[0] = '<td class="col-result">Error</td>'
        # pytest-html counts the outcome it computed itself (Failed) right after this hook: move that count.
        for plugin in self.config.pluginmanager.get_plugins():
            outcomes = getattr(getattr(plugin, "_report", None), "_outcomes", None)
            if isinstance(outcomes, dict) and "failed" in outcomes and "error" in outcomes:
                outcomes["failed"]["value"] -= 1
                outcomes["error"]["value"] += 1
