"""TTFT on the server's clock: the median TTFT against the simulator's recorded first write (``ttft_s`` from the
moment it parsed the request's headers, ``ttft_content_s`` for the first answer token).

The client's clock starts when the request's headers reached the socket (``SentClock``). It used to start when it
set out to send (each of a session's later turns and each request of a rate case opened its connection first):
+10.2 and +3.8 ms in the median on a loaded 2-core machine, now -0.2 and +1.0 ms (docs/benchmarks.md). Medians, not
single requests: beside CPU hogs one late wake-up moves a request by tens of ms either way.

The simulator's clock starts when a request's first bytes are read (``sim/arrival.py``), not when its handler runs:
four requests that arrive together are handled one after the other, and the later ones' handlers start late.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
from support import best_run

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.sim import SimServer

#: Bounds a busy machine keeps (medians of -0.2 to +1.1 ms seen at load 10 on 2 cores, one session median 3.5)
#: and the early start broke (sessions +10 to +11 ms, rate +3.8 to +4.2 ms there).
BOUND_MS = 2.5
SESSION_BOUND_MS = 5.0
#: Four users, judged on the best of 12 runs' medians (why: ``test_sustained_chat_at_four_users``). Seen: best runs
#: of +0.0 to +1.1 ms at load 6 to 10 on 2 cores, two CPU hogs included; a clock started when the client set out to
#: send (building, connecting, the other tasks' turns before the headers went) gave best runs of +2.2 to +6.8 ms.
FOUR_USERS_BOUND_MS = 1.5
FOUR_USERS_RUNS = 12


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=5, overrides={"reasoning_tokens": 32, "jitter": 0.0}) as s:
        yield s


def _median_error_ms(sim: SimServer, pairs: list[tuple[str | None, float | None]], field: str,
                     least: int = 8) -> float:
    errors = [1000.0 * (got - sim.truth(rid)[field]) for rid, got in pairs if rid is not None and got is not None]
    assert len(errors) >= least, errors
    return float(np.median(errors))


def _best_of_three(one: Callable[[int], float], bound: float = BOUND_MS) -> list[float]:
    """Run ``one(i)`` (a run's median error, ms) up to three times, stopping at the first within ``bound``: a busy
    host only adds to a run's median, while a wrong clock origin adds to every run's."""
    return best_run.until(one, lambda error: abs(error) < bound, 3)


def test_session_turns_two_to_four(sim: SimServer, runner_for: Any) -> None:
    # One session at a time, three of them: several at once share the client's GIL with each other's parsing,
    # which moves single turns by +-10 ms on a loaded machine and a median of nine with them. The best of up to
    # three such runs, as for a rate case (one run's median read +5.4 ms in a full suite beside another job's tests;
    # the early start adds its +10 ms to every run's).
    runner = runner_for(sim.url)

    def one(i: int) -> float:
        pairs: list[tuple[str | None, float | None]] = []
        for k in range(3):
            r = runner.run(build_spec("session", {"turns": 4, "users": 1, "ctx": 500, "tokens": 64}), f"s{i}{k}")
            pairs += [(row.response_id, row.ttft_s) for row in r.per_request if row.turn >= 2]
        return _median_error_ms(sim, pairs, "ttft_s")

    errors = _best_of_three(one, SESSION_BOUND_MS)
    assert min(abs(e) for e in errors) < SESSION_BOUND_MS, errors


@pytest.mark.solo  # the client's clock to 2.5 ms (beside two CPU hogs its best run read 2.9)
def test_rate_on_the_wire(sim: SimServer, runner_for: Any) -> None:
    # A rate case's ttft_s counts from the scheduled send (its late_s included, by design); on the wire it is
    # ttft_s - late_s, which the server's clock must see.
    # Up to three runs, judged on the best median: beside two CPU hogs and two other busy workers one run's median
    # read +3.5 ms, while the early start adds its +4 ms to every run's (noise only ever adds to the client's wait).
    spec = build_spec("rate", {"rps": 4.0, "requests": 16, "tokens": 64, "ctx": 500})

    def one(i: int) -> float:
        r = runner_for(sim.url).run(spec, f"r{i}")
        return _median_error_ms(sim, [(row.response_id, row.ttft_s - row.late_s) for row in r.per_request
                                      if row.ttft_s is not None], "ttft_s")

    errors = _best_of_three(one)
    assert min(abs(e) for e in errors) < BOUND_MS, errors


@pytest.mark.parametrize("field", ["ttft_s", "ttft_content_s"])
def test_sustained_chat_and_its_first_answer_token(sim: SimServer, runner_for: Any, field: str) -> None:
    # The best of up to three runs, as for a rate case (+3.75 ms in one run beside two CPU hogs and busy workers)
    spec = build_spec("sustained", {"api": "chat", "ctx": 500, "tokens": 64, "repeat": 9})

    def one(i: int) -> float:
        r = runner_for(sim.url).run(spec, f"c{i}")
        return _median_error_ms(sim, [(s.response_id, getattr(s, field)) for s in r.streams], field)

    errors = _best_of_three(one)
    assert min(abs(e) for e in errors) < BOUND_MS, errors


@pytest.mark.solo  # its bound is the client's clock to 1.5 ms: beside two other test workers its best run read 2.7
def test_sustained_chat_at_four_users(sim: SimServer, runner_for: Any) -> None:
    # Four streams sent at once, several times; each run's median against the truth, and the best run judged. Both
    # clocks only run late (the client's starts just before its headers are written, the server's when it reads
    # them), so a late wake-up of either process adds to some runs' TTFTs (all four streams of a run, often, by
    # 1 to 10 ms beside CPU hogs), while anything the client itself counted (building the request, connecting, the
    # other streams' turns on the event loop) is in every run, the best one included.
    runner, medians = runner_for(sim.url), []
    spec = build_spec("sustained", {"api": "chat", "ctx": 500, "tokens": 64, "concurrency": 4})
    for i in range(FOUR_USERS_RUNS):
        r = runner.run(spec, f"u{i}")
        medians.append(_median_error_ms(sim, [(s.response_id, s.ttft_s) for s in r.streams], "ttft_s", least=4))
    print("MEDIANS", [round(m, 2) for m in medians])
    assert min(medians) < FOUR_USERS_BOUND_MS, medians


def _completion(sock: socket.socket, *parts_and_gaps: bytes | float) -> str:
    """Send one non-streamed completion on ``sock`` in parts (a float between parts: a pause); its response id."""
    for part in parts_and_gaps:
        if isinstance(part, float):
            time.sleep(part)  # a request whose bytes straddle a gap, not a wait for a result
        else:
            sock.sendall(part)
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    body = json.loads(resp.read())
    assert resp.status == 200, body
    return str(body["id"])


def _request(model: str) -> tuple[bytes, bytes]:
    """A completion request's head and body, as bytes on the wire."""
    body = json.dumps({"model": model, "prompt": "hello there", "max_tokens": 2}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head, body


def test_the_server_clock_starts_at_the_first_bytes(sim: SimServer) -> None:
    # The truth's arrival is when the request's first bytes were read, as the client's clock starts before its first
    # byte: a handler that starts late (its headers slow, or other requests' handlers first) is not the start. A
    # request whose headers arrive in two parts 0.3 s apart is stamped at the first part (the handler's own start
    # was 0.3 s later); the next request on the same connection gets a stamp of its own, after its own first byte.
    gap = 0.3
    model = httpx.get(f"{sim.url}/v1/models").json()["data"][0]["id"]
    url = urlsplit(sim.url)
    with socket.create_connection((url.hostname, url.port)) as sock:
        head, body = _request(model)
        first = time.monotonic()
        rid = _completion(sock, head[:20], gap, head[20:] + body)
        arrival = sim.truth(rid)["arrival_monotonic"]
        assert first <= arrival < first + gap / 2, (arrival - first)
        second = time.monotonic()
        rid2 = _completion(sock, head + body)
        assert sim.truth(rid2)["arrival_monotonic"] >= second, "a stale stamp: the first request's"
