"""A replay compared request by request (figures.over_shared_rows): both sides' latencies over the same trace rows.

The records are built row by row with a known per-row slowdown (``support/replay_trials.py``: the truth each test
reads), combined and compared through the plugin's own path (``combine.aggregate``, ``gates.against_baseline``)."""

from __future__ import annotations

import math

import numpy as np
from support.replay_trials import PROMPTS, trial

from pytest_specperf.cases import figures
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import gates, samples
from pytest_specperf.measure import combine


def judged(base: ReplayResult, cand: ReplayResult) -> dict[str, tuple[str, float, str]]:
    """The candidate judged against the baseline as the plugin does: per metric (verdict, change, reason)."""
    gates.against_baseline(gates.Gate(0.05), cand, [base])
    assert cand.comparisons is not None
    return {c.metric: (c.verdict, c.comparison.change if c.comparison else math.nan, c.reason)
            for c in cand.comparisons if c.metric}


def test_a_side_that_sent_fewer_rows_is_judged_on_the_rows_both_answered() -> None:
    # The candidate is 10 % slower on every row, and its server (a shorter context) did not get the 8 longest rows.
    # Each side's own p90s would read a faster TTFT and TPOT (the long prompts and their slow steps are gone); over
    # the same rows every latency is 10 % slower.
    rng = np.random.default_rng(3)
    base = combine.aggregate([trial(rng) for _ in range(5)])
    cand = combine.aggregate([trial(rng, 1.10, longest=PROMPTS[31]) for _ in range(5)])
    # the premise: measured as each side sent it, B looks faster
    assert cand.ttft_p90_s < base.ttft_p90_s and cand.tpot_p90_ms < base.tpot_p90_ms
    got = judged(base, cand)
    for metric in ("ttft_p90_s", "tpot_p90_ms", "e2e_p90_s"):
        verdict, change, reason = got[metric]
        assert verdict == "regressed", (metric, got[metric])
        assert 0.08 < change < 0.12, (metric, got[metric])  # the truth: +10 % on every row
        assert "over the 32 trace rows every trial of both sides answered; 8 answered only on some left out" in reason
    assert cand.verdict == "failed"


def test_identical_sides_sending_the_same_rows_pass() -> None:
    rng = np.random.default_rng(4)
    base = combine.aggregate([trial(rng) for _ in range(5)])
    cand = combine.aggregate([trial(rng) for _ in range(5)])
    got = judged(base, cand)
    assert {got[m][0] for m in ("ttft_p90_s", "tpot_p90_ms", "e2e_p90_s")} == {"passed"}, got
    assert "over the 40 trace rows every trial of both sides answered)" in got["ttft_p90_s"][2]


def test_each_trial_is_compared_over_its_own_rows() -> None:
    # Split into trials for judging, each trial carries the rows it answered, not the last trial's.
    rng = np.random.default_rng(5)
    made = [trial(rng, slower) for slower in (1.0, 1.2, 1.4)]
    for one, built in zip(samples.per_trial([combine.aggregate(made)]), made, strict=True):
        assert figures.rows_of(one) == figures.answered_rows(built)


def test_a_baseline_saved_before_rows_were_kept_is_compared_as_measured() -> None:
    rng = np.random.default_rng(6)
    base = combine.aggregate([trial(rng) for _ in range(5)])
    assert base.trials is not None
    old = load_record({k: v for k, v in base.as_dict().items()
                       if k != "trials"} | {"trials": [{k: v for k, v in t.items() if k != "rows"}
                                                      for t in base.as_dict()["trials"]]})
    assert isinstance(old, ReplayResult) and old.trials is not None and old.trials[0].rows is None
    got = judged(old, combine.aggregate([trial(rng) for _ in range(5)]))
    assert got["ttft_p90_s"][0] == "passed" and "trace rows" not in got["ttft_p90_s"][2], got


def test_a_replays_rows_round_trip_through_its_json() -> None:
    rng = np.random.default_rng(7)
    row = combine.aggregate([trial(rng) for _ in range(3)])
    again = load_record(row.as_dict())
    assert again == row and isinstance(again, ReplayResult) and again.trials is not None
    assert [len(t.rows or []) for t in again.trials] == [40, 40, 40]


def test_a_rate_case_has_no_rows() -> None:
    r = load_record({"kind": "rate", "nodeid": "t", "endpoint": "", "model": "", "server": "", "ctx": 0,
                     "prompt_tokens": None})
    assert figures.rows_of(r) is None
