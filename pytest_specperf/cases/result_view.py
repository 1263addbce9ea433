"""The result a perf case gets back: ``specperf.result`` and every direct call (``specperf.sustained(...)``) alike."""

from __future__ import annotations

from typing import Any

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.results import Result


class ResultView:
    """A case's result as recorded (the ``--specperf-json`` fields): ``r.decode_tps`` or ``r["decode_tps"]``.

    Marker cases and direct calls return this one type, so a test reads its figures the same way either way.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @classmethod
    def of(cls, result: Result) -> ResultView:
        """The view of a typed result: its JSON fields, as ``--specperf-json`` writes them."""
        return cls(to_dict(result))

    def __getattr__(self, name: str) -> Any:
        __tracebackhide__ = True  # a misspelt field is the test's mistake: show its line, not this one
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"no result field {name!r}; fields: {', '.join(self._data)}") from None

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def as_dict(self) -> dict[str, Any]:
        """The plain result dict."""
        return dict(self._data)

    def __repr__(self) -> str:
        return f"Result({self._data.get('kind')}, decode_tps={self._data.get('decode_tps')})"
