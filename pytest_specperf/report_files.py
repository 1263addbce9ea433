"""``--specperf-html`` and ``--specperf-plots``: written once, at the end of the session, by the controller.

A pytest plugin object of its own, fed by the same reports as the table (results ride on
``user_properties``), so it works alike with and without xdist. A file it cannot write is one line in
the terminal summary, never a traceback, and the other outputs are still written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .settings import Settings

PROP = "specperf"  # the user_properties key carrying a result dict (set by the plugin)


def results_of(report: pytest.TestReport) -> list[dict[str, Any]]:
    """The result dicts a report carries."""
    return [v for k, v in report.user_properties if k == PROP and isinstance(v, dict)]


class ReportFiles:
    """Collects results from reports; writes the plots and the HTML report when the session finishes."""

    def __init__(self, config: pytest.Config, settings: Settings, baseline: list[dict[str, Any]] | None) -> None:
        self.config = config
        self.settings = settings
        self.baseline = baseline
        self.results: list[dict[str, Any]] = []
        self.images: list[Path | None] = []
        self.errors: list[str] = []
        self.written: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results += results_of(report)

    def links(self, relative_to: Path | None) -> list[str | None]:
        """The images as links from the folder of ``relative_to`` (a Markdown file), one per result."""
        return [None if p is None else os.path.relpath(p, relative_to.parent) if relative_to else str(p)
                for p in self.images]

    @pytest.hookimpl(tryfirst=True)  # before the Markdown summary, which links the images
    def pytest_sessionfinish(self) -> None:
        s = self.settings
        if not self.results or not (s.plots or s.html):
            return
        from . import html_report, plots  # matplotlib is loaded only by runs that draw

        if s.plots:
            try:
                self.images = plots.write_case_images(self.results, s.plots, baseline=self.baseline)
                self.written.append(f"plots written to {s.plots}")
            except OSError as exc:
                self.errors.append(f"--specperf-plots: could not write into {s.plots} ({exc.strerror or exc})")
        if s.html:
            meta = html_report.run_meta(self.results, self.config.rootpath)
            try:
                html_report.write(s.html, self.results, meta, self.baseline, redact=[s.api_key or ""])
                self.written.append(f"HTML report written to {s.html}")
            except OSError as exc:
                self.errors.append(f"--specperf-html: could not write {s.html} ({exc.strerror or exc})")

    @pytest.hookimpl(trylast=True)  # after the specperf table
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.written:
            terminalreporter.write_line(line)
        for line in self.errors:
            terminalreporter.write_line(line, red=True)
