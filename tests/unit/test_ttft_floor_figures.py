"""The 10 ms TTFT noise floor on every compared TTFT figure (p50, p90, p99; rate cases, sessions, load rows), not
only ``ttft_s``: seeded trials with a known TTFT, through the gate's own path (``per_trial``, ``compare_ab`` /
``compare_runs``, ``ttft_judged``)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import gates, samples, verdicts
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare.samples import Side
from pytest_specperf.measure import combine
from tests.support.result_json import full


def rate_arm(rng: np.random.Generator, p90_s: float, trials: int = 5) -> list[Result]:
    """A/B arm of a rate case: per trial a TTFT p90 around a known value (20 % noise: a few ms is all jitter)."""
    return [load_result(full({"kind": "rate", "nodeid": "t", "verdict": "passed", "goodput_rps": 10.0,
                              "attainment": 1.0, "tpot_p90_ms": 5.0, "e2e_p90_s": 0.2,
                              "ttft_p90_s": float(p90_s * np.exp(rng.normal(0, 0.2))),
                              "ttft_s": float(p90_s / 2 * np.exp(rng.normal(0, 0.2)))}))
            for _ in range(trials)]


def judged(a: list[Result], b: list[Result]) -> dict[str, compare.CaseComparison]:
    pa, pb = samples.per_trial(a), samples.per_trial(b)
    ccs = verdicts.ttft_judged(compare.compare_ab(pa, pb, metrics=gates.metrics_for(b[0])), Side.of(pa), Side.of(pb),
                               ("A", "B"))
    return {cc.metric or "": cc for cc in ccs}


def test_a_few_ms_of_ttft_p90_in_ab_is_noise_not_inconclusive() -> None:
    rng = np.random.default_rng(45)
    # 3.0 -> 4.5 ms (+50 %) at 20 % noise per trial: far past 5 % in relative terms, inside the 10 ms floor
    got = judged(rate_arm(rng, 0.0030), rate_arm(rng, 0.0045))
    for m in ("ttft_p90_s",):
        assert got[m].verdict == "passed", got[m].reason
        assert "within the 10 ms noise floor" in got[m].reason and got[m].comparison is not None
        assert got[m].comparison.verdict == "passed"  # the record inside says the same


def test_a_ttft_p90_change_past_the_floor_is_judged() -> None:
    rng = np.random.default_rng(46)
    # 100 -> 180 ms: 80 ms, past the floor; at 20 % noise and 5 trials a side it is a regression
    got = judged(rate_arm(rng, 0.100), rate_arm(rng, 0.180))
    assert got["ttft_p90_s"].verdict == "regressed", got["ttft_p90_s"].reason


def test_the_floor_applies_to_percentiles_of_saved_repeat_trials() -> None:
    # a rate case saved with repeat=5 (its trials kept) against a candidate of 5: the p90 of a few ms passes
    rng = np.random.default_rng(47)
    base = combine.aggregate(rate_arm(rng, 0.0030))
    cand = combine.aggregate(rate_arm(rng, 0.0050))
    assert base.trials is not None and len(base.trials) == 5  # type: ignore[attr-defined]
    got = {cc.metric: cc for cc in verdicts.ttft_judged(
        compare.compare_runs(samples.per_trial([base]), samples.per_trial([cand]), metrics=gates.metrics_for(cand)),
        Side.of(samples.per_trial([base])), Side.of(samples.per_trial([cand])))}
    assert got["ttft_p90_s"].verdict == "passed" and "noise floor" in got["ttft_p90_s"].reason
    assert got["ttft_p90_s"].comparison is not None and got["ttft_p90_s"].comparison.n_base == 5


@pytest.mark.parametrize(("metric", "before", "after", "within"), [
    ("ttft_s", 0.0030, 0.0120, True),
    ("ttft_p50_s", 0.0030, 0.0120, True),
    ("ttft_p90_s", 0.0030, 0.0129, True),
    ("ttft_p99_s", 0.0200, 0.0110, True),
    ("ttft_p90_s", 0.0030, 0.0140, False),  # 11 ms: past the floor
    ("ttft_content_p90_s", 0.0030, 0.0060, True),
    ("e2e_p90_s", 0.0030, 0.0060, False),  # not a TTFT figure: judged as any metric
    ("tpot_p90_ms", 3.0, 6.0, False),
])
def test_which_figures_the_floor_covers(metric: str, before: float, after: float, within: bool) -> None:
    assert compare.within_ttft_floor(metric, before, after) is within
