"""The history gate's rule (history/decide.py), seeded: false alarms, steps, creep, change points.

The long runs (4,000 histories per condition) are benchmarks/history_gate.py; these are a few hundred, so the
bounds are loose enough to hold at every seed yet fail a rule that is clearly worse (each names its variant).
"""

from __future__ import annotations

import math

import numpy as np

from pytest_specperf.compare import trials as compare
from pytest_specperf.history import changepoints as cp
from pytest_specperf.history import decide, noise

WITHIN = 0.02  # per-trial log-sd
TRIALS = 5
ALPHA = 0.01 / 2  # the case's alpha over its two gated metrics, as history/against_history.py splits it


def _runs(rng: np.random.Generator, levels: list[float], between: float) -> list[np.ndarray]:
    return [lv + rng.normal(0, between) + rng.normal(0, WITHIN, TRIALS) for lv in levels]


def _regressed(past: list[np.ndarray], cand: np.ndarray) -> bool:
    return decide.decide(past, cand, alpha=ALPHA, max_regression=0.05).verdict == "regressed"


def test_identical_deploys_with_run_offsets_rarely_fail() -> None:
    # 400 cases of two metrics, 3.5 % run-to-run offsets, 10 earlier runs: the benchmark measures 1.7 % per case.
    # A gate blind to the run-to-run part (the baseline rule's within-run noise only) fails most of them.
    rng = np.random.default_rng(11)
    failed = 0
    for _ in range(400):
        metrics = [_runs(rng, [0.0] * 11, 0.035) for _ in range(2)]
        failed += any(_regressed(m[:-1], m[-1]) for m in metrics)
    assert failed <= 16, f"{failed} of 400 identical deploys failed"


def test_a_ten_percent_step_is_caught_at_the_first_run_after_it() -> None:
    rng = np.random.default_rng(12)
    caught = sum(_regressed(h[:-1], h[-1]) for h in (_runs(rng, [0.0] * 8 + [math.log(0.9)], 0.02)
                                                     for _ in range(200)))
    assert caught >= 140, f"caught {caught} of 200 (the benchmark: 82 % at 2 % run-to-run offsets)"


def test_ten_slowdowns_of_two_percent_are_caught_by_the_sixth() -> None:
    rng = np.random.default_rng(13)
    caught = 0
    for _ in range(200):
        h = _runs(rng, [0.0] * 10 + [math.log(0.98) * k for k in range(1, 11)], 0.02)
        caught += any(_regressed(h[:10 + k - 1], h[10 + k - 1]) for k in range(1, 7))
    assert caught >= 190, f"caught {caught} of 200 by the sixth slower run"


def test_thirty_unchanged_runs_rarely_show_a_change_point() -> None:
    rng = np.random.default_rng(14)
    quiet = sum(not cp.change_points([float(np.mean(r)) for r in _runs(rng, [0.0] * 30, 0.035)])
                for _ in range(400))
    assert quiet >= 392, f"{400 - quiet} of 400 unchanged histories showed a change point"


def test_a_change_point_is_found_where_the_step_began() -> None:
    rng = np.random.default_rng(15)
    found = [c.index for c in cp.change_points(np.r_[rng.normal(0, 0.02, 12), rng.normal(-0.1, 0.02, 6)])]
    assert found == [12]


def test_the_busy_machine_case_passes_against_its_history() -> None:
    # The report's case: a same-profile run 5.5 % slower than the saved baseline, whose 5 trials agree within
    # 1 %: the baseline rule calls it regressed; ten earlier runs that differ by 3 % from day to day say it is
    # an ordinary day.
    rng = np.random.default_rng(16)
    tight = np.array([-0.008, -0.004, 0.0, 0.004, 0.008])
    past = [off + tight for off in rng.normal(0, 0.03, 10)]
    cand = math.log(1 - 0.055) + float(np.mean(past[-1])) + tight
    base_rule = compare.compare_case(np.exp(past[-1]), np.exp(cand), direction="higher", max_regression=0.05)
    assert base_rule.verdict == "regressed"
    d = decide.decide(past, cand, alpha=ALPHA, max_regression=0.05)
    assert d.verdict == "passed" and d.prediction is not None and d.prediction.between > 0.015


def test_a_short_history_says_so() -> None:
    rng = np.random.default_rng(17)
    h = _runs(rng, [0.0] * noise.MIN_RUNS, 0.02)
    assert decide.decide(h[:-1], h[-1], alpha=ALPHA, max_regression=0.05).verdict == "short"
    assert decide.decide(h, h[-1], alpha=ALPHA, max_regression=0.05).verdict != "short"


def test_the_noise_model_recovers_both_parts() -> None:
    rng = np.random.default_rng(18)
    runs = [off + rng.normal(0, 0.02, 8) for off in rng.normal(0, 0.04, 30)]
    pred = noise.predict(runs, 8)
    assert pred is not None
    assert abs(pred.within - 0.02) < 0.004 and abs(pred.between - 0.04) < 0.015
