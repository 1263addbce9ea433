"""A module fixture's costly run, done once per test session however xdist splits its tests.

Under ``--dist worksteal`` an idle worker takes the tail of another's queue, so a module's tests can land on two
workers and a module-scoped fixture runs on both: the HTML report's seed run is a minute of wall time. Every worker
of one session shares the parent of its base temp folder; the first to ask builds the folder under a lock, the
others wait for it and read what it left there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def shared_folder(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``build`` filled, built by the first worker of this session to ask for ``name``."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # popen-gwN's parent: the session's
    folder, done = root / f"once-{name}", root / f"once-{name}.done"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if build raises
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker whose build failed left part of one
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
