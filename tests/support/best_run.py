"""Timing tests that judge the better of a few runs: a busy host only adds to a run's figure, by a different amount
each run, while a defect of the code's own is in every run, the best one included."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(one: Callable[[int], T], ok: Callable[[T], bool], tries: int) -> list[T]:
    """``one(i)`` for i = 0, 1, ... up to ``tries`` times, stopping at the first result ``ok`` accepts; every result,
    in order (the last is the one to judge)."""
    results: list[T] = []
    for i in range(tries):
        results.append(one(i))
        if ok(results[-1]):
            break
    return results
