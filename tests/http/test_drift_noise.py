"""Early and late rates (the drift gate) follow the two-point's rule: a group of windows whose span is within ten
times the client's measured timing noise gives no figure and no drift verdict, but "not judged" with its fix
(raise tokens=); on a server slow enough to time, both rates read the simulator's own clock.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import SustainedResult
from pytest_specperf.sim import SimServer

TOKENS = 300  # 299 decode tokens: 9 windows of 32, early and late 3 windows (96 tokens) each


def test_windows_within_the_noise_give_no_drift(runner_for: Any) -> None:
    # At speed 200 the whole decode takes a few ms (the simulator's clock says so) and the early and late 96 tokens
    # are read over 1-3 ms. Every other answer waits 1 ms more (one slow backend of two behind a balancer), so two
    # identical requests are about 1 ms apart: the noise alone, measured here at 0.1-0.4 ms, put the floor at 1-4 ms,
    # beside those spans (one run in five judged them).
    with SimServer("healthy", speed=200, overrides={"faults": "first_byte=0.2*1%2"}) as sim:
        r = runner_for(sim.url).run(build_spec("sustained", {"tokens": TOKENS, "max_drift": 0.15}), "t::fast")
        steps = sim.truth(next(q["id"] for q in sim.requests() if q["max_tokens"] == TOKENS))["steps"]
    assert isinstance(r, SustainedResult)
    assert steps[-1]["t_s"] - steps[0]["t_s"] < 0.05  # the whole decode: a span too short for 96-token groups
    assert r.drift_verdict == "not judged", (r.drift_verdict, r.drift_gate, r.early_tps, r.late_tps)
    assert "within 10x the client's timing noise" in (r.drift_gate or "") and "raise tokens=" in (r.drift_gate or "")
    assert r.early_tps is None and r.late_tps is None and r.drift is None
    assert all(s.early_tps is None and s.late_tps is None and s.drift is None for s in r.streams)
    # max_drift was asked for and could not be judged: inconclusive (a failure with --specperf-inconclusive=fail)
    assert any("drift not judged" in w and "inconclusive" in w for w in r.warnings), r.warnings


def test_a_slow_server_reads_early_and_late_from_the_truth(runner_for: Any) -> None:
    with SimServer("healthy", speed=1) as sim:
        r = runner_for(sim.url).run(build_spec("sustained", {"tokens": TOKENS}), "t::slow")
        steps = sim.truth(next(q["id"] for q in sim.requests() if q["max_tokens"] == TOKENS))["steps"]
    assert isinstance(r, SustainedResult) and r.early_tps is not None and r.late_tps is not None, r.drift_gate
    # the server's clock: decode tokens written by each step's write, after the first step's (the prefill's) token
    t = np.array([s["t_s"] for s in steps])
    done = np.concatenate([[0], np.cumsum([s["tokens"] for s in steps[1:]])])
    w, windows = r.streams[0].window_tokens, len(r.streams[0].window_tps)
    assert w is not None and windows == 9
    group = 3 * w  # a quarter of the windows, at least three, at each end
    at = np.interp([0, group, (windows - 3) * w, windows * w], done, t)
    early, late = group / (at[1] - at[0]), group / (at[3] - at[2])
    assert abs(r.early_tps / early - 1) < 0.05, (r.early_tps, early)
    assert abs(r.late_tps / late - 1) < 0.05, (r.late_tps, late)
