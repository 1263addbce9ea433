"""Every floor and ceiling keyword has a unit and a plausible range: a value in the wrong unit is a one-line error."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_specperf.cases.open_loop import SLO_KEYS
from pytest_specperf.cases.registry import SPECS, build_spec
from pytest_specperf.cases.units import KEYWORD_UNITS, SLO_UNITS
from pytest_specperf.errors import ConfigError


def _error(kind: str, kwargs: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as exc:
        build_spec(kind, kwargs)
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(("kind", "kwargs", "needle"), [
    ("sustained", {"max_ttft_s": 2000}, "max_ttft_s=2000 is 33.3 minutes: max_ttft_s is in seconds (2 s = 2, 200 ms"),
    ("sustained", {"max_ttft_content_s": 0.00002}, "is 20 µs: max_ttft_content_s is in seconds"),
    ("sustained", {"concurrency": 8, "max_ttft_p90_s": 2000}, "max_ttft_p90_s is in seconds"),
    ("sustained", {"concurrency": 8, "max_ttft_p99_s": 900}, "is 15 minutes: max_ttft_p99_s is in seconds"),
    ("session", {"max_ttft_s": 1500}, "max_ttft_s is in seconds"),
    ("session", {"max_ttft_p99_s": 1500}, "max_ttft_p99_s is in seconds"),
    ("load_sweep", {"max_ttft_p90_s": 2000}, "max_ttft_p90_s=2000 is 33.3 minutes: max_ttft_p90_s is in seconds"),
    ("load_sweep", {"max_ttft_s": {1: 2, 8: 900}}, "max_ttft_s=900 is 15 minutes"),
    ("sustained", {"min_tps": 0.05}, "min_tps=0.05 is one token every 20 s: min_tps is in tokens per second"),
    ("sustained", {"concurrency": 4, "min_total_tps": 0.01}, "min_total_tps is in tokens per second"),
    ("load_sweep", {"min_tps": {1: 40, 2: 0.02}}, "min_tps=0.02 is one token every 50 s"),
    ("sustained", {"max_drift": 15}, "max_drift=15 reads as a percentage: max_drift is a fraction (15% = 0.15)"),
    ("sustained", {"max_accept_drop": 20}, "max_accept_drop is a fraction (20% = 0.2)"),
    ("sustained", {"max_regression": 5}, "max_regression is a fraction (5% = 0.05)"),
    ("rate", {"slo": {"ttft_s": 2}, "min_attainment": 95}, "min_attainment is a fraction (95% = 0.95)"),
    ("session", {"turns": 3, "min_cache_hit": 80}, "min_cache_hit is a fraction"),
    ("capacity", {"slo": {"ttft_s": 2}, "target": 99}, "target is a fraction (99% = 0.99)"),
    ("rate", {"slo": {"ttft_s": 2000}}, "slo ttft_s=2000 is 33.3 minutes: ttft_s is in seconds"),
    ("rate", {"slo": {"e2e_s": 3000}}, "e2e_s is in seconds"),
    ("rate", {"slo": {"tpot_ms": 0.005}}, "slo tpot_ms=0.005 is 5 µs per output token: tpot_ms is in milliseconds"),
    ("rate", {"slo": {"tpot_ms": 50_000}}, "tpot_ms is in milliseconds"),
    ("rate", {"slo": {"ttft_s": 2}, "min_goodput": 0.0001}, "min_goodput is in requests per second"),
    ("capacity", {"slo": {"ttft_s": 2}, "min_rps": 1e6}, "min_rps is in requests per second"),
    ("sustained", {"min_accept_len": 300}, "min_accept_len is in tokens per step"),
    ("load_sweep", {"min_speedup": 110}, "min_speedup is in times A's speed"),
])
def test_a_value_in_the_wrong_unit_names_the_unit(kind: str, kwargs: dict[str, object], needle: str) -> None:
    assert needle in _error(kind, kwargs)


@pytest.mark.parametrize(("kind", "kwargs"), [
    ("sustained", {"max_ttft_s": 2, "max_ttft_content_s": 0.2, "min_tps": 40, "max_drift": 0.15}),
    ("sustained", {"concurrency": 8, "max_ttft_p90_s": 2, "max_ttft_p99_s": 5, "min_total_tps": 4000}),
    ("rate", {"slo": {"ttft_s": 0.5, "tpot_ms": 50, "e2e_s": 30}, "min_attainment": 0.95, "min_goodput": 2}),
    ("capacity", {"slo": {"tpot_ms": 0.5}, "min_rps": 0.02}),
    ("session", {"turns": 3, "max_ttft_s": 600, "min_cache_hit": 1}),
    ("session", {"turns": 3, "max_ttft_p90_s": 2, "max_ttft_p99_s": 5}),
    ("load_sweep", {"max_ttft_s": 2, "max_ttft_p90_s": {8: 4}, "max_ttft_p99_s": 10}),
])
def test_plausible_values_pass(kind: str, kwargs: dict[str, object]) -> None:
    build_spec(kind, kwargs)


def test_every_floor_and_ceiling_keyword_has_a_unit() -> None:
    """A new min_*/max_* keyword of any kind must say its unit (or be a count, a policy or an A/B/arms choice)."""
    not_bounds = {"max_repeat", "min_requests"}  # counts of trials and requests, checked by their kinds
    names = {f.name for spec in SPECS.values() for f in dataclasses.fields(spec)
             if f.name.startswith(("min_", "max_")) and f.name not in not_bounds}
    assert names - set(KEYWORD_UNITS) == set()
    assert set(SLO_UNITS) == set(SLO_KEYS)


def test_a_ttft_tail_ceiling_needs_a_load_case() -> None:
    text = _error("sustained", {"max_ttft_p90_s": 2})
    assert "concurrency=N" in text and "max_ttft_s" in text
    build_spec("sustained", {"concurrency": 4, "max_ttft_p90_s": 2})
    build_spec("sustained", {"requests": 8, "max_ttft_p99_s": 2})


def test_a_load_sweeps_ttft_ceiling_is_a_number_of_seconds_or_one_per_level() -> None:
    assert "max_ttft_p90_s names level 16, which is not in concurrency [1, 2, 4, 8]" in _error(
        "load_sweep", {"max_ttft_p90_s": {16: 2}})
    assert "max_ttft_s must be a positive number of seconds or a mapping {level: seconds}" in _error(
        "load_sweep", {"max_ttft_s": "2s"})
    spec = build_spec("load_sweep", {"concurrency": [1, 8], "max_ttft_s": 2, "max_ttft_p99_s": {8: 5}})
    # each level is judged as sustained(concurrency=N) with that level's ceilings
    assert [(lv.max_ttft_s, lv.max_ttft_p90_s, lv.max_ttft_p99_s) for lv in map(spec.level, (1, 8))] == [
        (2, None, None), (2, None, 5)]


def test_a_session_takes_one_of_its_two_names_for_the_p90_turn_ceiling() -> None:
    text = _error("session", {"max_ttft_s": 2, "max_ttft_p90_s": 2})
    assert "both bound a session's p90 turn TTFT; give one (max_ttft_p90_s)" in text
