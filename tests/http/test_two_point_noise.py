"""A two-point or sweep point whose timed span is within the client's measured timing noise is inconclusive with
its fix (raise long= / tokens=), never a figure; on a slow enough server the same case reads the simulator's truth.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.errors import MeasurementError
from pytest_specperf.sim import SimServer

SWEEP = {"ctxs": [64, 32768], "tokens": 64}


def test_a_span_within_the_noise_is_inconclusive(runner_for: Any) -> None:
    # At speed 50, 64 extra tokens take a few ms: as much as two identical requests' times differ.
    with SimServer("healthy", speed=50) as sim, pytest.raises(MeasurementError, match=r"inconclusive.*raise long="):
        runner_for(sim.url).ctx_sweep(build_spec("ctx_sweep", SWEEP), "t::sweep")


def test_a_slow_server_reads_the_truth(runner_for: Any) -> None:
    short, long = 8, 8 + 64  # the sweep's default short=, and short + tokens
    with SimServer("healthy", speed=1) as sim:
        r = runner_for(sim.url).ctx_sweep(build_spec("ctx_sweep", SWEEP), "t::sweep")
        # the simulator's own clock: each request's last write, per context (the first short request of a pair)
        ends = {(q["prompt_tokens"], q["max_tokens"]): sim.truth(q["id"])["steps"][-1]["t_s"]
                for q in sim.requests() if q["max_tokens"] in (short, long)}
    for point in r.points:
        at = {n: [t for (p, m), t in ends.items() if m == n and abs(p - point.prompt_tokens) <= 2]
              for n in (short, long)}
        truth = (long - short) / (at[long][0] - at[short][0])
        assert abs(point.decode_tps / truth - 1) < 0.05, (point.ctx, point.decode_tps, truth)
