"""The history gate against a real store: the run where a change began, set-ups kept apart, short histories."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.history import against_history
from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target

#: a stream's fields the gate does not read
STREAM = {"prompt_tokens": None, "completion_tokens": 200, "total_s": 1.0, "client_tps": 0.0, "window_tokens": None,
          "window_tps": [], "early_tps": None, "late_tps": None, "drift": None, "trend_p": None, "stalls": [],
          "tokens_per_chunk": 1.0, "count_source": "usage", "counts_exact": True}


def _typed(data: dict[str, Any]) -> Result:
    """The result record of a small result written as data (what the gate does not read filled in)."""
    def streams(x: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**STREAM, **s} for s in x.get("streams", [])]
    levels = {"levels": [{**lv, "streams": streams(lv)} for lv in data["levels"]]} if "levels" in data else {}
    return load_result({"endpoint": "", "prompt_tokens": None, **data, "streams": streams(data), **levels})


def _result(values: list[float], model: str = "m") -> Result:
    return _typed({"nodeid": "t::a", "kind": "sustained", "model": model, "server": "sim", "verdict": "passed",
                   "decode_tps": float(np.median(values)), "ctx": 100, "tokens": 200,
                   "streams": [{"decode_tps": v, "ttft_s": 0.5} for v in values]})


def _meta(i: int, model: str = "m") -> dict:
    return {"created": f"2026-01-{i + 1:02d}T00:00:00Z", "model": model, "server": "sim", "commit": {"id": f"c{i:02d}"}}


def _trials(rng: np.random.Generator, level: float) -> list[float]:
    return [float(100 * math.exp(level + rng.normal(0, 0.01))) for _ in range(5)]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return schema.open_store(Store(Target(path=tmp_path / "history.sqlite")))


def test_a_creep_fails_naming_the_run_where_it_began(store: Store) -> None:
    rng = np.random.default_rng(3)
    levels = [0.0] * 12 + [math.log(0.97) * k for k in range(1, 6)]  # 3 % slower per run from run 13
    for i, lv in enumerate(levels):
        records.record_run(store, [_result(_trials(rng, lv))], _meta(i))
    cand = _result(_trials(rng, math.log(0.97) * 6))
    against_history.judge(store, cand, {}, max_regression=0.05)
    assert cand.history is not None
    (entry,) = [e for e in cand.history if e.metric == "decode_tps"]
    assert cand.verdict == "failed" and entry.verdict == "regressed"
    began = entry.began
    assert began is not None and began.level_before is not None and began.level_now is not None
    # the change began within the creep, at a recorded run, and the reason names its commit and both levels
    assert began.commit in {f"c{i:02d}" for i in range(12, 17)}
    assert began.level_before > began.level_now * 1.05
    assert f"commit {began.commit}" in cand.reason and "before" in cand.reason
    assert [e.metric for e in cand.history] == ["decode_tps", "ttft_s"]
    assert len(entry.series) == len(levels) and entry.interval[0] < entry.predicted < entry.interval[1]


def test_runs_of_another_model_are_kept_apart_and_named(store: Store) -> None:
    rng = np.random.default_rng(4)
    for i in range(8):  # a history of model "big", twice as slow
        records.record_run(store, [_result(_trials(rng, math.log(0.5)), model="big")], _meta(i, "big"))
    for i in range(8, 14):
        records.record_run(store, [_result(_trials(rng, 0.0))], _meta(i))
    cand = _result(_trials(rng, 0.0))
    notes = against_history.judge(store, cand, {}, max_regression=0.05)
    assert cand.verdict == "passed"
    assert any("8 earlier run(s) of t::a under another set-up kept apart" in n and "model 'big' (now 'm')" in n
               for n in notes)
    assert all(e.runs == 6 for e in cand.history or [])


def test_a_short_history_says_so_and_uses_the_baseline_rule(store: Store) -> None:
    rng = np.random.default_rng(5)
    for i in range(3):
        records.record_run(store, [_result(_trials(rng, 0.0))], _meta(i))
    cand = _result(_trials(rng, math.log(0.8)))  # 20 % slower: the baseline rule alone catches it
    notes = against_history.judge(store, cand, {}, max_regression=0.05)
    assert any("3 earlier run(s) of this set-up, fewer than the 5" in n and "judged against the latest (run 3, "
               "commit c02) by the baseline rule" in n for n in notes)
    assert cand.verdict == "failed" and cand.history == []
    assert [c.verdict for c in cand.comparisons or [] if c.metric == "decode_tps"] == ["regressed"]


def _sweep(level_values: dict[int, float]) -> Result:
    levels = [{"concurrency": n, "kind": "sustained", "verdict": "passed", "decode_tps": v, "total_tps": v * n,
               "ttft_s": 0.5, "streams": [{"decode_tps": v, "ttft_s": 0.5}] * n} for n, v in level_values.items()]
    return _typed({"nodeid": "t::sweep", "kind": "load_sweep", "model": "m", "server": "sim", "verdict": "passed",
                   "ctx": 100, "tokens": 200, "concurrency": list(level_values), "levels": levels})


def test_a_short_level_falls_back_alone_and_the_others_keep_their_history(store: Store) -> None:
    """A level new to the sweep has no history: it alone is judged against the latest run. The levels with a history
    are judged by it, not again against that one run, here an outlier 15 % faster than their usual."""
    rng = np.random.default_rng(6)
    for i in range(8):  # the last of them with the new level
        usual = {1: float(100 * math.exp(rng.normal(0, 0.01))), 2: float(90 * math.exp(rng.normal(0, 0.01)))}
        records.record_run(store, [_sweep(usual if i < 7 else {**usual, 4: 70.0})], _meta(i))
    records.record_run(store, [_sweep({1: 115.0, 2: 103.5, 4: 70.0})], _meta(8))  # the latest: lucky at 1 and 2
    cand = _sweep({1: 100.0, 2: 90.0, 4: 70.0})  # the usual figures
    notes = against_history.judge(store, cand, {}, max_regression=0.05)
    assert any("t::sweep@users=4 has 2 earlier run(s)" in n and "by the baseline rule" in n for n in notes), notes
    assert cand.history is not None
    assert {e.key for e in cand.history} == {"t::sweep@users=1", "t::sweep@users=2"}
    assert all(e.verdict == "passed" for e in cand.history)
    assert {c.key for c in cand.comparisons or []} <= {"t::sweep@users=4"}
    assert cand.verdict == "passed", cand.reason
