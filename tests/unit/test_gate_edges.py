"""Known answers at the edges of the gates: each test fails for one plausible slip in the code it names.

Seeded or hand-made inputs whose right answer is fixed by the statistics, not by the plugin's formula: coverage
of an interval against the true value it was drawn around, the median of a list, an attainment of 18 in 20.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_specperf.cases.result_parts import RateRequest
from pytest_specperf.cases.results import Recorded
from pytest_specperf.compare import arms, crossover
from pytest_specperf.compare import trials as compare
from pytest_specperf.run import capacity
from tests.support.records import record


def test_intervals_cover_with_unequal_noise_and_sizes() -> None:
    # 3 noisy baseline trials (10%) against 12 quiet ones (1%), no true change: Welch's interval covers 0
    # 98% of the time; a pooled variance leans on the quiet side and covers about two thirds.
    rng = np.random.default_rng(1)
    n = 1000
    held_trials = held_crossover = 0
    for _ in range(n):
        b, c = 100 * np.exp(rng.normal(0, 0.10, 3)), 100 * np.exp(rng.normal(0, 0.01, 12))
        cc = compare.compare_case(b, c, direction="higher")
        held_trials += cc.ci[0] <= 0 <= cc.ci[1]
        _, lo, hi = crossover.log_interval(np.log(b), np.log(c))[:3]
        held_crossover += lo <= 0 <= hi
    assert held_trials / n >= 0.96 and held_crossover / n >= 0.96


def test_per_arm_interval_is_a_t_interval() -> None:
    # 5 trials, 3% noise: the t interval holds the true rate 98% of the time, one from z about 92%
    rng = np.random.default_rng(2)
    n = 2000
    held = sum(lo <= 100 <= hi for lo, hi in (arms.mean_interval(100 * np.exp(rng.normal(0, 0.03, 5)))[1:]
                                               for _ in range(n)))
    assert held / n >= 0.965


def test_a_trials_figure_is_its_median_user() -> None:
    streams = [{"decode_tps": v, "ttft_s": t} for v, t in ((10, 0.1), (11, 0.2), (12, 0.3), (400, 9.0))]
    row = record({"kind": "sustained", "streams": streams})
    [fig] = crossover.trial_figures(row)
    assert fig["decode_tps"] == pytest.approx(11.5) and fig["ttft_s"] == pytest.approx(0.25)


def test_noise_weighs_each_side_by_its_own_trials() -> None:
    lb = np.log([100.0, 120.0])  # 2 noisy baseline trials
    lc = np.log(100 * np.exp(np.linspace(-0.01, 0.01, 20)))  # 20 quiet candidate trials
    sb, sc = float(lb.std(ddof=1)), float(lc.std(ddof=1))
    want = math.sqrt((sb**2 / 2 + sc**2 / 20) / (1 / 2 + 1 / 20))
    assert compare._noise(lb, lc, 0.03)[0] == pytest.approx(want)


def test_the_threshold_is_a_factor_of_one_minus_it() -> None:
    # 4.9% slower (a factor 0.951) is inside a 5% threshold: log(0.951) > log(0.95), though < -log(1.05)
    base = [100.0 * (1 + 0.0001 * k) for k in range(-10, 10)]
    c = compare.compare_case(base, [x * 0.951 for x in base], direction="higher", max_regression=0.05)
    assert c.verdict == "passed", c.reason
    worse = compare.compare_case(base, [x * 0.949 for x in base], direction="higher", max_regression=0.05)
    assert worse.verdict == "regressed", worse.reason


def _arm(values: list[float]) -> list[Recorded]:
    return [record({"kind": "load_sweep", "concurrency": [4], "levels": [
        {"concurrency": 4, "streams": [{"decode_tps": v} for _ in range(3)]}]}) for v in values]


def test_the_best_arm_is_the_best_on_average_not_the_luckiest_trial() -> None:
    t = arms.table({"steady": _arm([100, 101, 99, 100, 100]), "lucky": _arm([88, 90, 89, 91, 130])},
                   baseline="steady")
    assert t.levels[0].best == "steady"


def _request(at_s: float, met: bool) -> RateRequest:
    return RateRequest(at_s=at_s, sent_s=at_s, late_s=0.0, status=200, met=met)


def test_capacity_leaves_out_the_warm_up_and_passes_at_the_target() -> None:
    # 20 requests: the first 2 (a tenth, by schedule) meet an idle server and are not counted
    records = [_request(i / 10, met=i >= 2 and i not in (5, 9)) for i in range(20)]
    counted, attainment, passed = capacity.probe_verdict(records[::-1], 0.9)
    assert [r.at_s for r in counted] == [i / 10 for i in range(2, 20)]
    assert attainment == pytest.approx(16 / 18) and not passed
    records[9].met = True  # 17 of 18 counted met
    assert capacity.probe_verdict(records, 0.9)[2]
    exact = [_request(i, met=i not in (3, 7)) for i in range(22)]  # 18 of the 20 counted: exactly 0.90
    assert capacity.probe_verdict(exact, 0.9)[1:] == (pytest.approx(0.9), True)
