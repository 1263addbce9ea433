"""Plausible ranges of every floor and ceiling keyword, so a value given in the wrong unit is a usage error.

``max_ttft_s=2000`` (meant as milliseconds) would otherwise pass every run in silence, and ``max_drift=15``
(meant as a percentage) would be refused without saying why. Each keyword has a unit and a range no real
deploy is outside of; a value outside it is a one-line ``ConfigError`` that says what the value means in
that unit and how to write the intended one. Checked for every kind when a spec is built
(``registry.build_spec``), ahead of the kinds' own checks, which still refuse what is not a number at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_specperf.cases.base import CaseSpec, check, is_number


@dataclass(frozen=True)
class Unit:
    """A keyword's unit: its name, an example of writing it, and the plausible range [lo, hi]."""

    name: str
    example: str
    lo: float
    hi: float


SECONDS = "seconds"
_TTFT = Unit(SECONDS, "2 s = 2, 200 ms = 0.2", 0.0001, 600.0)  # 0.1 ms (under an HTTP round trip) .. 10 minutes
_E2E = Unit(SECONDS, "30 s = 30, 800 ms = 0.8", 0.0001, 1200.0)  # a whole request: up to 20 minutes
_TPOT = Unit("milliseconds", "50 ms = 50, 0.05 s = 50", 0.01, 10_000.0)  # 10 µs (100,000 tok/s) .. 10 s per token
_USER_TPS = Unit("tokens per second", "40 tok/s = 40", 0.1, 100_000.0)  # one user's stream
_TOTAL_TPS = Unit("tokens per second", "4000 tok/s = 4000", 0.1, 10_000_000.0)  # all users together
_RPS = Unit("requests per second", "2 req/s = 2, one a minute = 0.0167", 0.001, 100_000.0)
_STEP = Unit("tokens per step", "2.5 tokens/step = 2.5", 0.0, 64.0)  # below 1: the kind says ">= 1"
_RATIO = Unit("times A's speed", "10% faster = 1.1", 0.1, 10.0)
FRACTION = "a fraction"

#: Every floor and ceiling keyword of every case kind, and its unit.
KEYWORD_UNITS: dict[str, Unit | str] = {
    "max_ttft_s": _TTFT, "max_ttft_content_s": _TTFT, "max_ttft_p90_s": _TTFT, "max_ttft_p99_s": _TTFT,
    "min_tps": _USER_TPS, "min_decode_tps": _USER_TPS, "min_total_tps": _TOTAL_TPS,
    "min_goodput": _RPS, "min_rps": _RPS,
    "min_accept_len": _STEP, "min_speedup": _RATIO,
    "max_drift": FRACTION, "max_burst_gap": FRACTION, "max_accept_drop": FRACTION, "max_regression": FRACTION,
    "max_loss_vs_best": FRACTION, "min_attainment": FRACTION, "min_cache_hit": FRACTION, "target": FRACTION,
}
#: The bounds of an SLO (``slo={...}``), by name.
SLO_UNITS: dict[str, Unit] = {"ttft_s": _TTFT, "ttft_content_s": _TTFT, "e2e_s": _E2E, "tpot_ms": _TPOT}


def duration(seconds: float) -> str:
    """A duration in the words a person would use: '33 minutes', '2.5 hours', '0.2 ms', '50 µs'."""
    if seconds >= 7200:
        return f"{seconds / 3600:.3g} hours"
    if seconds >= 120:
        return f"{seconds / 60:.3g} minutes"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 0.001:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def meaning(value: float, unit: Unit) -> str:
    """What ``value`` in ``unit`` amounts to, said so that a wrong unit shows."""
    if unit.name == SECONDS:
        return duration(value)
    if unit.name == "milliseconds":
        return f"{duration(value / 1000)} per output token"
    if unit is _USER_TPS:
        return (f"one token every {duration(1 / value)}" if value < unit.lo
                else f"{value:g} tokens/s for one user, faster than any server decodes")
    if unit is _TOTAL_TPS:
        return f"one token every {duration(1 / value)}" if value < unit.lo else f"{value:g} tokens/s in all"
    if unit is _RPS:
        return f"one request every {duration(1 / value)}" if value < unit.lo else f"{value:g} requests each second"
    if unit is _STEP:
        return f"{value:g} tokens accepted per step, more than any draft proposes"
    return f"{value:g} times as fast" if value > unit.hi else f"{1 / value:g} times slower"


def check_value(kind: str, name: str, value: Any, unit: Unit | str, short: str | None = None) -> None:
    """One keyword's value against its unit's range (a value that is not a number is left to the kind's checks);
    ``short``: the bound's own name where ``name`` says where it sits ('slo e2e_s')."""
    short = short or name
    if not is_number(value) or value <= 0 or value != value:
        return
    if unit == FRACTION:
        # 2..100 reads as a percentage; anything else above 1 gets the kind's "a fraction in (0, 1)"
        check(not 2 <= value <= 100, kind,
              f"{name}={value:g} reads as a percentage: {short} is a fraction ({value:g}% = {value / 100:g})")
        return
    assert isinstance(unit, Unit)
    check(unit.lo <= value <= unit.hi, kind,
          f"{name}={value:g} is {meaning(value, unit)}: {short} is in {unit.name} ({unit.example})")


def check_units(spec: CaseSpec) -> None:
    """Every floor and ceiling of ``spec`` within its unit's plausible range; a one-line ConfigError if not."""
    kind = spec.KIND
    for name, unit in KEYWORD_UNITS.items():
        value = getattr(spec, name, None)
        values = value.values() if isinstance(value, Mapping) else [value]  # per category or per level
        for v in values:
            check_value(kind, name, v, unit)
    slo = getattr(spec, "slo", None)
    if isinstance(slo, Mapping):
        for key, v in slo.items():
            if key in SLO_UNITS:
                check_value(kind, f"slo {key}", v, SLO_UNITS[key], key)
