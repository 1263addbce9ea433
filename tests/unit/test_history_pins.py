"""Each rule of the history gate (history/decide.py, noise.py) pinned on histories built on purpose, with answers
known from how they were built (seeded): a one-line break of the rule turns its test red (tools/breaks/hist.toml).
"""

from __future__ import annotations

import math

import numpy as np

from pytest_specperf.history import decide, noise

WITHIN = 0.02  # per-trial log-sd
TRIALS = 5
ALPHA = 0.01 / 2  # the case's alpha over its two gated metrics, as history/against_history.py splits it


def _runs(rng: np.random.Generator, levels: list[float], between: float = 0.01) -> list[np.ndarray]:
    return [lv + rng.normal(0, between) + rng.normal(0, WITHIN, TRIALS) for lv in levels]


def test_the_step_check_predicts_from_the_runs_after_the_last_change() -> None:
    """10 runs, then a change 20 % better that 15 runs have held since (outside the recent window: the new normal),
    then today 10 % below that new level. Against the 15 runs since the change that is a regression; against all
    25 runs, two levels apart, the prediction is so wide that it passes."""
    rng = np.random.default_rng(31)
    up = math.log(1.2)
    caught = 0
    for _ in range(20):
        h = _runs(rng, [0.0] * 10 + [up] * 15 + [up + math.log(0.9)])
        d = decide.decide(h[:-1], h[-1], alpha=ALPHA, max_regression=0.05)
        caught += d.verdict == "regressed" and d.by == "step" and d.prediction is not None \
            and d.prediction.runs == 15
    assert caught >= 18, f"caught {caught} of 20"


def test_a_change_that_began_exactly_window_runs_back_is_recent() -> None:
    """15 runs, then a 10 % drop that began exactly ``WINDOW`` runs back (the candidate is its tenth run): the step
    check sees nothing (the 9 runs since the change predict the candidate), the creep check must."""
    rng = np.random.default_rng(32)
    drop = math.log(0.9)
    caught = 0
    for _ in range(20):
        h = _runs(rng, [0.0] * 15 + [drop] * decide.WINDOW)
        d = decide.decide(h[:-1], h[-1], alpha=ALPHA, max_regression=0.05)
        began = d.began
        caught += d.verdict == "regressed" and began is not None and began.index == 15
    assert caught >= 18, f"caught {caught} of 20"


def test_the_creep_is_measured_from_the_level_before_it_not_from_run_zero() -> None:
    """8 runs at 100, then a change to 120 (15 runs ago: the new normal), then 3 % slower per run for 5 runs and
    the candidate: the creep is the level now against 120, not against the mean of every run before it."""
    rng = np.random.default_rng(33)
    up = math.log(1.2)
    levels = [0.0] * 8 + [up] * 14 + [up + math.log(0.97) * k for k in range(1, 7)]
    near = 0
    for _ in range(20):
        h = _runs(rng, levels, between=0.005)
        d = decide.decide(h[:-1], h[-1], alpha=ALPHA, max_regression=0.05)
        if d.began is None or d.creep is None:
            continue
        # the truth from the levels built in: the mean of the last segment's levels against 120
        truth = math.expm1(float(np.mean(levels[d.began.index:])) - up)
        near += d.verdict == "regressed" and abs(d.creep - truth) < 0.02
    assert near >= 16, f"{near} of 20 measured the creep within 2 points of its truth"


def test_the_run_to_run_variance_is_corrected_for_the_within_run_noise() -> None:
    """Runs that differ by 1 % (tau) with 6 % noise per trial, 3 trials each: the spread of the run means is mostly
    the trials' noise (0.06^2 / 3), which the run-to-run part must not take for the runs' own offsets."""
    rng = np.random.default_rng(34)
    tau, within, n = 0.01, 0.06, 3
    estimates = []
    for _ in range(300):
        runs = [off + rng.normal(0, within, n) for off in rng.normal(0, tau, 30)]
        pred = noise.predict(runs, n)
        assert pred is not None
        estimates.append(pred.between ** 2)
    # the estimate is truncated at 0, so it averages above tau^2 = 0.0001, far below the spread 0.0013
    assert float(np.mean(estimates)) < 0.0005, float(np.mean(estimates))


def test_the_prediction_uses_the_newest_runs() -> None:
    """40 runs: the oldest 10 at 80 %, the newest 30 at 100 %; the prediction rests on the newest ``MAX_RUNS``."""
    rng = np.random.default_rng(35)
    runs = _runs(rng, [math.log(0.8)] * 10 + [0.0] * noise.MAX_RUNS, between=0.005)
    pred = noise.predict(runs, TRIALS)
    assert pred is not None and pred.runs == noise.MAX_RUNS
    assert abs(pred.center) < 0.01, pred.center  # the newest runs' level, log 1.0


def test_the_prediction_keeps_its_own_uncertainty() -> None:
    """Five runs predict a sixth: the predicted variance must include the uncertainty of the five runs' mean
    (var(m)/k). Checked against the simulation's truth: the variance of (candidate - predicted centre) over
    2,000 seeded histories, 3 % run-to-run offsets and 2 % per trial."""
    rng = np.random.default_rng(36)
    k, tau = 5, 0.03
    gaps, variances = [], []
    for _ in range(2000):
        h = _runs(rng, [0.0] * (k + 1), between=tau)
        pred = noise.predict(h[:-1], TRIALS, h[-1])
        assert pred is not None
        gaps.append(float(np.mean(h[-1])) - pred.center)
        variances.append(pred.sd ** 2)
    ratio = float(np.mean(variances)) / float(np.var(gaps))
    assert 0.92 < ratio < 1.2, f"predicted variance / true variance {ratio:.3f}"


def test_a_significant_drop_smaller_than_max_regression_passes() -> None:
    """At a real level (log 40 tok/s) with little noise (0.5 % per trial), a 4 % drop is significant but under
    ``max_regression`` (5 %): it passes, whether today alone (the step check) or held for six runs (the creep
    check)."""
    rng = np.random.default_rng(37)
    level, drop = math.log(40.0), math.log(0.96)

    def runs(levels: list[float]) -> list[np.ndarray]:
        return [level + lv + rng.normal(0, 0.002) + rng.normal(0, 0.005, TRIALS) for lv in levels]

    today = held = 0
    for _ in range(20):
        h = runs([0.0] * 20 + [drop])
        d = decide.decide(h[:-1], h[-1], alpha=ALPHA, max_regression=0.05)
        assert d.p is not None and d.p < ALPHA, "premise: the 4 % drop is significant"
        today += d.verdict == "passed"
        h = runs([0.0] * 15 + [drop] * 6)
        d = decide.decide(h[:-1], h[-1], alpha=ALPHA, max_regression=0.05)
        held += d.verdict == "passed"
    assert today == 20 and held == 20, f"passed {today} (today) and {held} (held) of 20"
