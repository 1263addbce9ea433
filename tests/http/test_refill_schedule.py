"""A closed loop's refills are due when their user's previous stream ended, as the server recorded it.

Each user sends its next request once its last stream has ended: that end is the refill's schedule, and any delay
past it is the client's turnaround (its lateness). Checked against the simulator's record of every request (arrival
and last byte written, on the monotonic clock the client's perf_counter shares on Linux): a refill due at its ramp
time or at the previous request's send would be "late" by a whole stream, and every refill run would read as a
client that fell behind.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamRequest, run_closed_loop
from pytest_specperf.sim import SimServer

USERS, REQUESTS, TOKENS = 2, 6, 256


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=4, overrides={"jitter": 0.0}) as s:
        yield s


def test_each_refill_is_due_at_its_users_last_end(sim: SimServer) -> None:
    with Client(sim.url, timeout=30) as client:
        reqs = [StreamRequest(prompt=f"request {i} of a closed loop", max_tokens=TOKENS, seed=i,
                              at_s=0.05 * min(i, USERS)) for i in range(REQUESTS)]
        outcomes = run_closed_loop(client, reqs, USERS)
    truth = [sim.truth(o.trace.response_id) for o in outcomes if o.trace is not None]
    assert len(truth) == REQUESTS and all(rec["done"] for rec in truth)
    origin = outcomes[0].origin
    refills = 0
    for u in range(USERS):
        mine = sorted(((rec["arrival_monotonic"], rec, o) for rec, o in zip(truth, outcomes, strict=True)
                       if o.user == u), key=lambda x: x[0])
        assert mine and mine[0][2].request.at_s == reqs[mine[0][2].request.seed].at_s  # a user's first: its ramp
        for (_, prev, _), (arrived, _, o) in itertools.pairwise(mine):
            refills += 1
            # the server wrote the last token then (its own end stamp, after the write returned, can come later than
            # the client's read on a busy host)
            ended = prev["arrival_monotonic"] + prev["steps"][-1]["t_s"]
            due = origin + o.request.at_s
            # the client read that token after the server wrote it, and soon after (a busy host: some ms; a refill
            # due at its ramp time or at the last send would sit a whole stream, ~0.5 s, earlier)
            assert -1e-3 <= due - ended < 0.25 * prev["total_s"], (due - ended, prev["total_s"])
            # its lateness is the client's own turnaround: no more than the server saw between that token and it
            assert -1e-3 <= o.late_s <= arrived - ended + 1e-3, (o.late_s, arrived - ended)
    assert refills == REQUESTS - USERS


def test_a_refill_run_on_an_idle_client_is_not_behind(sim: SimServer, runner_for: Any) -> None:
    spec = build_spec("sustained", {"tokens": TOKENS, "ctx": 200, "concurrency": USERS, "requests": REQUESTS})
    r = runner_for(sim.url).run(spec, "refill::on-time")
    recs = {rec["id"]: rec for rec in (sim.truth(s.response_id) for s in [*r.streams, *r.warmup_drain_streams])}
    assert len(recs) == REQUESTS
    # the server's view of the run: each request took about a stream; the client's turnaround is a small part of one
    stream = statistics.median(rec["total_s"] for rec in recs.values())
    assert r.late_bound_s is not None and r.late_bound_s < stream
    assert r.client_behind == "", r.client_behind
    assert r.late_p99_s is not None and r.late_p99_s < 0.25 * stream, (r.late_p99_s, stream)
