"""Gamma arrivals with a burstiness (vLLM's definition) in the rate case's schedule: the gaps' coefficient of
variation is 1 / sqrt(burstiness), checked against that known answer on seeded draws."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.errors import ConfigError
from pytest_specperf.run.rate import schedule


def _cv(times: list[float]) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


def test_burstiness_quarter_has_cv_two_within_ten_percent() -> None:
    times = schedule(4.0, 2001, "gamma", seed=12345, burstiness=0.25)  # 2,000 gaps
    assert times[0] == 0.0 and len(times) == 2001
    assert _cv(times) == pytest.approx(2.0, rel=0.10)
    assert 2000 / times[-1] == pytest.approx(4.0, rel=0.15)  # the mean rate is the one asked
    assert _cv(schedule(4.0, 2001, "gamma", seed=7, burstiness=1.0)) == pytest.approx(1.0, rel=0.10)  # Poisson


def test_the_cv_claim_holds_over_seeds() -> None:
    # A seeded simulation of the check's error rate: 300 schedules of 2,000 gaps, CV within 10% of 2.0 in >= 97%.
    within = sum(abs(_cv(schedule(4.0, 2001, "gamma", seed=s, burstiness=0.25)) - 2.0) <= 0.2 for s in range(300))
    assert within >= 291


def test_the_same_case_draws_the_same_arrivals() -> None:
    assert schedule(2.0, 50, "gamma", 99, 0.5) == schedule(2.0, 50, "gamma", 99, 0.5)
    assert schedule(2.0, 50, "gamma", 99, 0.5) != schedule(2.0, 50, "gamma", 98, 0.5)


def test_burstiness_only_with_gamma() -> None:
    assert build_spec("rate", {"arrivals": "gamma", "burstiness": 0.25}).burstiness == 0.25
    with pytest.raises(ConfigError, match="burstiness must be a positive number with arrivals='gamma'"):
        build_spec("rate", {"burstiness": 0.25})
    # a capacity search probes with the same arrivals
    assert build_spec("capacity", {"arrivals": "gamma", "burstiness": 0.25, "slo": {"ttft_s": 1}}).burstiness == 0.25
    with pytest.raises(ConfigError, match="burstiness must be a positive number with arrivals='gamma'"):
        build_spec("capacity", {"burstiness": 0.25, "slo": {"ttft_s": 1}})
