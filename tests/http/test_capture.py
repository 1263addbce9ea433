"""Streams read raw under httpx (endpoint/capture.py) and token counts on http.client (endpoint/light_post.py):
what they must keep of httpx's behaviour (framing, connection reuse, named cuts and stalls, a refused or full
listener) on real sockets, against the simulator and against small servers of the test's own."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import httpcore
import httpx
import pytest

from pytest_specperf.endpoint import capture
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamRequest, run_closed_loop, run_streams
from pytest_specperf.endpoint.light_post import LightPost
from pytest_specperf.errors import MeasurementError
from pytest_specperf.run.stream_figures import stream_result
from pytest_specperf.sim import SimServer

PROMPT = "The river ran quietly past the old mill, and the town slept under a pale moon."


@pytest.fixture(autouse=True)
def _raw_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams read raw (off by default: capture.py says why)."""
    monkeypatch.setenv("SPECPERF_RAW_READS", "1")


def _chunked(pieces: list[bytes], trailers: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n" + trailers + b"\r\n"


@pytest.mark.parametrize("trailers", [b"", b"X-Checksum: 1\r\n"])
def test_chunked_framing_ends_where_the_body_does_at_every_split(trailers: bytes) -> None:
    pieces = [b"data: {\"a\": 1}\n\n", b"x" * 300, b"data: [DONE]\n\n"]
    wire = _chunked(pieces, trailers)
    for i in range(1, len(wire)):
        for j in range(i, len(wire), 7):
            reads = [(0.0, wire[:i]), (1.0, wire[i:j]), (2.0, wire[j:])]
            tracker = capture.Chunked()
            done_at: list[int] = []
            for k, (_, data) in enumerate(reads):
                tracker.feed(data)
                if tracker.done and not done_at:
                    done_at.append(k)
            assert done_at == [2 if j < len(wire) else 1], (i, j)
            body = b"".join(d for _, d in capture.payload(reads, capture.Chunked()))
            assert body == b"".join(pieces), (i, j)


def test_a_sized_body_ends_at_its_length_and_hands_h11_the_body() -> None:
    reads = [(0.0, b"data: a\n\n"), (1.0, b"data: [DO"), (2.0, b"NE]\n\n")]
    tracker = capture.Sized(23)
    for _, data in reads:
        assert not tracker.done
        tracker.feed(data)
    assert tracker.done and tracker.tail(reads) == b"data: a\n\ndata: [DONE]\n\n"
    assert capture.payload(reads, capture.Sized(23)) == reads


def test_a_bad_chunk_size_is_a_protocol_error() -> None:
    with pytest.raises(ValueError):
        capture.Chunked().feed(b"zz\r\nabc")


class _SseServer:
    """A real HTTP/1.1 server on a socket: answers each request with a chunked SSE body written in pieces, keeps
    connections open (or closes after one answer), and counts the connections it accepted."""

    def __init__(self, *, keep_alive: bool = True, close_mid_body: bool = False, silent_close: bool = False) -> None:
        self.keep_alive, self.close_mid_body, self.silent_close = keep_alive, close_mid_body, silent_close
        self.accepted = 0
        self.streamed_on = 0  # connections that carried at least one streamed answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            buf, streamed = b"", False
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                if head.startswith(b"GET") or b"/tokenize" in head.split(b"\r\n")[0]:
                    body = b'{"count": 1}' if b"/tokenize" in head else b'{"data": [{"id": "m"}]}'
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                 % (len(body), body))
                    continue
                self.streamed_on += not streamed
                streamed = True
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                             + (b"" if self.keep_alive else b"Connection: close\r\n") + b"\r\n")
                for i in range(5):
                    event = b'data: {"choices": [{"index": 0, "text": "w%d", "finish_reason": null}]}\n\n' % i
                    conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
                    if self.close_mid_body and i == 2:
                        return
                done = b"data: [DONE]\n\n"
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
                if not self.keep_alive or self.silent_close:  # silent: the answer said nothing of closing
                    return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def sse_server() -> Iterator[_SseServer]:
    server = _SseServer()
    yield server
    server.close()


def _client(url: str) -> Client:
    c = Client(url, model="m", timeout=5.0, kind="vllm")
    c.detect()
    return c


def test_one_connection_serves_a_users_requests_one_after_another(sse_server: _SseServer) -> None:
    with _client(sse_server.url) as c:
        outcomes = run_closed_loop(c, [StreamRequest(PROMPT, 5, seed=i) for i in range(6)], 1)
    assert [o.error for o in outcomes] == [None] * 6
    assert all(o.trace is not None and [ch.text for ch in o.trace.chunks][:2] == ["w0", "w1"] for o in outcomes)
    assert sse_server.streamed_on == 1  # one connection for the user's six streams: each body's end went to h11


def test_without_raw_reads_streams_go_through_httpx(sse_server: _SseServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECPERF_RAW_READS")
    with _client(sse_server.url) as c:
        [outcome] = run_streams(c, [StreamRequest(PROMPT, 5)])
        assert outcome.trace is not None and not capture.enabled()
        http = c.async_http()
        assert not isinstance(http._transport._pool._network_backend, capture.CaptureBackend)  # type: ignore[attr-defined]
        asyncio.run(http.aclose())


def test_a_server_that_closes_after_each_answer_gets_a_new_connection_each_time() -> None:
    server = _SseServer(keep_alive=False)
    try:
        with _client(server.url) as c:
            outcomes = run_closed_loop(c, [StreamRequest(PROMPT, 5, seed=i) for i in range(3)], 1)
        assert [o.error for o in outcomes] == [None] * 3
        assert server.streamed_on == 3  # one per stream
    finally:
        server.close()


def test_a_body_cut_before_its_end_is_named() -> None:
    server = _SseServer(close_mid_body=True)
    try:
        with _client(server.url) as c:
            [outcome] = run_streams(c, [StreamRequest(PROMPT, 5)])
        assert outcome.error is not None and str(outcome.error).startswith("stream cut after 3 tokens"), outcome.error
    finally:
        server.close()


@pytest.mark.parametrize(("fault", "said"), [("disconnect@40", "stream cut after"),
                                             ("stall={stall}@60", "stalled: no data for 2 s after")])
def test_a_cut_and_a_stall_on_the_simulator_are_named(speed: float, fault: str, said: str) -> None:
    # a stall of 8 model seconds times the speed: 8 s of real time, past the 2 s timeout
    with SimServer("healthy", speed=speed, overrides={"faults": fault.format(stall=8 * speed)}) as sim, \
            Client(sim.url, timeout=2.0) as c:
        c.detect()
        [outcome] = run_streams(c, [StreamRequest(PROMPT, 200)])
    assert outcome.error is not None and str(outcome.error).startswith(said), outcome.error


def test_a_listener_that_accepts_nothing_is_a_connect_timeout_and_a_closed_port_a_connect_error() -> None:
    backend = capture.CaptureBackend()
    with socket.socket() as lsock, socket.socket() as filler:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(0)
        filler.connect(lsock.getsockname())
        with pytest.raises(httpcore.ConnectTimeout):
            asyncio.run(backend.connect_tcp("127.0.0.1", lsock.getsockname()[1], timeout=0.3))
        port = lsock.getsockname()[1]
    with pytest.raises(httpcore.ConnectError):
        asyncio.run(backend.connect_tcp("127.0.0.1", port, timeout=1.0))


def test_counts_on_http_client_are_the_servers_own(healthy_sim: SimServer) -> None:
    with Client(healthy_sim.url) as c:
        c.detect()
        assert c._light.usable
        for text in ("hello", PROMPT, PROMPT * 40):
            on_httpx = c.http.post("/tokenize", json={"model": c.model, "prompt": text}).json()["count"]
            assert c.count_tokens(text) == on_httpx


def test_a_proxy_in_the_environment_keeps_counts_on_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert not LightPost("http://10.1.2.3:8000", (), {}, 5.0, 5.0, None).usable
    monkeypatch.setenv("NO_PROXY", "10.1.2.3")
    assert LightPost("http://10.1.2.3:8000", (), {}, 5.0, 5.0, None).usable
    assert not LightPost("http://u:p@10.1.2.3:8000", (), {}, 5.0, 5.0, None).usable


def test_a_kept_open_connection_the_server_closed_is_opened_again() -> None:
    server = _SseServer(silent_close=True)  # closes after each answer without saying so
    try:
        post = LightPost(server.url, (), {}, 5.0, 5.0, None)
        assert post.post("/v1/completions", b"{}").status_code == 200
        # the kept connection is closed by now: the request fails on it and goes once more on a new one
        assert post.post("/v1/completions", b"{}").status_code == 200
        assert server.accepted == 2
        post.close()
    finally:
        server.close()


def test_a_closed_port_is_a_connect_error_for_counts() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        LightPost(f"http://127.0.0.1:{port}", (), {}, 5.0, 5.0, None).post("/tokenize", b"{}")


def test_a_stream_read_in_one_go_is_no_rate_and_says_why(speed: float) -> None:
    # A buffering proxy holds every event and sends them at once: one read, one stamp, no decode span to time.
    with SimServer("healthy", speed=speed, overrides={"faults": "hold=1000@0"}) as sim, Client(sim.url) as c:
        c.detect()
        [outcome] = run_streams(c, [StreamRequest(PROMPT, 40)])
    assert outcome.trace is not None and len({ch.t for ch in outcome.trace.chunks}) == 1
    with pytest.raises(MeasurementError, match=r"^all 40 tokens \(\d+ chunks\) arrived in one read: no decode span"):
        stream_result(outcome.trace)


def test_counts_keep_the_urls_query_and_the_key(speed: float) -> None:
    # a simulator of its own: the shared one's record holds other tests' counts
    with SimServer("healthy", speed=speed) as sim, Client(f"{sim.url}?api-version=Q1", api_key="key-7") as c:
        c.detect()
        assert c._light.usable
        c.count_tokens("hello there")
        counts = [r for r in sim.seen() if r["path"].endswith("/tokenize")]
    assert counts and all(r["query"] == "api-version=Q1" and r["authorization"] == "Bearer key-7" for r in counts)
