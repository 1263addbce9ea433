"""A two-point or sweep point whose timed span is within the client's measured timing noise is inconclusive with
its fix (raise long= / tokens=), never a figure; on a slow enough server the same case reads the simulator's truth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.errors import MeasurementError
from pytest_specperf.sim import SimServer

SWEEP = {"ctxs": [64, 32768], "tokens": 64}


def test_a_span_within_the_noise_is_inconclusive(runner_for: Any) -> None:
    # At speed 200, 64 extra tokens take about 2 ms: less than two identical requests' times differ by (a busy
    # host slows the simulator and so lengthens the span: at speed 50 one sweep in seven beside two CPU hogs read one).
    # A pair whose long request came back first is refused too, but only some are: five sweeps, five refusals.
    with SimServer("healthy", speed=200) as sim:
        runner = runner_for(sim.url)
        for i in range(5):
            with pytest.raises(MeasurementError, match=r"inconclusive.*raise long="):
                runner.ctx_sweep(build_spec("ctx_sweep", SWEEP), f"t::sweep{i}")


def test_a_slow_server_reads_the_truth(runner_for: Any) -> None:
    short, long = 8, 8 + 64  # the sweep's default short=, and short + tokens
    with SimServer("healthy", speed=0.5) as sim:
        # three pairs per point of about 1 s each: a busy machine's late wake-up moves a short span by several %
        r = runner_for(sim.url).ctx_sweep(build_spec("ctx_sweep", {**SWEEP, "repeat": 3}), "t::sweep")
        # the simulator's own clock: each request's last write, in the order they came
        ends = [(q["prompt_tokens"], q["max_tokens"], sim.truth(q["id"])["steps"][-1]["t_s"])
                for q in sim.requests() if q["max_tokens"] in (short, long)]
    for point in r.points:
        at = {n: [t for p, m, t in ends if m == n and abs(p - point.prompt_tokens) <= 2] for n in (short, long)}
        # each pair sends its short request twice: the first of the two is the one the rate is timed from
        truth = float(np.median([(long - short) / (b - a) for a, b in zip(at[short][::2], at[long], strict=True)]))
        assert abs(point.decode_tps / truth - 1) < 0.05, (point.ctx, point.decode_tps, truth)
