"""Known-answer maths: what the plugin measures over real HTTP against what the simulator knows it did."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_specperf import stats
from pytest_specperf.sim import SimServer
from pytest_specperf.spec import SustainedSpec, TwoPointSpec

from .conftest import SPEED, runner_for


def _truth_trace(truth: dict) -> tuple[np.ndarray, np.ndarray]:
    steps = truth["steps"]
    return np.array([s["t_s"] for s in steps]), np.array([s["tokens"] for s in steps])


def _truth_decode(truth: dict) -> float:
    t, k = _truth_trace(truth)
    return float((k.sum() - k[0]) / (t[-1] - t[0]))


@pytest.mark.parametrize("profile", ["healthy", "fragmenting"])
def test_sustained_matches_truth(profile: str) -> None:
    with SimServer(profile, speed=SPEED) as sim:
        runner = runner_for(sim.url)
        r = runner.sustained(SustainedSpec(tokens=800, ctx=1000, content="prose"), "truth")
        s = r.streams[0]
        truth = sim.truth(s.response_id)
    assert r.completion_tokens == 800
    assert s.counts_exact and s.count_source == "continuous_usage"
    assert abs(r.decode_tps / _truth_decode(truth) - 1) < 0.01
    t, k = _truth_trace(truth)
    truth_drift = stats.drift(stats.window_rates(t, k)).drift
    assert abs(r.drift - truth_drift) < 0.03
    assert abs(r.ttft_s - truth["ttft_s"]) < 0.005
    assert abs(r.prompt_tokens - 1000) <= 10 and r.prompt_tokens == truth["prompt_tokens"]


def test_fragmenting_drifts_and_healthy_does_not(healthy_sim: SimServer) -> None:
    healthy = runner_for(healthy_sim.url).sustained(SustainedSpec(tokens=800, ctx=500), "h")
    with SimServer("fragmenting", speed=SPEED) as sim:
        frag = runner_for(sim.url).sustained(SustainedSpec(tokens=800, ctx=500), "f")
    assert abs(healthy.drift) < 0.05 and not healthy.drift_failed
    assert frag.drift > healthy.drift + 0.1


def test_two_point_matches_truth_rate(healthy_sim: SimServer) -> None:
    runner = runner_for(healthy_sim.url)
    r = runner.two_point(TwoPointSpec(ctx=1000, short=8, long=264), "tp")
    # Truth: the long stream's own decode rate over the same prompt (the sim is stationary on healthy).
    s = runner.sustained(SustainedSpec(tokens=264, ctx=1000), "tp-ref")
    assert abs(r.decode_tps / s.decode_tps - 1) < 0.1
    assert r.prompt_tokens is not None and abs(r.prompt_tokens - 1000) <= 10
