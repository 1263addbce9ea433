"""The one writer of the table, the JSON file and the summaries (the controller under xdist)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.compare import gates as gating
from pytest_specperf.compare import storage
from pytest_specperf.files import write_text_atomic
from pytest_specperf.pytest_plugin.keys import PROP, SETTINGS, SpecperfWarning
from pytest_specperf.pytest_plugin.recording import storage_folder
from pytest_specperf.pytest_plugin.report_outputs import problem
from pytest_specperf.report import exports
from pytest_specperf.report.table import summary, write_json_atomic
from pytest_specperf.settings import STEP_SUMMARY
from pytest_specperf.version import __version__

#: what a warning about one output adds: nothing else was lost with it
COMPLETE = "the table and the other outputs are complete"


class Reporter:
    """The one writer of the table and the output files (the controller under xdist), fed by reports.

    Any output that fails (a disk full, a folder removed, a chart that cannot be drawn) is a warning naming
    it: the run, its table, the other outputs and pytest's summary still complete. Paths were checked for
    writability before anything ran.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[SETTINGS]
        self.results: list[dict[str, Any]] = []
        self.saved: Path | None = None
        self._run_meta: dict[str, Any] | None = None
        self.write_errors: dict[str, str] = {}  # option -> what went wrong (first failure only)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROP and isinstance(value, dict):
                self.results.append(value)
                self.write_json()  # after every case, so a killed run keeps what it measured

    def _write(self, option: str, path: Path | str, write: Any) -> bool:
        # Any failure of one output (a full disk, a chart matplotlib refuses) is that output's warning only.
        try:
            write()
        except Exception as exc:
            self.write_errors.setdefault(option, problem(exc, path))
            return False
        self.write_errors.pop(option, None)
        return True

    def run_metadata(self) -> dict[str, Any]:
        """What the project's ``pytest_specperf_run_metadata`` hooks say about the deploy (asked once)."""
        if self._run_meta is None:
            self._run_meta = {}
            try:
                parts = self.config.hook.pytest_specperf_run_metadata(config=self.config)
            except Exception as exc:  # a project's hook that fails costs its metadata, never the files
                self.write_errors.setdefault("pytest_specperf_run_metadata", problem(exc, "-"))
                parts = []
            for part in parts:
                if isinstance(part, dict):
                    self._run_meta.update(part)
        return self._run_meta

    def write_json(self) -> None:
        """Write all results so far (atomically) if --specperf-json was given."""
        path = self.settings.json_path
        if path is None:
            return
        meta = {"endpoint": self.results[0].get("endpoint") if self.results else self.settings.endpoint,
                "run": self.run_metadata()}
        self._write("--specperf-json", path, lambda: write_json_atomic(path, self.results, meta,
                                                                       redact=[self.settings.api_key or ""]))

    @pytest.hookimpl(tryfirst=True)  # the run is on disk before any other plugin finishes the session
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write_json()  # also on Ctrl-C: every case finished so far is in the file
        if self.results:
            # The run is kept first, then the drawings (slow, the likeliest to fail): plots before the
            # Markdown that links them, the HTML report and pytest-html's images last.
            self._save(partial_reason(session, exitstatus, self.results))
            files = self.config.pluginmanager.get_plugin("specperf-files")
            if files is not None and self.settings.plots is not None:
                self._write("--specperf-plots", self.settings.plots, files.write_plots)
            self._write_summaries(files)
            if files is not None and self.settings.html is not None:
                self._write("--specperf-html", self.settings.html, files.write_html)
            extras = self.config.pluginmanager.get_plugin("specperf-html")
            if extras is not None:
                self._write("--html (specperf figures)", self.config.getoption("htmlpath", None) or "--html",
                            lambda: extras.draw_images(files))
        for option, why in self.write_errors.items():
            warnings.warn(SpecperfWarning(f"{option}: {why}; {COMPLETE}"), stacklevel=1)

    def _save(self, partial: str) -> None:
        s = self.settings
        if s.save is None:
            return
        first = self.results[0]
        meta = {"plugin_version": __version__, "endpoint": first.get("endpoint"), "model": first.get("model"),
                "server": first.get("server"), "server_version": first.get("server_version"),
                "partial": partial, "run": self.run_metadata()}
        folder = storage_folder(self.config, s)

        def save() -> None:
            self.saved = storage.save_run(folder, self.results, meta, s.save or None, root=self.config.rootpath,
                                          redact=[s.api_key or ""])

        self._write("--specperf-save", folder, save)

    def _write_summaries(self, files: Any) -> None:
        s = self.settings
        compared = s.compare is not None or s.ab is not None
        if s.markdown:
            md = s.markdown
            text: list[str] = []

            def markdown() -> None:
                text.append(exports.markdown_summary(
                    self.results, gating.comparisons_of(self.results) if compared else None,
                    against="A" if s.ab else "baseline", plots=files.links(md) if files else None))
                write_text_atomic(md, text[0])

            self._write("--specperf-markdown", md, markdown)
            summary = os.environ.get(STEP_SUMMARY)
            if summary and text:  # only with --specperf-markdown: the plugin writes nothing it was not asked for

                def append() -> None:
                    with open(summary, "a", encoding="utf-8") as fh:
                        fh.write("## specperf\n\n" + text[0])

                self._write(f"${STEP_SUMMARY}", summary, append)
        if s.bencher:
            import json

            bencher = s.bencher
            self._write("--specperf-bencher", bencher,
                        lambda: write_text_atomic(bencher, json.dumps(exports.bencher_json(self.results), indent=2)))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        terminalreporter.section("specperf")
        try:
            lines = summary(self.results)
        except Exception as exc:  # the files above are written; say so rather than lose pytest's summary
            lines = [f"the specperf table could not be drawn ({type(exc).__name__}: {exc}); the results are in "
                     "the JSON file and the saved run"]
        for line in lines:
            terminalreporter.write_line(line)
        if self.settings.json_path and "--specperf-json" not in self.write_errors:
            terminalreporter.write_line(f"results written to {self.settings.json_path}")
        if self.saved is not None:
            terminalreporter.write_line(f"run saved as {self.saved}")
        for option, why in self.write_errors.items():
            terminalreporter.write_line(f"{option}: {why}", red=True)

def partial_reason(session: pytest.Session, exitstatus: int, results: list[dict[str, Any]]) -> str:
    """Why a run is not a whole baseline ('' when it is): interrupted, stopped early, or cases that errored."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    if session.shouldstop or session.shouldfail:
        return f"stopped early: {session.shouldstop or session.shouldfail}"
    errors = sum(r.get("verdict") == "error" for r in results)
    return f"{errors} case(s) could not be measured" if errors else ""
