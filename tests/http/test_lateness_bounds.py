"""The client's lateness weighed against an SLO with two bounds: held to the tightest schedule-counted bound, and
never taken off a figure it does not enter (TPOT runs from the first token, not from the scheduled arrival).

The lateness is a stall of the client's own, made on the test's clock (``time.sleep`` inside its event loop as it
sends a request), so which requests went out late, and by about how much, is known without the plugin.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from support import stalls

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.sim import SimServer


@pytest.fixture(scope="module")
def fast_sim() -> Iterator[SimServer]:
    # speed 100: a step is about 0.1 ms, so every request's TPOT is far under the 0.6 s the client loses
    with SimServer("batching", speed=100) as sim:
        yield sim


def stall_once(client: Client, seconds: float) -> dict[str, float]:
    """Make the client stall once, inside its event loop, as it sends its first request: a busy client
    (support/stalls.py); returns where the stall ended, on the test's clock, once it has."""
    return stalls.stall_once(seconds)


@pytest.fixture(autouse=True)
def _no_stall_after() -> Iterator[None]:
    yield
    stalls.restore()


def _rate(sim: SimServer, runner_for: Any, slo: dict[str, float], nodeid: str, *, stall_s: float = 0.6,
          min_attainment: float = 0.95) -> Any:
    """Ten requests at 20 req/s (a 0.5 s schedule), the client stalling ``stall_s`` before the first goes out."""
    # a case may ask no TPOT under 0.01 ms (cases/units.py); these ask one no request meets even when the client,
    # stalled, reads a stream's chunks in one read (microseconds apart, or one stamp where reads are taken raw: a
    # TPOT of 0), so the plausible spec is built and its bound then set
    spec = build_spec("rate", {"rps": 20, "requests": 10, "tokens": 8, "ctx": 60, "arrivals": "constant",
                               "slo": {k: max(v, 0.01) if k == "tpot_ms" else v for k, v in slo.items()},
                               "min_attainment": min_attainment})
    spec = dataclasses.replace(spec, slo=slo)
    runner = runner_for(sim.url)
    runner.warm_up()
    stall = stall_once(runner.client, stall_s)
    r = runner.run(spec, nodeid)
    # The premise, on the test's clock and the server's (one monotonic clock on one host): the stall came as the
    # first request (due at the start) was written and outlasted the 0.45 s schedule, so no request reached the
    # server before it ended and every one went out late; the first by the whole stall.
    arrived = [sim.truth(p.response_id)["arrival_monotonic"] for p in r.per_request if p.response_id]
    assert len(arrived) == 10 and min(arrived) >= stall["end"], (arrived, stall)
    return r


def test_two_bounds_hold_the_client_to_the_tighter(fast_sim: SimServer, runner_for: Any) -> None:
    # 0.6 s lost by the client: past a tenth of the 0.4 s TTFT bound, well within a tenth of the 10 s e2e one.
    # The requests it held missed TTFT through the client alone, so the run cannot judge the server.
    r = _rate(fast_sim, runner_for, {"e2e_s": 10.0, "ttft_s": 0.4}, "lateness::two-bounds")
    assert r.attainment is not None and r.attainment < 0.95  # what the floor alone would fail on
    assert "client fell behind" in r.client_behind and "slo ttft_s 0.4 s" in r.client_behind
    assert r.verdict == "passed" and any("the client fell behind" in w for w in r.warnings)


def test_lateness_is_not_taken_off_tpot(fast_sim: SimServer, runner_for: Any) -> None:
    # TPOT under 0: no request meets it, sent on time or not; the 1 s TTFT bound makes the
    # client's 1 s count.
    # Sent on time the run fails the same, so the lateness explains nothing: a failure, with the lateness a note.
    # (Each request went out at least 0.5 s late, hundreds of times its TPOT in ms: lateness taken off TPOT too
    # would read every one of them as met on time.)
    r = _rate(fast_sim, runner_for, {"ttft_s": 1.0, "tpot_ms": -1e-4}, "lateness::tpot", stall_s=1.0,
              min_attainment=0.5)
    assert all(p.tpot_ms is not None and p.tpot_ms > -1e-4 for p in r.per_request)  # the premise: none met TPOT
    assert r.verdict == "failed" and "SLO attainment 0.00 < min_attainment 0.5" in r.reason
    assert r.client_behind == "" and not r.warnings
    assert any("the client fell behind" in n and "on time it reads the same" in n for n in r.notes)


def test_a_tpot_only_slo_with_the_client_behind_stays_inconclusive(fast_sim: SimServer, runner_for: Any) -> None:
    # TPOT alone: lateness enters no figure the SLO bounds, but the client that lost 0.6 s sent the ten requests over
    # a span that is not the 0.5 s asked, so the load offered was not the case's: nothing here judges the server,
    # even though no request met TPOT (no "on time it reads the same" for a bound lateness does not enter)
    r = _rate(fast_sim, runner_for, {"tpot_ms": -1e-4}, "lateness::tpot-only")
    assert "client fell behind" in r.client_behind and "on the p50" in r.client_behind
    assert r.verdict == "passed" and any("the client fell behind" in w for w in r.warnings)
    assert not any("on time it reads the same" in n for n in r.notes)
