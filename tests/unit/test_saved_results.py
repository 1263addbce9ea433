"""Result records and their JSON: a saved run loads into typed records and writes back the JSON it was read from.

``saved_runs/`` holds runs saved by the plugin on the simulator: every case kind, A/B, N arms and a run compared
against a baseline (this version), a replay (``replay.json``), and a run saved by an earlier version
(``old_eee6c17.json``: before closed-loop refill, bursts and cached shares existed).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import Acceptance, CaseComparison, CategoryFigures, RateRequest, Stall
from pytest_specperf.cases.results import (
    CapacityResult,
    LoadLevel,
    LoadSweepResult,
    Probe,
    RateResult,
    SessionResult,
    StreamResult,
    SustainedResult,
)
from pytest_specperf.cases.saved_results import RESULT_TYPES, as_result, load_result
from pytest_specperf.errors import ConfigError

RUNS = Path(__file__).parent / "saved_runs"
CURRENT = ["every_kind.json", "ab.json", "arms.json", "against_baseline.json", "example_run.json", "replay.json"]


def results_of(name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads((RUNS / name).read_text())["results"]
    return out


def same(a: Any, b: Any) -> bool:
    """Equal, with the same JSON types all the way down (1 and 1.0 differ in a file)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def holds(back: Any, old: Any) -> bool:
    """``back`` has every key and value ``old`` has, at every depth (it may have more keys)."""
    if isinstance(old, dict):
        return isinstance(back, dict) and all(k in back and holds(back[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(back, list) and len(back) == len(old) and all(map(holds, back, old))
    return same(back, old)


@pytest.mark.parametrize("name", CURRENT)
def test_a_saved_run_writes_back_exactly_what_it_was_read_from(name: str) -> None:
    for data in results_of(name):
        assert same(to_dict(load_result(data)), data), data["nodeid"]


def test_the_saved_runs_cover_every_kind_and_the_parts_of_each() -> None:
    kinds = {r["kind"] for name in CURRENT for r in results_of(name)}
    assert kinds == set(RESULT_TYPES)
    keys = {k for name in CURRENT for r in results_of(name) for k in r}
    assert {"comparisons", "ab", "arms", "categories_users", "call"} <= keys


def test_parts_load_as_records_not_dicts() -> None:
    by_kind: dict[str, Any] = {}
    for name in CURRENT:
        for data in results_of(name):
            by_kind.setdefault((data["kind"], bool(data.get("categories"))), load_result(data))
    rate = by_kind["rate", False]
    assert isinstance(rate, RateResult) and isinstance(rate.per_request[0], RateRequest)
    sweep = by_kind["load_sweep", True]
    assert isinstance(sweep, LoadSweepResult) and isinstance(sweep.levels[0], LoadLevel)
    assert isinstance(sweep.levels[0].streams[0], StreamResult)
    assert sweep.categories and all(isinstance(f, CategoryFigures) for f in sweep.categories.values())
    capacity = by_kind["capacity", False]
    assert isinstance(capacity, CapacityResult) and isinstance(capacity.probes[0], Probe)
    sustained = next(load_result(r) for r in results_of("against_baseline.json") if r["kind"] == "sustained")
    assert isinstance(sustained, SustainedResult) and isinstance(sustained.acceptance, Acceptance)
    assert sustained.comparisons and isinstance(sustained.comparisons[0], CaseComparison)
    assert to_dict(sustained.comparisons[0])["key"] == sustained.comparisons[0].key
    assert isinstance(by_kind["session", False], SessionResult)


def test_a_run_saved_by_an_earlier_version_loads_with_every_value_it_had() -> None:
    for data in results_of("old_eee6c17.json"):
        back = to_dict(load_result(data))
        assert holds(back, data), data["nodeid"]
        # keys added since take their defaults
        assert back["prefix_cache"] == "cold" and back["cached_share"] is None


def test_a_stall_is_a_record_and_an_empty_optional_is_left_out() -> None:
    s = StreamResult(prompt_tokens=10, completion_tokens=5, ttft_s=0.1, total_s=1.0, decode_tps=5.0, client_tps=5.0,
                     window_tokens=None, window_tps=[], early_tps=None, late_tps=None, drift=None, trend_p=None,
                     stalls=[Stall(at_token=3, gap_s=0.4)], tokens_per_chunk=1.0, count_source="usage",
                     counts_exact=True)
    d = to_dict(s)
    assert d["stalls"] == [{"at_token": 3, "gap_s": 0.4}]
    assert "trial" not in d  # only A/B and arms streams carry a trial number
    assert to_dict(dataclasses.replace(s, trial=2))["trial"] == 2


def test_as_result_takes_a_record_as_it_is_and_loads_json() -> None:
    data = next(r for r in results_of("every_kind.json") if r["kind"] == "rate")
    record = load_result(data)
    assert as_result(record) is record
    loaded = as_result(data)
    assert isinstance(loaded, RateResult) and isinstance(loaded.per_request[0], RateRequest)


def test_fields_set_after_measuring_are_written_last_as_they_always_were() -> None:
    data = next(r for r in results_of("against_baseline.json") if r.get("comparisons"))
    assert list(data)[-1] == "comparisons"
    assert list(to_dict(load_result(data))) == list(data)


@pytest.mark.parametrize(("data", "says"), [
    ({"kind": "burst", "nodeid": "t"}, "kind 'burst' cannot be read"),
    ({"kind": "sustained"}, "the saved run is damaged"),
    ({**results_of("every_kind.json")[0], "per_request": "oops"}, "the saved run is damaged"),
])
def test_an_unreadable_result_is_one_line_naming_the_fix(data: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        load_result(data)
    assert "\n" not in str(info.value)
