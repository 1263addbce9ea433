"""Records into JSON-able data, at the edge: the one ``to_dict`` every result record and its parts go through.

A record's attribute names are its JSON keys. A field made with ``field(default=None, metadata=OMIT)`` is left
out while it is None (it exists only on some results: an A/B trial number, the comparisons of a compared run),
so adding one does not change the keys of every saved run. A record may add derived keys with ``json_extras()``,
and name in ``JSON_LAST`` the fields written last (a result's fields set after measuring, as they always were).
"""

from __future__ import annotations

import dataclasses
from typing import Any

_OMIT = "omit_if_none"
#: ``field(default=None, metadata=OMIT)``: a field left out of the JSON while it is None.
OMIT: dict[str, bool] = {_OMIT: True}


def to_dict(obj: Any) -> dict[str, Any]:
    """``obj``'s fields as plain data, recursively (records, lists, dicts); None-valued optional fields left out."""
    out = _plain(obj)
    assert isinstance(out, dict), f"{type(obj).__name__} is not a record"
    return out


def _plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if v is None and f.metadata.get(_OMIT):
                continue
            out[f.name] = _plain(v)
        extras = getattr(x, "json_extras", None)
        if extras is not None:
            out.update(extras())
        for name in getattr(x, "JSON_LAST", ()):  # fields set after measuring: last, as they were always written
            if name in out:
                out[name] = out.pop(name)
        return out
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x
