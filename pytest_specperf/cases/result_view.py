"""Attribute access to a result dict (``specperf.result.decode_tps``); no pytest needed."""

from __future__ import annotations

from typing import Any


class ResultView:
    """Attribute access to a result dict (``specperf.result.decode_tps``), whatever produced it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        __tracebackhide__ = True  # a misspelt field is the test's mistake: show its line, not this one
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"no result field {name!r}; fields: {', '.join(self._data)}") from None

    def as_dict(self) -> dict[str, Any]:
        """The plain result dict."""
        return dict(self._data)

    def __repr__(self) -> str:
        return f"Result({self._data.get('kind')}, decode_tps={self._data.get('decode_tps')})"
