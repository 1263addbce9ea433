"""Acceptance and the split of a slowdown into its two causes, against the simulator's truth."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from pytest_specperf import stats
from pytest_specperf.client import Client
from pytest_specperf.errors import MeasurementError
from pytest_specperf.measure import _window_chunk_split
from pytest_specperf.sim import SimServer
from pytest_specperf.spec import SustainedSpec


def _truth_split(truth: dict) -> tuple[float, float]:
    """The attribution the plugin should find, computed on the server's own step record."""
    steps = truth["steps"]
    t = np.array([s["t_s"] for s in steps])
    k = np.array([s["tokens"] for s in steps])
    w = stats.window_rates(t, k)
    tpc, cps = _window_chunk_split(t, w.bounds_s, w.window_tokens)
    m = max(3, int(np.ceil(0.25 * len(tpc))))
    return stats.split_log_change(float(np.median(tpc[:m])), float(np.median(tpc[-m:])),
                                  1000 / float(np.median(cps[:m])), 1000 / float(np.median(cps[-m:])))


def test_seed_attribution_matches_truth(seed_sim: SimServer, runner_for) -> None:
    runner = runner_for(seed_sim.url)
    r = runner.sustained(SustainedSpec(tokens=1500, ctx=2700, content="reasoning"), "seed-split")
    assert r.drift_failed
    a = r.attribution
    assert a is not None
    true_accept, true_step = _truth_split(seed_sim.truth(r.streams[0].response_id))
    assert abs(a["accept_share"] - true_accept) < 0.05
    assert abs(a["step_share"] - true_step) < 0.05
    # Both causes are real in the seed story: acceptance falls (about 5 -> 2.9) and steps slow down.
    assert a["accept_early"] > 4 and a["accept_late"] < 3.5 and a["step_ms_late"] > a["step_ms_early"]
    assert len(r.window_accept_len) == len(r.window_step_ms) == len(r.window_tps)
    assert r.window_accept_len[0] > 4 and r.window_accept_len[-1] < 3.5


def test_require_speculation_errors_without_drafts(speed: float, runner_for) -> None:
    flat = {"max_accept": 1, "accept_len": {"prose": 1.0, "code": 1.0, "reasoning": 1.0, "repetitive": 1.0}}
    with SimServer("healthy", speed=speed, overrides=flat) as sim:
        runner = runner_for(sim.url)
        with pytest.raises(MeasurementError, match=r"require_speculation=True but .* shows no speculative decoding"):
            runner.sustained(SustainedSpec(tokens=300, ctx=200, require_speculation=True), "nospec")
        plain = runner.sustained(SustainedSpec(tokens=300, ctx=200), "nospec-ok")
    assert plain.acceptance is None or plain.acceptance["mean_len"] in (None, 1.0)


def test_min_accept_len_and_max_accept_drop_fail_with_reasons(seed_sim: SimServer, runner_for) -> None:
    runner = runner_for(seed_sim.url)
    r = runner.run(SustainedSpec(tokens=1500, ctx=2700, content="reasoning", min_accept_len=4.5,
                                 max_accept_drop=0.2, max_drift=0.99), "accept-floors")
    assert r.verdict == "failed"
    assert "< min_accept_len 4.5" in r.reason
    assert "acceptance drop 0." in r.reason and "> max_accept_drop 0.2" in r.reason


def test_other_traffic_marks_acceptance_contaminated(speed: float, runner_for) -> None:
    with SimServer("healthy", speed=speed) as sim:
        runner = runner_for(sim.url)
        stop = threading.Event()

        def noise() -> None:
            c = Client(sim.url)
            c.detect()
            while not stop.is_set():
                c.complete("Some other user's request about the weather today.", 64)

        th = threading.Thread(target=noise, daemon=True)
        th.start()
        try:
            r = runner.sustained(SustainedSpec(tokens=600, ctx=200), "busy")
        finally:
            stop.set()
            th.join(timeout=30)
        clean = runner.sustained(SustainedSpec(tokens=600, ctx=200), "quiet")
    assert r.acceptance is not None and r.acceptance["contaminated"]
    assert clean.acceptance is not None and not clean.acceptance["contaminated"]


def test_burst_gap_catches_the_story_where_two_point_does_not(seed_sim: SimServer, runner_for) -> None:
    runner = runner_for(seed_sim.url)
    r = runner.run(SustainedSpec(tokens=1500, ctx=2700, content="reasoning", max_burst_gap=0.3, max_drift=0.99),
                   "burst-gap")
    assert r.burst_tps is not None and r.burst_tps > r.decode_tps
    assert r.burst_gap == pytest.approx(1 - r.decode_tps / r.burst_tps)
    assert r.verdict == "failed" and "burst gap" in r.reason and "> 0.3: sustained" in r.reason


def test_periodic_scrapes_show_acceptance_falling_during_the_stream(runner_for) -> None:
    # vLLM-style counters move every step, so scrapes during one stream see the drop as it happens.
    with SimServer("acceptance-collapse", speed=2.0) as sim:
        r = runner_for(sim.url).sustained(SustainedSpec(tokens=1200, ctx=200), "over-time")
    series = r.acceptance["over_time"]
    assert len(series) >= 6
    assert series[0]["mean_len"] == pytest.approx(5.0, abs=0.1)  # before the shift at 300 tokens
    assert series[-1]["mean_len"] == pytest.approx(2.0, abs=0.1)  # after it
    assert all(b["t_s"] > a["t_s"] for a, b in itertools.pairwise(series))
