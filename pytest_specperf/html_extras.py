"""pytest-html extras: each perf case's row in a pytest-html report carries its key figures and its plot.

Active only when pytest-html is installed and ``--html`` is given. Works on the reports themselves
(``pytest_runtest_logreport``, before pytest-html reads them), so it also works under xdist, where the
controller receives the results as plain data.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from markupsafe import escape

from .report_files import results_of


def wanted(config: pytest.Config) -> bool:
    """pytest-html is active for this run."""
    return config.pluginmanager.hasplugin("html") and bool(config.getoption("htmlpath", None))


def _facts_html(result: dict[str, Any], facts: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    verdict = escape(result.get("verdict", ""))
    reason = f"<p>{escape(result['reason'])}</p>" if result.get("reason") and result.get("verdict") != "passed" else ""
    return (f'<div class="specperf"><b>specperf {escape(result.get("kind", ""))}: {verdict}</b>{reason}'
            f"<table>{rows}</table></div>")


class HtmlExtras:
    """Adds ``extras`` to reports carrying specperf results."""

    def __init__(self, baseline: list[dict[str, Any]] | None = None) -> None:
        self.baseline = baseline

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Before pytest-html renders the row: one HTML block of figures and one PNG per result."""
        results = results_of(report)
        if not results:
            return
        from pytest_html import extras

        from . import figures, plots

        added = []
        for r in results:
            v = figures.view(r, self.baseline)
            added.append(extras.html(_facts_html(r, v.facts)))
            if v.charts:
                png = plots.case_image(v, "png", salt=str(r.get("nodeid", "")))
                added.append(extras.png(base64.b64encode(png).decode("ascii"), name=f"specperf {r.get('kind')}"))
        report.extras = [*getattr(report, "extras", []), *added]  # type: ignore[attr-defined]
