"""Live progress of a long case on a terminal: tokens so far and the current rate, after the test's line.

Written through the terminal reporter's public API (``isatty``, ``write_raw``) with capture suspended the
way pytest's own live logging does it, and wiped before pytest reports the case. Quiet when the output
is not a terminal, under xdist workers, and on CI.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest

from pytest_specperf.endpoint.client import Progress

SAVE, RESTORE, CLEAR_TO_EOL = "\x1b7", "\x1b8", "\x1b[K"


class LiveProgress:
    """A pytest plugin object: ``for_case(nodeid)`` gives the runner a progress callback, or None."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.shown = False

    def _reporter(self) -> Any:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not reporter.isatty() or os.environ.get("TERM") == "dumb":
            return None
        return reporter

    def _write(self, reporter: Any, text: str) -> None:
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        # The case is measured while pytest captures output; the live line goes to the real terminal.
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            # Raw: cursor save/restore leaves pytest's own line (and its width bookkeeping) as it was.
            reporter.write_raw(text, flush=True)

    def for_case(self, nodeid: str) -> Progress | None:
        """A callback ``(tokens so far, seconds since the first token)`` drawing the live line."""
        reporter = self._reporter()
        if reporter is None:
            return None
        name = nodeid.split("::")[-1] or nodeid
        last = [0, 0.0]

        def show(tokens: int, seconds: float) -> None:
            dt = seconds - last[1]
            rate = (tokens - last[0]) / dt if dt > 0 else 0.0  # over the last interval: the rate now
            last[:] = [tokens, seconds]
            self._write(reporter, f"{SAVE} [{name}: {tokens} tokens, {rate:.0f} tok/s]{CLEAR_TO_EOL}{RESTORE}")
            self.shown = True

        return show

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Wipe the live text before pytest writes the case's outcome."""
        if self.shown:
            self.shown = False
            reporter = self._reporter()
            if reporter is not None:
                self._write(reporter, f"{SAVE}{CLEAR_TO_EOL}{RESTORE}")


def install(config: pytest.Config, worker: bool) -> Any:
    """Register the live progress (None where it stays quiet: xdist workers, CI)."""
    if worker or os.environ.get("CI"):
        return None
    progress = LiveProgress(config)
    config.pluginmanager.register(progress, "specperf-progress")
    return progress.for_case
