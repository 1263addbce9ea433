"""A run asked to stop (Ctrl-C, SIGTERM), for the waits the core cannot leave by an exception.

The pytest layer's signal handling sets it (``pytest_plugin/interrupts.py``). Most of a run stops by the
``KeyboardInterrupt`` the signal raises; a few waits cannot take one: the history's wait for another writer's
lock while the run is being kept (where a first signal is noted, not raised, so no write is cut in half), and
threads building prompts beside the main thread. Those check this flag and give up. One flag per process, as
signals are.
"""

from __future__ import annotations

import threading

_requested = threading.Event()


def request() -> None:
    """The run was asked to stop."""
    _requested.set()


def clear() -> None:
    """A new run in this process starts unasked (the pytest layer clears it when its run ends)."""
    _requested.clear()


def requested() -> bool:
    """Whether the run was asked to stop."""
    return _requested.is_set()
