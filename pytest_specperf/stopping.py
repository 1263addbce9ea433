"""A run asked to stop (Ctrl-C, SIGTERM), for the waits the core cannot leave by an exception.

The pytest layer's signal handling sets it (``pytest_plugin/interrupts.py``). Most of a run stops by the
``KeyboardInterrupt`` the signal raises; a few waits cannot take one: the history's wait for another writer's
lock while the run is being kept (where a first signal is noted, not raised, so no write is cut in half), and
threads building prompts beside the main thread. Those check this flag and give up. One flag per process, as
signals are.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_requested = threading.Event()


class Stopped(Exception):
    """A thread's work given up: its caller stopped waiting for it (Ctrl-C, or another call's error)."""


def request() -> None:
    """The run was asked to stop."""
    _requested.set()


def clear() -> None:
    """A new run in this process starts unasked (the pytest layer clears it when its run ends)."""
    _requested.clear()


def requested() -> bool:
    """Whether the run was asked to stop."""
    return _requested.is_set()


def thread_map(fn: Callable[[T], R], items: Iterable[T], workers: int, *, stop: threading.Event | None = None
               ) -> list[R]:
    """``fn`` over ``items`` in ``workers`` threads, results in order; the first error (by order) raised.

    When the caller is interrupted (Ctrl-C) or a call fails, the pool is cancelled, not awaited: calls not
    started never start, ``stop`` is set so running calls can give up at their next ``unless_stopped`` step,
    and the caller goes on at once (a plain ``with ThreadPoolExecutor`` would first wait for every running call
    to finish its whole work).
    """
    stop = stop if stop is not None else threading.Event()
    pool = ThreadPoolExecutor(max(1, workers))
    try:
        return list(pool.map(fn, items))
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=not stop.is_set(), cancel_futures=True)


def unless_stopped(fn: Callable[[T], R], stop: threading.Event) -> Callable[[T], R]:
    """``fn`` that raises Stopped instead of running once ``stop`` is set (or the run was asked to stop): the
    step at which a thread's long work gives up."""

    def call(arg: T) -> R:
        if stop.is_set() or _requested.is_set():
            raise Stopped("stopped: the caller no longer waits for this work")
        return fn(arg)

    return call
