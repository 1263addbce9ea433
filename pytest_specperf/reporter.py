"""The one writer of the table, the JSON file and the summaries (the controller under xdist)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from . import __version__, exports, gating, storage
from .files import write_text_atomic
from .keys import PROP, SETTINGS, SpecperfWarning
from .measuring import storage_folder
from .report import summary, write_json_atomic
from .settings import STEP_SUMMARY


class Reporter:
    """The one writer of the table and the output files (the controller under xdist), fed by reports.

    A write that fails mid-run (disk full, folder removed) is a warning: the run, its table and pytest's
    summary still complete. Paths were checked for writability before anything ran.
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
        try:
            write()
        except OSError as exc:
            self.write_errors.setdefault(option, f"could not write {path} ({exc.strerror or exc})")
            return False
        self.write_errors.pop(option, None)
        return True

    def run_metadata(self) -> dict[str, Any]:
        """What the project's ``pytest_specperf_run_metadata`` hooks say about the deploy (asked once)."""
        if self._run_meta is None:
            self._run_meta = {}
            for part in self.config.hook.pytest_specperf_run_metadata(config=self.config):
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

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write_json()  # also on Ctrl-C: every case finished so far is in the file
        if self.results:
            self._write_summaries(partial_reason(session, exitstatus, self.results))
        for option, problem in self.write_errors.items():
            warnings.warn(SpecperfWarning(f"{option}: {problem}; the results are in the table below"), stacklevel=1)

    def _write_summaries(self, partial: str) -> None:
        s = self.settings
        compared = s.compare is not None or s.ab is not None
        files = self.config.pluginmanager.get_plugin("specperf-files")  # wrote --specperf-plots just before
        if s.markdown:
            md = s.markdown
            text = exports.markdown_summary(self.results, gating.comparisons_of(self.results) if compared else None,
                                            against="A" if s.ab else "baseline",
                                            plots=files.links(md) if files else None)
            self._write("--specperf-markdown", md, lambda: write_text_atomic(md, text))
            summary = os.environ.get(STEP_SUMMARY)
            if summary:  # only with --specperf-markdown: the plugin writes nothing it was not asked for

                def append() -> None:
                    with open(summary, "a", encoding="utf-8") as fh:
                        fh.write("## specperf\n\n" + text)

                self._write(f"${STEP_SUMMARY}", summary, append)
        if s.bencher:
            import json

            bencher = s.bencher
            text = json.dumps(exports.bencher_json(self.results), indent=2)
            self._write("--specperf-bencher", bencher, lambda: write_text_atomic(bencher, text))
        if s.save is not None:
            first = self.results[0]
            meta = {"plugin_version": __version__, "endpoint": first.get("endpoint"), "model": first.get("model"),
                    "server": first.get("server"), "server_version": first.get("server_version"),
                    "partial": partial, "run": self.run_metadata()}
            folder = storage_folder(self.config, s)

            def save() -> None:
                self.saved = storage.save_run(folder, self.results, meta, s.save or None, root=self.config.rootpath,
                                              redact=[s.api_key or ""])

            self._write("--specperf-save", folder, save)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        terminalreporter.section("specperf")
        for line in summary(self.results):
            terminalreporter.write_line(line)
        if self.settings.json_path and "--specperf-json" not in self.write_errors:
            terminalreporter.write_line(f"results written to {self.settings.json_path}")
        if self.saved is not None:
            terminalreporter.write_line(f"run saved as {self.saved}")
        for option, problem in self.write_errors.items():
            terminalreporter.write_line(f"{option}: {problem}", red=True)

def partial_reason(session: pytest.Session, exitstatus: int, results: list[dict[str, Any]]) -> str:
    """Why a run is not a whole baseline ('' when it is): interrupted, stopped early, or cases that errored."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    if session.shouldstop or session.shouldfail:
        return f"stopped early: {session.shouldstop or session.shouldfail}"
    errors = sum(r.get("verdict") == "error" for r in results)
    return f"{errors} case(s) could not be measured" if errors else ""
