"""The history gate on a replay, request by request: this run's latencies and each earlier run's over the trace rows
all of them answered, on a real store (SQLite and PostgreSQL). The runs are built row by row with a known change
(``support/replay_trials.py``)."""

from __future__ import annotations

import numpy as np
from support.replay_trials import PROMPTS, trial
from test_gate import _meta

from pytest_specperf.history import against_history
from pytest_specperf.measure import combine
from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target


def _six_runs(store: Store, rng: np.random.Generator) -> None:
    """Six runs of an unchanged deploy, three trials each, recorded as the plugin records them."""
    for i in range(6):
        records.record_run(store, [combine.aggregate([trial(rng) for _ in range(3)])], _meta(i, "sim"))


def test_a_run_that_lost_the_long_rows_is_judged_on_the_rows_its_history_answered(target: Target) -> None:
    # Six runs of an unchanged deploy, three trials each; then a deploy 10 % slower on every row whose context is
    # shorter, so the eight longest rows are not sent. Its own p90s read faster; over the 32 rows every run answered
    # it is 10 % slower, and the history says which rows it judged.
    rng = np.random.default_rng(8)
    with schema.open_store(Store(target)) as store:
        _six_runs(store, rng)
        before = combine.aggregate([trial(rng) for _ in range(3)])
        cand = combine.aggregate([trial(rng, 1.10, longest=PROMPTS[31]) for _ in range(3)])
        assert cand.ttft_p90_s < before.ttft_p90_s and cand.tpot_p90_ms < before.tpot_p90_ms  # the premise
        notes = against_history.judge(store, cand, {}, max_regression=0.05)
    assert cand.history is not None
    moved = {e.metric: e for e in cand.history if e.metric in ("ttft_p90_s", "tpot_p90_ms", "e2e_p90_s")}
    assert {e.verdict for e in moved.values()} == {"regressed"}, [(e.metric, e.verdict, e.reason)
                                                                  for e in moved.values()]
    for e in moved.values():  # the truth: +10 % on every row
        assert 0.08 < e.value / e.predicted - 1 < 0.12, (e.metric, e.value, e.predicted)
    assert cand.verdict == "failed"
    assert any("over the 32 trace rows every trial of this run and its 6 earlier answered (8 answered only on some "
               "left out)" in n for n in notes), notes


def test_an_unchanged_replay_passes_its_history_and_says_nothing_of_rows(target: Target) -> None:
    rng = np.random.default_rng(9)
    with schema.open_store(Store(target)) as store:
        _six_runs(store, rng)
        cand = combine.aggregate([trial(rng) for _ in range(3)])
        notes = against_history.judge(store, cand, {}, max_regression=0.05)
    assert cand.verdict == "passed" and cand.history, [(e.metric, e.verdict, e.reason) for e in cand.history or []]
    assert not any("trace rows" in n for n in notes), notes
