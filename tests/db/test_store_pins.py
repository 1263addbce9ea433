"""The history gate's choices in history/against_history.py and records.py pinned against a real store, on
histories built on purpose (seeded, answers known from how they were built): partial runs left out, alpha split
over a case's metrics and units, the TTFT floor in seconds. Each has its one-line break in tools/breaks/hist.toml."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from test_gate import _meta, _result, _trials, _typed

from pytest_specperf.cases.results import Result
from pytest_specperf.history import against_history
from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target


def test_partial_runs_are_left_out_of_the_history(target: Target) -> None:
    """8 whole runs at 100 tok/s, then 12 interrupted runs 30 % slower: a candidate 30 % slower is judged against the
    whole runs and fails; were the partial runs its history, it would be their ordinary day."""
    rng = np.random.default_rng(41)
    with schema.open_store(Store(target)) as store:
        for i in range(8):
            records.record_run(store, [_result(_trials(rng, 0.0))], _meta(i))
        for i in range(8, 20):
            records.record_run(store, [_result(_trials(rng, math.log(0.7)))], {**_meta(i), "partial": "interrupted"})
        cand = _result(_trials(rng, math.log(0.7)))
        against_history.judge(store, cand, {}, max_regression=0.05)
    assert cand.verdict == "failed" and "against its history of 8 runs" in cand.reason, cand.reason


def _sweep(rng: np.random.Generator, offsets: list[float], nodeid: str) -> Result:
    """A load sweep of 4 levels, 4 users each; each level's decode and ttft have their run offset and trial noise."""
    levels = []
    for j, n in enumerate((1, 2, 4, 8)):
        decode = [float(100 / n * math.exp(offsets[2 * j] + rng.normal(0, 0.02))) for _ in range(4)]
        ttft = [float(2.0 * math.exp(offsets[2 * j + 1] + rng.normal(0, 0.02))) for _ in range(4)]
        levels.append({"concurrency": n, "kind": "sustained", "verdict": "passed", "decode_tps": decode[0],
                       "ttft_s": ttft[0], "streams": [{"decode_tps": d, "ttft_s": t} for d, t in zip(decode, ttft,
                                                                                                      strict=True)]})
    return _typed({"nodeid": nodeid, "kind": "load_sweep", "model": "m", "server": "sim", "verdict": "passed",
                   "ctx": 100, "tokens": 200, "concurrency": [1, 2, 4, 8], "levels": levels})


def test_alpha_is_split_over_the_metrics_and_units_of_a_case(tmp_path: Path) -> None:
    """300 load sweeps of 4 levels x 2 metrics (8 series), each with 6 earlier runs of an identical deploy (5 %
    run-to-run offsets, 2 % per trial): the step check is to fail at most 1 % of such cases (here 1 of 300); with
    alpha not split, each of the 8 series fails up to 1 % of the time and the case several times as often (here 16
    of 300). The creep check needs 10 runs, so it plays no part."""
    rng = np.random.default_rng(42)
    cases, runs = 300, 6
    offsets = rng.normal(0, 0.05, (runs + 1, cases, 8))
    with schema.open_store(Store(Target(path=tmp_path / "h.sqlite"))) as store:
        for i in range(runs):  # one run holds every case: 6 transactions
            records.record_run(store, [_sweep(rng, list(offsets[i, c]), f"t::s{c}") for c in range(cases)], _meta(i))
        failed = 0
        for c in range(cases):
            cand = _sweep(rng, list(offsets[runs, c]), f"t::s{c}")
            against_history.judge(store, cand, {}, max_regression=0.05)
            assert cand.history is not None and len(cand.history) == 8  # every series judged by its history
            failed += cand.verdict == "failed"
    assert failed <= 9, f"{failed} of {cases} identical deploys failed"


def _ttft_result(ttft: float, values: list[float], nodeid: str) -> Result:
    return _typed({"nodeid": nodeid, "kind": "sustained", "model": "m", "server": "sim", "verdict": "passed",
                   "decode_tps": 100.0, "ctx": 100, "tokens": 200,
                   "streams": [{"decode_tps": v, "ttft_s": ttft * math.exp(0.002 * k)} for k, v in enumerate(values)]})


def test_the_ttft_floor_is_ten_milliseconds(target: Target) -> None:
    """TTFT held at 40 ms for 8 runs: 8 ms more (+20 %, within the 10 ms floor) passes with the floor named; held at
    0.5 s, 200 ms more (+40 %) fails."""
    rng = np.random.default_rng(43)
    with schema.open_store(Store(target)) as store:
        for i in range(8):
            records.record_run(store, [_ttft_result(0.040 * math.exp(rng.normal(0, 0.005)), _trials(rng, 0.0), "t::a"),
                                       _ttft_result(0.5 * math.exp(rng.normal(0, 0.005)), _trials(rng, 0.0), "t::b")],
                               _meta(i))
        small = _ttft_result(0.048, _trials(rng, 0.0), "t::a")
        against_history.judge(store, small, {}, max_regression=0.05)
        big = _ttft_result(0.7, _trials(rng, 0.0), "t::b")
        against_history.judge(store, big, {}, max_regression=0.05)
    (entry,) = [e for e in small.history or [] if e.metric == "ttft_s"]
    assert entry.effect < -0.15  # 20 % worse: a regression but for the floor
    assert small.verdict == "passed" and "within the 10 ms noise floor" in entry.reason, entry.reason
    assert big.verdict == "failed" and "t::b ttft_s" in big.reason, big.reason


def _rate_result(ttft_p90: float, nodeid: str) -> Result:
    return _typed({"nodeid": nodeid, "kind": "rate", "model": "m", "server": "sim", "verdict": "passed",
                   "rate": 2.0, "ctx": 100, "tokens": 50, "ttft_p90_s": ttft_p90, "goodput_rps": 2.0,
                   "attainment": 1.0})


def test_the_ttft_floor_holds_for_a_rate_cases_p90(target: Target) -> None:
    """The floor is on every TTFT figure, not only ``ttft_s``: a rate case's TTFT p90 held at 40 ms for 8 runs,
    8 ms more (+20 %, within the 10 ms floor) passes with the floor named; held at 0.5 s, 200 ms more fails."""
    rng = np.random.default_rng(47)
    with schema.open_store(Store(target)) as store:
        for i in range(8):
            records.record_run(store, [_rate_result(0.040 * math.exp(rng.normal(0, 0.005)), "t::a"),
                                       _rate_result(0.5 * math.exp(rng.normal(0, 0.005)), "t::b")], _meta(i))
        small = _rate_result(0.048, "t::a")
        against_history.judge(store, small, {}, max_regression=0.05)
        big = _rate_result(0.7, "t::b")
        against_history.judge(store, big, {}, max_regression=0.05)
    (entry,) = [e for e in small.history or [] if e.metric == "ttft_p90_s"]
    assert entry.effect < -0.15  # 20 % worse: a regression but for the floor
    assert small.verdict == "passed" and "within the 10 ms noise floor" in entry.reason, entry.reason
    assert big.verdict == "failed" and "t::b ttft_p90_s" in big.reason, big.reason
