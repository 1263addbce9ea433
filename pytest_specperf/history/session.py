"""A run's link to its history: opened on first use, judged per case, written once at the end.

Never imports pytest. A database that cannot be used (unreachable, locked, corrupt, newer) costs the run its
history gate and its history record, never its measurements: the first ``HistoryError`` is kept as ``error``
(one line), every later call is a no-op, and the caller shows that line once; the table, the JSON and the saved
run are written as ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_specperf.cases.results import Recorded, Result
from pytest_specperf.history import against_history
from pytest_specperf.storage import records
from pytest_specperf.storage.schema import open_store
from pytest_specperf.storage.store import HistoryError, Store, Target


def target_of(text: str) -> Target:
    """A settings value (an absolute path or a URL) as a Target."""
    return Target(url=text) if "://" in text else Target(path=Path(text))


class HistorySession:
    """The history of one run (one process); ``gating`` False only records (``--specperf-save`` alone)."""

    def __init__(self, target: Target, *, gating: bool = True, timeout: float | None = None) -> None:
        self.target = target
        self.gating = gating
        self.timeout = timeout
        self.error: str | None = None
        self._store: Store | None = None

    def _open(self) -> Store | None:
        if self.error is not None:
            return None
        if self._store is None:
            try:
                store = Store(self.target) if self.timeout is None else Store(self.target, timeout=self.timeout)
            except HistoryError as exc:
                self.error = str(exc)
                return None
            try:
                self._store = open_store(store)
            except HistoryError as exc:
                store.close()
                self.error = str(exc)
                return None
        return self._store

    def judge(self, result: Result, *, max_regression: float, inconclusive: str = "warn") -> list[str]:
        """Judge one case against its history (``against_history.judge``): sets its ``history`` (and, where the
        history is short, its ``comparisons``), fails it on a regression; [] if not gating or the store failed."""
        if not self.gating:
            return []
        store = self._open()
        if store is None:
            return []
        try:
            return against_history.judge(store, result, {}, max_regression=max_regression, inconclusive=inconclusive)
        except HistoryError as exc:
            self.error = str(exc)
            return []

    def record(self, results: Sequence[Recorded], meta: dict[str, Any]) -> int | None:
        """Add the run; raises HistoryError (the one line to show) when the history cannot take it."""
        store = self._open()
        if store is None:
            raise HistoryError(self.error or f"history {self.target.shown()} is unusable")
        return records.record_run(store, results, meta, gated=self.gating)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
