"""The simulator's arrival stamp (``received_monotonic``) is when a request reached its socket, even when the
simulator came to it late: here it is stopped (SIGSTOP) while a client connects and writes a whole request, and
reads it only when it runs again. The stamp must be the write's, not the late read's (``arrival_monotonic``, the
loop's own read, shows how late that was)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator

import pytest

from pytest_specperf.sim import SimServer

#: How long the simulator stays stopped after the request is written.
STOPPED_S = 0.3

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel receive stamps are Linux's")


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=50) as s:
        yield s


def test_a_late_read_is_stamped_with_the_requests_arrival(sim: SimServer) -> None:
    host, port = sim.url.split("//")[1].split(":")
    body = json.dumps({"model": sim.model, "prompt": "hello " * 200, "max_tokens": 2, "stream": False}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    assert sim.pid is not None
    os.kill(sim.pid, signal.SIGSTOP)
    try:
        conn = socket.create_connection((host, int(port)))  # the kernel completes it; nobody accepts yet
        sent = time.monotonic()
        conn.sendall(request)
        time.sleep(STOPPED_S)  # the simulator cannot read it before it runs again
    finally:
        os.kill(sim.pid, signal.SIGCONT)
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    conn.close()
    truth = sim.truth(json.loads(answer.split(b"\r\n\r\n", 1)[1])["id"])
    # read only after it ran again, but stamped by the bytes' arrival on the socket
    assert truth["arrival_monotonic"] - sent >= STOPPED_S * 0.9
    assert -0.001 <= truth["received_monotonic"] - sent < STOPPED_S / 10, truth["received_monotonic"] - sent
