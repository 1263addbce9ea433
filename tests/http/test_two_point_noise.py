"""A two-point or sweep point whose timed span is within the client's measured timing noise is inconclusive with
its fix (raise long= / tokens=), never a figure; on a slow enough server the same case reads the simulator's truth.
The rule's error rate on seeded timings is in tests/unit/test_span_noise.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.errors import MeasurementError
from pytest_specperf.run.two_point import SHORTS
from pytest_specperf.sim import SimServer

SWEEP = {"ctxs": [64, 32768], "tokens": 64}


def test_a_span_within_the_noise_is_inconclusive(runner_for: Any) -> None:
    # At speed 200, 64 extra tokens take about 2 ms: less than identical requests' times spread by (a busy host
    # slows the simulator and so lengthens the span; at speed 50 an idle one can time ctx 64's 8.5 ms). Each
    # refusal names the point and the keyword a ctx_sweep takes, tokens=, never two_point's long=.
    with SimServer("healthy", speed=200) as sim:
        runner = runner_for(sim.url)
        for i in range(5):
            with pytest.raises(MeasurementError, match=r"^ctx_sweep at ctx \d+ inconclusive: .* raise tokens="):
                runner.ctx_sweep(build_spec("ctx_sweep", SWEEP), f"t::sweep{i}")


def test_a_slow_server_reads_the_truth(runner_for: Any) -> None:
    short, long = 8, 8 + 64  # the sweep's default short=, and short + tokens
    with SimServer("healthy", speed=1) as sim:
        # three pairs per point, the long request about 0.5 s: a busy machine's late wake-up moves it by a few %
        r = runner_for(sim.url).ctx_sweep(build_spec("ctx_sweep", {**SWEEP, "repeat": 3}), "t::sweep")
        # the simulator's own clock: each request's last write, in the order they came
        ends = [(q["prompt_tokens"], q["max_tokens"], sim.truth(q["id"])["steps"][-1]["t_s"])
                for q in sim.requests() if q["max_tokens"] in (short, long)]
    for point in r.points:
        at = {n: [t for p, m, t in ends if m == n and abs(p - point.prompt_tokens) <= 2] for n in (short, long)}
        # each pair sends its short request SHORTS times: the rate is timed from the median of them
        pairs = [at[short][i:i + SHORTS] for i in range(0, len(at[short]), SHORTS)]
        assert len(pairs) == len(at[long]) == 3 and all(len(p) == SHORTS for p in pairs), point.ctx
        truth = float(np.median([(long - short) / (b - np.median(a)) for a, b in zip(pairs, at[long], strict=True)]))
        assert abs(point.decode_tps / truth - 1) < 0.05, (point.ctx, point.decode_tps, truth)
