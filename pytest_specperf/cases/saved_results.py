"""JSON back into result records: a saved run's results, or a result that rode to the xdist controller as data.

cattrs builds the records, nested ones included, from their annotations. Keys a record does not have are
dropped, so a run saved by an earlier version with a key since removed still loads; a record kind no version
wrote is refused with a one-line error. Numbers are kept as written (an ``int`` in a float field stays an
``int``), so a loaded result writes back the JSON it was read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs

from pytest_specperf.cases.results import (
    CapacityResult,
    ErrorRecord,
    LoadSweepResult,
    RateResult,
    Recorded,
    ReplayResult,
    Result,
    SessionResult,
    SustainedResult,
    SweepResult,
    TwoPointResult,
)
from pytest_specperf.errors import ConfigError

#: The record of each case kind, by the ``kind`` its JSON carries.
RESULT_TYPES: dict[str, type[Result]] = {
    "sustained": SustainedResult,
    "two_point": TwoPointResult,
    "ctx_sweep": SweepResult,
    "load_sweep": LoadSweepResult,
    "rate": RateResult,
    "capacity": CapacityResult,
    "session": SessionResult,
    "replay": ReplayResult,
}

_converter = cattrs.Converter(forbid_extra_keys=False)
for _t in (int, float, str, bool):  # JSON's own types, kept as they are (an int in a float field writes back as is)
    _converter.register_structure_hook(_t, lambda v, _: v)
# an error record's concurrency: a sustained case's users, or a load sweep's levels, kept as written
_converter.register_structure_hook(int | list[int] | None, lambda v, _: list(v) if isinstance(v, list) else v)


def is_error_record(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is the JSON of an error record (a case that could not be measured: what it asked and why it
    could not run, no figures); ``load_record`` alone asks, where JSON becomes a record."""
    return data.get("verdict") == "error"


def has_record(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is a result this version has a record for: a measured case of a known kind (not an error
    record, not a kind added by a newer version or a plugin)."""
    return not is_error_record(data) and data.get("kind") in RESULT_TYPES


def load_result(data: Mapping[str, Any]) -> Result:
    """The result record ``data`` (one result of a saved run's JSON) was written from."""
    kind = data.get("kind")
    cls = RESULT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ConfigError(f"a result of kind {kind!r} cannot be read: the kinds are {', '.join(RESULT_TYPES)}; "
                          "was the run saved by a newer pytest-specperf? upgrade to read it")
    try:
        return _converter.structure(dict(data), cls)
    except cattrs.BaseValidationError as exc:
        why = "; ".join(str(e) for e in cattrs.transform_error(exc))[:300]
        raise ConfigError(f"a {kind} result cannot be read ({why}); the saved run is damaged: save it again") from None


def load_record(data: Mapping[str, Any]) -> Recorded:
    """One result of a saved run, a history row or an xdist report as its record: the one place where JSON becomes
    a record (an ``ErrorRecord`` for a case that could not be measured, else its kind's, ``load_result``)."""
    if is_error_record(data):
        try:
            return _converter.structure(dict(data), ErrorRecord)
        except cattrs.BaseValidationError as exc:
            why = "; ".join(str(e) for e in cattrs.transform_error(exc))[:300]
            raise ConfigError(f"an error record cannot be read ({why}); the saved run is damaged: save it "
                              "again") from None
    return load_result(data)


R = TypeVar("R")


def load_part(data: Mapping[str, Any], cls: type[R]) -> R:
    """One record inside a result (a comparison, a level), read from its JSON by the same rules as a result."""
    return _converter.structure(dict(data), cls)


def as_result(data: Result | Mapping[str, Any]) -> Result:
    """``data`` as a typed record: a record as it is, JSON (a saved run's result) loaded."""
    return data if isinstance(data, Result) else load_result(data)
