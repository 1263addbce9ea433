"""A result's JSON from the few fields a report test is about: every field a result record requires and the test
does not give is filled with an empty value of its type (0, "", [], None), so ``saved_results.load_result`` reads
it. The report's outputs read results as records; a test's dict of five keys is not one until completed."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from pytest_specperf.cases.saved_results import RESULT_TYPES

_EMPTY: dict[Any, Any] = {int: 0, float: 0.0, str: "", bool: False}


def full(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (one result's JSON, some keys only) with every required field of its kind's record filled."""
    return _fill(RESULT_TYPES[data["kind"]], data)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # resolving the annotations is most of a result's cost (the seeded simulations build thousands)
    return typing.get_type_hints(cls)


def _fill(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    hints = _hints(cls)
    out = dict(data)
    for f in dataclasses.fields(cls):
        if f.name in out:
            out[f.name] = _inside(hints[f.name], out[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            out[f.name] = _empty(hints[f.name])
    return out


def _record(tp: Any) -> type | None:
    """The record class in ``tp`` (``X``, ``X | None``), if any."""
    for t in typing.get_args(tp) if isinstance(tp, types.UnionType) else (tp,):
        if dataclasses.is_dataclass(t) and isinstance(t, type):
            return t
    return None


def _inside(tp: Any, value: Any) -> Any:
    """Records nested in ``value`` (a record, a list or a dict of them) filled too."""
    if isinstance(tp, types.UnionType):
        tp = next((t for t in typing.get_args(tp) if t is not type(None)), tp)
    rec = _record(tp)
    if rec is not None and isinstance(value, dict):
        return _fill(rec, value)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args and isinstance(value, list):
        return [_inside(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {k: _inside(args[1], v) for k, v in value.items()}
    return value


def _empty(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) and type(None) in typing.get_args(tp):
        return None
    if typing.get_origin(tp) is list:
        return []
    if typing.get_origin(tp) is dict:
        return {}
    rec = _record(tp)
    if rec is not None:
        return _fill(rec, {})
    return _EMPTY.get(tp)
