"""A client that stalls once, inside its event loop, as it sends one of its requests: the defect the lateness tests
put under test (a client busy with itself), made on the test's clock with ``time.sleep``, not a wait.

The stall sits where a request's headers are written (``SentClock``, called just before the write), since that is
where an open-loop request meets its time: its body, connection and everything else are ready before it
(``endpoint/concurrent.py``). A stall at the ``at_call``-th write holds that request and every later one.
"""

from __future__ import annotations

import time
from typing import Any

from pytest_specperf.endpoint import client as client_module

_ORIGINAL = client_module.SentClock.__call__


def stall_once(seconds: float, at_call: int = 1) -> dict[str, float]:
    """Stall ``seconds`` at the ``at_call``-th request's write from now on; returns where the stall ended (the test's
    own ``time.perf_counter``) once it has. ``restore`` undoes it."""
    seen: dict[str, float] = {}
    calls: list[int] = []

    def slow(self: client_module.SentClock, name: str, info: dict[str, Any]) -> None:
        if self.at is None and name.endswith(client_module.HEADERS_SENT):
            calls.append(1)
            if len(calls) == at_call:
                time.sleep(seconds)
                seen["end"] = time.perf_counter()
        _ORIGINAL(self, name, info)

    client_module.SentClock.__call__ = slow  # type: ignore[method-assign]
    return seen


def restore() -> None:
    """Every request written when it is due again."""
    client_module.SentClock.__call__ = _ORIGINAL  # type: ignore[method-assign]
