"""Every fault gives a fast, named error (or a bounded, successful retry) against the simulator's faults."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamRequest, run_streams
from pytest_specperf.endpoint.retrying import RetryPolicy, retry_after_s
from pytest_specperf.errors import MeasurementError
from pytest_specperf.sim import FAULT_HEADER, SimServer

PROMPT = "The river ran quietly past the old mill, and the town slept under a pale moon."


@pytest.fixture
def client(healthy_sim: SimServer) -> Iterator[Client]:
    with Client(healthy_sim.url, timeout=2.0, retries=2, max_retry_wait=1.0) as c:
        c.detect()
        yield c


def _fault(spec: str, key: str) -> dict[str, str]:
    return {FAULT_HEADER: f"{spec}, key={key}"}


def test_stall_past_the_timeout(client: Client, speed: float) -> None:
    # A model-time stall of 8 * speed seconds is 8 s of real time, far past the 2 s timeout.
    with pytest.raises(MeasurementError, match=r"^stalled: no data for 2 s after \d+ tokens \(--specperf-timeout=2\)"):
        client.stream(PROMPT, 200, headers=_fault(f"stall={8 * speed}@50", "stall"))


def test_short_stall_is_measured_not_an_error(client: Client, speed: float) -> None:
    stall_s = 4.0 / speed  # 4 model seconds: 0.5 s of real time, some 200 times a step
    trace = client.stream(PROMPT, 300, headers=_fault("stall=4@150", "short-stall"))
    assert trace.completion_tokens == 300
    gaps = sorted(b.t - a.t for a, b in itertools.pairwise(trace.chunks))
    assert gaps[-1] == pytest.approx(stall_s, abs=0.1)  # the stall, measured as long as it was
    assert gaps[-2] < 0.1 * stall_s  # and no other gap near it


def test_disconnect_mid_stream(client: Client) -> None:
    with pytest.raises(MeasurementError, match=r"^stream cut after \d+ tokens"):
        client.stream(PROMPT, 200, headers=_fault("disconnect@60", "cut"))


def test_malformed_sse_line_is_quoted(client: Client) -> None:
    with pytest.raises(MeasurementError, match=r"^malformed SSE line after \d+ tokens: 'data: .*'") as exc:
        client.stream(PROMPT, 200, headers=_fault("malformed@40", "bad"))
    assert len(str(exc.value)) < 160


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry waits asked of ``time.sleep``, recorded and not slept: the server counts requests, not time."""
    asked: list[float] = []
    monkeypatch.setattr(time, "sleep", asked.append)
    return asked


@pytest.mark.parametrize("code", [503, 429, 502, 504])
def test_retry_after_is_honoured_then_succeeds(healthy_sim: SimServer, code: int, waits: list[float]) -> None:
    # The server asks for 0.3 s; a client that ignored it would back off 1 s then 2 s.
    with Client(healthy_sim.url, timeout=2.0, retries=2, max_retry_wait=5.0) as client:
        client.detect()
        trace = client.stream(PROMPT, 64, headers=_fault(f"status={code}*2, retry_after=0.3", f"retry{code}"))
    assert trace.completion_tokens == 64
    assert waits == [pytest.approx(0.3), pytest.approx(0.3)]


def test_retry_after_as_an_http_date(healthy_sim: SimServer, waits: list[float]) -> None:
    # An HTTP date 4 s ahead, in whole seconds: the wait is what is left of it, between 3 and 4 s.
    with Client(healthy_sim.url, timeout=2.0, retries=2, max_retry_wait=10.0) as client:
        done = client.complete(PROMPT, 8, headers=_fault("status=503*1, retry_date=4", "date"))
    assert done.usage["completion_tokens"] == 8
    assert len(waits) == 1 and 2.9 <= waits[0] <= 4.0


def test_retry_wait_is_capped(healthy_sim: SimServer, waits: list[float]) -> None:
    with Client(healthy_sim.url, timeout=2.0, retries=3, max_retry_wait=1.5) as client:
        client.complete(PROMPT, 8, headers=_fault("status=503*2, retry_after=60", "capped"))
    assert waits == [1.5, 1.5]


def test_retry_after_forms_and_backoff_without_it() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("2.5", now) == 2.5
    assert retry_after_s("Thu, 01 Jan 2026 12:00:07 GMT", now) == 7.0
    assert retry_after_s("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # already past: go now
    assert retry_after_s("soon", now) is None and retry_after_s(None, now) is None
    policy = RetryPolicy(retries=5, max_wait_s=3.0)
    bare = httpx.Response(503)
    assert [policy.wait_s(bare, n) for n in (1, 2, 3)] == [1.0, 2.0, 3.0]


def test_concurrent_streams_retry_by_the_same_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    with SimServer("healthy", speed=20, overrides={"faults": "status=429*2, retry_after=0.7"}) as sim, \
            Client(sim.url, timeout=5.0, retries=2, max_retry_wait=5.0) as client:
        client.detect()
        monkeypatch.setattr(asyncio, "sleep", fake_sleep)
        outcomes = run_streams(client, [StreamRequest(PROMPT, 32, seed=i) for i in range(3)])
    assert [o.error for o in outcomes] == [None, None, None]
    assert sorted(slept) == [0.7, 0.7]


def test_retries_are_bounded(client: Client) -> None:
    with pytest.raises(MeasurementError, match=r"HTTP 503 from .* after 2 retries; the server is overloaded"):
        client.complete(PROMPT, 8, headers=_fault("status=503*10, retry_after=0", "bounded"))


def test_server_error_is_named(client: Client) -> None:
    with pytest.raises(MeasurementError, match=r"^POST /v1/completions: HTTP 500 from http://127\.0\.0\.1:\d+"):
        client.complete(PROMPT, 8, headers=_fault("status=500*1", "five-hundred"))


def test_slow_first_byte_past_the_timeout(client: Client, speed: float) -> None:
    with pytest.raises(MeasurementError, match=r"no response headers within 2 s|got no answer within 2 s"):
        client.stream(PROMPT, 8, headers=_fault(f"first_byte={8 * speed}", "slow"))


def test_wrong_model_name(healthy_sim: SimServer) -> None:
    wrong = r"model 'no-such-model' is not served by .*; it serves specperf-sim \(fix --model\)"
    with Client(healthy_sim.url, model="no-such-model") as c, pytest.raises(MeasurementError, match=wrong):
        c.detect()


def test_endpoint_down() -> None:
    down = r"endpoint http://127\.0\.0\.1:9 is down .*start the server"
    with Client("http://127.0.0.1:9") as c, pytest.raises(MeasurementError, match=down):
        c.detect()


def test_a_full_accept_queue_is_named_not_a_slow_answer() -> None:
    # A server that queues no more connections (its listen backlog full, as thousands of streams connecting at once
    # make it): the client gives up connecting, which is not the answer's timeout and must not read as one.
    with socket.socket() as lsock, socket.socket() as filler:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(0)  # one queued connection at most, never accepted
        filler.connect(lsock.getsockname())
        url = f"http://127.0.0.1:{lsock.getsockname()[1]}"
        with Client(url, timeout=0.5) as c, pytest.raises(MeasurementError) as err:
            c.detect()
    assert "accepted no connection in time (its listen backlog full" in str(err.value), err.value
    assert "response headers" not in str(err.value)


def test_output_shorter_than_asked_is_an_error(speed: float, request: pytest.FixtureRequest) -> None:
    # A server that stops at EOS and is not told to ignore it (kind forced to plain OpenAI: no ignore_eos).
    with SimServer("healthy", speed=speed, overrides={"eos_after_tokens": 50}) as sim:
        from pytest_specperf.cases.closed_loop import SustainedSpec
        from pytest_specperf.run.runner import Runner

        c = Client(sim.url, kind="openai")
        request.addfinalizer(c.close)
        c.detect()
        with pytest.raises(MeasurementError, match=r"^output 50 tokens < 300 asked \(finish_reason=stop\): the server "
                                                   r"cannot force the length"):
            Runner(c).sustained(SustainedSpec(tokens=300, ctx=64), "short")
