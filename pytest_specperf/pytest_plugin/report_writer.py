"""The one writer of the run's outputs and the terminal table (the controller under xdist).

Fed by the reports (results ride on ``user_properties``), so it works alike with and without xdist. It writes
the JSON after every case; after the last case it saves the run, then every output in ``report.registry``
that was asked for, in that order, then pytest-html's images. Each output is guarded on its own: one that
fails (a disk full, a folder removed, a chart matplotlib refuses) is one warning naming its option, and the
table, the other outputs and pytest's summary still complete. Paths were checked before anything ran.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import gates as gating
from pytest_specperf.pytest_plugin import interrupts
from pytest_specperf.pytest_plugin.keys import (
    HISTORY,
    SETTINGS,
    Recorded,
    SpecperfWarning,
    carried,
    is_error,
)
from pytest_specperf.pytest_plugin.recording import storage_folder
from pytest_specperf.report.output import Meta, Output, problem
from pytest_specperf.report.registry import OUTPUTS
from pytest_specperf.report.table import WIDTH, summary
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage.store import HistoryError
from pytest_specperf.urls import redact_text, redact_url

#: what a warning about one output adds: nothing else was lost with it
COMPLETE = "the table and the other outputs are complete"


class _OneLine(Exception):
    """A failure whose message is already the whole line to show (a HistoryError names its target)."""


class ReportWriter:
    """Collects the results from the reports; writes every output asked for, each failure a warning naming it."""

    def __init__(self, config: pytest.Config, baseline: list[Recorded] | None = None) -> None:
        self.config = config
        self.settings = config.stash[SETTINGS]
        self.baseline = baseline
        self.results: list[Recorded] = []  # typed, loaded once from the data the reports carry: what outputs read
        # that data, object for object: pytest-html's rows hold these objects, and find their images by them
        self.carried: list[dict[str, Any]] = []
        self.saved: Path | None = None
        self.outputs: list[Output] = [cls() for cls in OUTPUTS.values()]
        self.meta = Meta(baseline=baseline, redact=[self.settings.api_key or ""],
                         root=config.rootpath)
        self._run_meta: dict[str, Any] | None = None
        self.written: dict[str, Path] = {}  # output name -> path, once written
        self.write_errors: dict[str, str] = {}  # option -> what went wrong (first failure only)
        self.history_run: int | None = None  # the run's id in its history, once recorded

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = carried(report)
        if data:
            self.carried += data
            self.results += [load_record(d) for d in data]
            self.write_live()  # after every case, so a killed run keeps what it measured

    def _write(self, option: str, path: Path | str, write: Callable[[], Any]) -> bool:
        # Any failure of one output (a full disk, a chart matplotlib refuses) is that output's warning only.
        try:
            write()
        except _OneLine as exc:
            self.write_errors.setdefault(option, str(exc))
            return False
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

    def _meta(self) -> Meta:
        m = self.meta
        m.endpoint = _endpoint(self.results[0]) if self.results else self.settings.endpoint
        m.endpoint = redact_url(m.endpoint) if m.endpoint else m.endpoint  # a result's is already; the option's not
        m.run = self.run_metadata()
        m.paths = {o.name: p for o in self.outputs if (p := o.path(self.settings)) is not None}
        return m

    def _run(self, output: Output) -> None:
        path = output.path(self.settings)
        if path is None:
            return
        self._meta()  # the project's metadata hooks are asked once, and only by a run that writes something
        if self._write(output.option, path, lambda: output.write(self.results, self.meta, path)):
            self.written[output.name] = path

    def write_live(self) -> None:
        """Write the outputs kept current after every case (the JSON)."""
        for output in self.outputs:
            if output.live:
                self._run(output)

    @pytest.hookimpl(tryfirst=True)  # the run is on disk before any other plugin finishes the session
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write_live()  # also on Ctrl-C: every case finished so far is in the file
        if self.results:
            # The run is kept first, then the drawings (slow, the likeliest to fail), in the registry's order;
            # pytest-html's images last.
            # A signal since the last case (noted, not raised: interrupts.py) makes the run partial as well.
            partial = "interrupted" if interrupts.requested(self.config) else partial_reason(session, exitstatus,
                                                                                              self.results)
            self._save(partial)
            self._record_history(partial)
            s = self.settings
            if s.compare is not None or s.ab is not None:
                self.meta.comparisons = gating.comparisons_of(self.results)
                self.meta.against = "A" if s.ab else "baseline"
            for output in self.outputs:
                if not output.live and not self._skip_interrupted(output.option, output.path(self.settings)):
                    self._run(output)
            extras = self.config.pluginmanager.get_plugin("specperf-html")
            if extras is not None and not self._skip_interrupted("--html (specperf figures)", extras):
                self._write("--html (specperf figures)", self.config.getoption("htmlpath", None) or "--html",
                            lambda: extras.draw_images(self))
        for option, why in self.write_errors.items():
            warnings.warn(SpecperfWarning(f"{option}: {why}; {COMPLETE}"), stacklevel=1)

    def _skip_interrupted(self, option: str, path: object) -> bool:
        """After Ctrl-C or SIGTERM the outputs not yet drawn are skipped, each named once (the run is kept)."""
        if path is None or not interrupts.requested(self.config):
            return False
        self.write_errors.setdefault(option, "not written: the run was interrupted")
        return True

    def image_of(self, result: dict[str, Any]) -> Path | None:
        """The image ``--specperf-plots`` wrote for ``result`` (the same carried dict object), if any."""
        for r, path in zip(self.carried, self.meta.images, strict=False):
            if r is result:
                return path
        return None

    def _save(self, partial: str) -> None:
        s = self.settings
        if s.save is None:
            return
        meta = {**storage.run_meta(self.results), "partial": partial, "run": self.run_metadata()}
        folder = storage_folder(self.config, s)

        def save() -> None:
            self.saved = storage.save_run(folder, self.results, meta, s.save or None, root=self.config.rootpath,
                                          redact=[s.api_key or ""])

        self._write("--specperf-save", folder, save)

    def _record_history(self, partial: str) -> None:
        """Add the run to its history (--specperf-history, or the default one with --specperf-save)."""
        history = self.config.stash.get(HISTORY, None)
        if history is None:
            return
        meta = {**storage.run_meta(self.results, root=self.config.rootpath), "partial": partial,
                "name": self.settings.save or "", "job": storage.job_info()}
        option = "--specperf-history" if self.settings.history is not None else "--specperf-save (history)"

        def record() -> None:
            try:
                self.history_run = history.record(self.results, meta)
            except HistoryError as exc:
                raise _OneLine(redact_text(str(exc))) from None

        self._write(option, redact_url(history.target.shown()), record)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        terminalreporter.section("specperf")
        try:
            lines = summary(self.results, WIDTH)
        except Exception as exc:  # the files above are written; say so rather than lose pytest's summary
            lines = [f"the specperf table could not be drawn ({type(exc).__name__}: {exc}); the results are in "
                     "the JSON file and the saved run"]
        for line in lines:
            terminalreporter.write_line(line)
        for live in (True, False):  # the JSON, the saved run, then the drawn outputs
            for output in self.outputs:
                if output.live is live and output.done and output.name in self.written \
                        and output.option not in self.write_errors:
                    terminalreporter.write_line(output.done.format(path=self.written[output.name]))
            if live and self.saved is not None:
                terminalreporter.write_line(f"run saved as {self.saved}")
            if live and self.history_run is not None:
                history = self.config.stash[HISTORY]
                terminalreporter.write_line(f"run recorded as run {self.history_run} in history "
                                            f"{redact_url(history.target.shown())}")
        for option, why in self.write_errors.items():
            terminalreporter.write_line(f"{option}: {redact_text(why)}", red=True)


def _endpoint(result: Recorded) -> str | None:
    return result.endpoint if isinstance(result, Result) else None  # an error record measured at none


def partial_reason(session: pytest.Session, exitstatus: int, results: list[Recorded]) -> str:
    """Why a run is not a whole baseline ('' when it is): interrupted, stopped early, or cases that errored."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    if session.shouldstop or session.shouldfail:
        return f"stopped early: {session.shouldstop or session.shouldfail}"
    errors = sum(is_error(r) for r in results)
    return f"{errors} case(s) could not be measured" if errors else ""
