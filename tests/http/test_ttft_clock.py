"""TTFT on the server's clock: the median TTFT against the simulator's recorded first write (``ttft_s`` from the
moment it parsed the request's headers, ``ttft_content_s`` for the first answer token).

The client's clock starts when the request's headers reached the socket (``SentClock``). It used to start when it
set out to send (each of a session's later turns and each request of a rate case opened its connection first):
+10.2 and +3.8 ms in the median on a loaded 2-core machine, now -0.2 and +1.0 ms (docs/benchmarks.md). Medians, not
single requests: beside CPU hogs one late wake-up moves a request by tens of ms either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.sim import SimServer

#: Bounds a busy machine keeps (medians of -0.2 to +1.1 ms seen at load 10 on 2 cores, one session median 3.5)
#: and the early start broke (sessions +10 to +11 ms, rate +3.8 to +4.2 ms there).
BOUND_MS = 2.5
SESSION_BOUND_MS = 5.0


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=5, overrides={"reasoning_tokens": 32, "jitter": 0.0}) as s:
        yield s


def _median_error_ms(sim: SimServer, pairs: list[tuple[str | None, float | None]], field: str) -> float:
    errors = [1000.0 * (got - sim.truth(rid)[field]) for rid, got in pairs if rid is not None and got is not None]
    assert len(errors) >= 8, errors
    return float(np.median(errors))


def test_session_turns_two_to_four(sim: SimServer, runner_for: Any) -> None:
    # One session at a time, three of them: several at once share the client's GIL with each other's parsing,
    # which moves single turns by +-10 ms on a loaded machine and a median of nine with them.
    runner, pairs = runner_for(sim.url), []
    for i in range(3):
        r = runner.run(build_spec("session", {"turns": 4, "users": 1, "ctx": 500, "tokens": 64}), f"s{i}")
        pairs += [(row.response_id, row.ttft_s) for row in r.per_request if row.turn >= 2]
    err = _median_error_ms(sim, pairs, "ttft_s")
    assert abs(err) < SESSION_BOUND_MS, err


def test_rate_on_the_wire(sim: SimServer, runner_for: Any) -> None:
    # A rate case's ttft_s counts from the scheduled send (its late_s included, by design); on the wire it is
    # ttft_s - late_s, which the server's clock must see.
    r = runner_for(sim.url).run(build_spec("rate", {"rps": 4.0, "requests": 16, "tokens": 64, "ctx": 500}), "r")
    pairs = [(row.response_id, row.ttft_s - row.late_s) for row in r.per_request
             if row.ttft_s is not None]
    err = _median_error_ms(sim, pairs, "ttft_s")
    assert abs(err) < BOUND_MS, err


@pytest.mark.parametrize("field", ["ttft_s", "ttft_content_s"])
def test_sustained_chat_and_its_first_answer_token(sim: SimServer, runner_for: Any, field: str) -> None:
    spec = build_spec("sustained", {"api": "chat", "ctx": 500, "tokens": 64, "repeat": 9})
    r = runner_for(sim.url).run(spec, "c")
    err = _median_error_ms(sim, [(s.response_id, getattr(s, field)) for s in r.streams], field)
    assert abs(err) < BOUND_MS, err
