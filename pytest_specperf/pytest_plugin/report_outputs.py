"""``--specperf-html`` and ``--specperf-plots``: drawn once, after the last case, by the controller.

A pytest plugin object of its own, fed by the same reports as the table (results ride on
``user_properties``), so it works alike with and without xdist. The reporter calls ``write_plots`` and
``write_html`` at the end of the session, after the JSON and the saved run are on disk, and turns any
exception into one warning naming the output: a report that cannot be drawn never takes the run with it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.errors import shorten
from pytest_specperf.settings import Settings

PROP = "specperf"  # the user_properties key carrying a result dict (set by the plugin)


def results_of(report: pytest.TestReport) -> list[dict[str, Any]]:
    """The result dicts a report carries."""
    return [v for k, v in report.user_properties if k == PROP and isinstance(v, dict)]


class DrawError(Exception):
    """Some cases of an output could not be drawn; the message names them and why."""


def problem(exc: BaseException, path: Path | str) -> str:
    """One line saying why an output could not be written: the OS's reason, or the exception and its message."""
    if isinstance(exc, DrawError):
        return f"failed ({exc})"
    if isinstance(exc, OSError):
        return f"could not write {path} ({exc.strerror or exc})"
    return f"failed ({type(exc).__name__}: {shorten(str(exc), 200)})"


class ReportFiles:
    """Collects results from reports; writes the plots and the HTML report when asked, after measuring."""

    def __init__(self, config: pytest.Config, settings: Settings, baseline: list[dict[str, Any]] | None) -> None:
        self.config = config
        self.settings = settings
        self.baseline = baseline
        self.results: list[dict[str, Any]] = []
        self.images: list[Path | None] = []
        self.written: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results += results_of(report)

    def links(self, relative_to: Path | None) -> list[str | None]:
        """The images as links from the folder of ``relative_to`` (a Markdown file), one per result."""
        return [None if p is None else os.path.relpath(p, relative_to.parent) if relative_to else str(p)
                for p in self.images]

    def image_of(self, result: dict[str, Any]) -> Path | None:
        """The PNG written for ``result`` (the same dict object) by ``write_plots``, if any."""
        for r, path in zip(self.results, self.images, strict=False):
            if r is result:
                return path
        return None

    def write_plots(self) -> None:
        """``--specperf-plots``: one PNG per case with charts (raises what drawing or writing raised)."""
        s = self.settings
        if not self.results or s.plots is None:
            return
        from pytest_specperf.report import plots  # matplotlib is loaded only by runs that draw

        self.images = plots.write_case_images(self.results, s.plots, baseline=self.baseline)
        self.written.append(f"plots written to {s.plots}")

    def write_html(self) -> None:
        """``--specperf-html``: the self-contained report (raises what drawing or writing raised)."""
        s = self.settings
        if not self.results or s.html is None:
            return
        from pytest_specperf.report import html as html_report

        meta = html_report.run_meta(self.results, self.config.rootpath)
        html_report.write(s.html, self.results, meta, self.baseline, redact=[s.api_key or ""])
        self.written.append(f"HTML report written to {s.html}")

    @pytest.hookimpl(trylast=True)  # after the specperf table
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.written:
            terminalreporter.write_line(line)
