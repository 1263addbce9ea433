"""Tests that run alone: while one marked ``@pytest.mark.solo`` runs, no other test of the suite runs on another
xdist worker (it waits at its start, and the solo test waits for the tests already running to end).

For a test whose bound is a machine's timing (how late a request reaches the server against its schedule): beside
two other workers each driving a simulator on a two-core machine, the client waits for a CPU for tens of ms at a
time, which says nothing about the send path. A readers-writer lock on two files of the run's own (``flock``):
every test holds the main one shared; a solo test first takes the gate, so no test starts after it asked, then the
main one exclusively. Without xdist every test runs alone already and nothing is locked.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def _paths(config: pytest.Config) -> tuple[str, str] | None:
    worker = getattr(config, "workerinput", None)
    if worker is None:
        return None
    base = os.path.join(tempfile.gettempdir(), f"specperf-solo-{worker['testrunuid']}")
    return f"{base}.gate", f"{base}.lock"


def _open(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


@contextmanager
def held(config: pytest.Config, solo: bool) -> Iterator[None]:
    """Around one test: alone if ``solo``, else beside any others but never beside a solo one."""
    paths = _paths(config)
    if paths is None:
        yield
        return
    gate, main = _open(paths[0]), _open(paths[1])
    try:
        fcntl.flock(gate, fcntl.LOCK_EX if solo else fcntl.LOCK_SH)
        fcntl.flock(main, fcntl.LOCK_EX if solo else fcntl.LOCK_SH)
        if not solo:
            fcntl.flock(gate, fcntl.LOCK_UN)  # the gate only orders the starts
        yield
    finally:
        os.close(main)  # closing releases the locks
        os.close(gate)
