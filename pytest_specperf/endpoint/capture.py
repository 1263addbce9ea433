"""A network backend for httpcore on asyncio protocols, whose streamed bodies are read raw.

httpx reads a streamed body one network read at a time through httpcore, h11 and anyio: about 90 us of the
client's CPU per read (a 162-request replay made 38,000 reads: 3.4 s). Under it, this backend's connections
are plain ``asyncio.Protocol`` objects. Everything up to a response's headers goes through httpx as before
(connects, TLS, proxies' absence, retries, status and error mapping); then :meth:`CaptureStream.capture` takes
the body over: each ``data_received`` stamps its bytes with the clock and keeps them, a few microseconds a
read, and a small framing tracker (chunked or ``Content-Length``) says when the body has ended. The framing
is taken off (:func:`payload`) only once every stream of a run has ended, as the SSE parsing already was.

After a captured body, h11 (which never saw it) is handed just the end of the framing, so it ends the
response cleanly and the connection goes back to the pool for the next request, as an uncaptured one would.

Off unless ``SPECPERF_RAW_READS=1`` (:func:`enabled`): events that arrive in one read share its stamp, as they did
arrive together, where httpx's per-chunk reads gave each a later stamp by its parsing time. A short stream a busy
client read in one go then has no decode span at all, and such a stream is refused ("too few to measure") where
it used to read a rate of tens of thousands of tokens a second; the whole-stream span rule (a rate from a span
too short to time is no figure) must come first. docs/benchmarks.md has the CPU it saves.

While a response's headers are awaited a read hands h11 no byte past their end, so no body byte is ever
buffered inside h11 where a capture could not see it (a read cut short only splits bytes, never loses them).
"""

from __future__ import annotations

import asyncio
import collections
import os
import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

_HEAD_END = b"\r\n\r\n"
#: Bytes that end a chunked body for h11 (the last chunk, no trailers), handed over after a capture.
_LAST_CHUNK = b"0\r\n\r\n"
#: A server's end of stream; a body still open after it ends the read there (the connection is then dropped).
_DONE = b"[DONE]"


class Framing:
    """Where a body ends, fed its bytes read by read; ``done`` once its last byte came. ``payload`` (a list) collects
    the body's own bytes, the framing taken off, where given."""

    done = False

    def tail(self, reads: list[tuple[float, bytes]]) -> bytes:
        """What h11 is handed after a capture of ``reads`` to end the response the same way (b"": nothing)."""
        return b""

    def feed(self, data: bytes, payload: list[bytes] | None = None) -> None:
        """Take one read's bytes."""
        raise NotImplementedError


class Chunked(Framing):
    """``Transfer-Encoding: chunked``: sizes in hex lines, each chunk's data and CRLF, a zero chunk, trailers."""

    def __init__(self) -> None:
        self.data = 0  # bytes of the current chunk's data still to come
        self.crlf = 0  # bytes of its closing CRLF still to come
        self.line = b""  # a size (or trailer) line read in part
        self.last = False  # the zero chunk was read: trailer lines until an empty one

    def feed(self, data: bytes, payload: list[bytes] | None = None) -> None:
        """Take one read's bytes (a malformed size line raises ValueError)."""
        i, n = 0, len(data)
        while i < n and not self.done:
            if self.data:
                take = min(self.data, n - i)
                if payload is not None:
                    payload.append(data[i:i + take])
                self.data -= take
                i += take
            elif self.crlf:
                take = min(self.crlf, n - i)
                self.crlf -= take
                i += take
            else:
                j = data.find(b"\n", i)
                if j < 0:
                    self.line += data[i:]
                    return
                line, self.line, i = self.line + data[i:j], b"", j + 1
                if self.last:
                    self.done = not line.strip()
                    continue
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size < 0:
                    raise ValueError(f"negative chunk size {size}")
                self.last = size == 0
                self.data, self.crlf = size, 2 if size else 0

    def tail(self, reads: list[tuple[float, bytes]]) -> bytes:
        """The last chunk alone: h11 never saw the others, so it ends the body there."""
        return _LAST_CHUNK


class Sized(Framing):
    """``Content-Length``: that many bytes."""

    def __init__(self, length: int) -> None:
        self.length = self.left = length
        self.done = length == 0

    def tail(self, reads: list[tuple[float, bytes]]) -> bytes:
        """The body itself: h11 counts its length (joined once, here, not read by read)."""
        return b"".join(data for _, data in reads)[:self.length]

    def feed(self, data: bytes, payload: list[bytes] | None = None) -> None:
        """Take one read's bytes."""
        take = data[:self.left]
        if payload is not None:
            payload.append(take)
        self.left -= len(take)
        self.done = self.left == 0


class UntilClose(Framing):
    """Neither: the body ends when the server closes the connection."""

    def feed(self, data: bytes, payload: list[bytes] | None = None) -> None:
        """Take one read's bytes."""
        if payload is not None:
            payload.append(data)


def framing_of(headers: httpx.Headers) -> Framing | None:
    """The framing of a response's body from its headers; None where its bytes are not the body as sent (a
    content encoding), so it must be read through httpx."""
    if headers.get("content-encoding", "identity").lower() != "identity":
        return None
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return Chunked()
    length = headers.get("content-length")
    if length is not None:
        return Sized(int(length)) if length.strip().isdigit() else None
    return UntilClose()


def payload(reads: Iterable[tuple[float, bytes]], framing: Framing) -> list[tuple[float, bytes]]:
    """Captured reads with their framing taken off: each read's share of the body, with its stamp (reads that held
    only framing bytes are left out). ``framing``: a fresh tracker of the same kind."""
    out: list[tuple[float, bytes]] = []
    for t, data in reads:
        pieces: list[bytes] = []
        framing.feed(data, pieces)
        body = b"".join(pieces)
        if body:
            out.append((t, body))
    return out


class Capture:
    """One body being captured: its stamped reads and when it ended."""

    def __init__(self, framing: Framing, reads: list[tuple[float, bytes]], ended: asyncio.Future[None]) -> None:
        self.framing = framing
        self.reads = reads
        self.ended = ended
        self.last = time.perf_counter()  # of the latest read (of the capture's start before any)
        self.end = self.last  # time.perf_counter() of the read that ended the body

    def take(self, t: float, data: bytes) -> None:
        """One read's bytes (in the protocol's callback: kept short)."""
        self.reads.append((t, data))
        self.last = t
        try:
            self.framing.feed(data)
        except ValueError as exc:
            self.fail(httpx.RemoteProtocolError(f"malformed chunked body ({exc})"))
            return
        if self.framing.done or _DONE in data[-24:]:  # after [DONE], the framing's end may come in the next read
            self._end()

    def close(self, exc: BaseException | None) -> None:
        """The connection ended: the body's end for a body that lasts until then, else a cut."""
        if isinstance(self.framing, UntilClose) and exc is None:
            self.framing.done = True
            self._end()
        else:
            self.fail(httpx.RemoteProtocolError(
                f"peer closed connection without sending complete message body{f' ({exc})' if exc else ''}"))

    def fail(self, exc: BaseException) -> None:
        if not self.ended.done():
            self.ended.set_exception(exc)

    def _end(self) -> None:
        if not self.ended.done():
            self.end = self.last
            self.ended.set_result(None)


class _Protocol(asyncio.Protocol):
    """One connection's bytes, stamped as they arrive; handed to reads, or to a capture while one is armed."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pending: collections.deque[tuple[float, bytes]] = collections.deque()
        self.waiter: asyncio.Future[None] | None = None
        self.drained: asyncio.Future[None] | None = None  # set while writing is paused
        self.closed = False
        self.error: BaseException | None = None
        self.capture: Capture | None = None
        self.heading = False  # a response's headers are awaited: reads end at their end
        self.head_tail = b""  # the last bytes handed out while heading (an end of headers split over reads)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        if self.capture is not None:
            self.capture.take(t, data)
            return
        self.pending.append((t, data))
        self._wake()

    def eof_received(self) -> bool | None:
        self._ended(None)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    def _ended(self, exc: BaseException | None) -> None:
        if self.closed:
            return
        self.closed, self.error = True, exc
        if self.capture is not None:
            self.capture.close(exc)
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class CaptureStream(httpcore.AsyncNetworkStream):
    """An httpcore network stream over a :class:`_Protocol`; :meth:`capture` reads a response's body raw."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self.transport, self.protocol = transport, protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """The next bytes received (b"" at the end), at most up to the end of the headers being awaited."""
        p = self.protocol
        if not p.pending and not p.closed:
            p.waiter = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await p.waiter
            except TimeoutError:
                raise httpcore.ReadTimeout("no data within the read timeout") from None
            finally:
                p.waiter = None
        if not p.pending:
            if p.error is not None:
                raise httpcore.ReadError(str(p.error) or type(p.error).__name__)
            return b""
        t, data = p.pending.popleft()
        if len(data) > max_bytes:
            p.pending.appendleft((t, data[max_bytes:]))
            data = data[:max_bytes]
        if p.heading:
            seen = p.head_tail + data
            end = seen.find(_HEAD_END)
            if end >= 0:
                cut = end + len(_HEAD_END) - len(p.head_tail)
                if cut < len(data):
                    p.pending.appendleft((t, data[cut:]))
                    data = data[:cut]
                p.heading, p.head_tail = False, b""
            else:
                p.head_tail = seen[-(len(_HEAD_END) - 1):]
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send ``buffer`` (waiting while the kernel's buffer is full); a response's headers are awaited after it."""
        p = self.protocol
        if p.closed:
            raise httpcore.WriteError(str(p.error or "connection closed"))
        p.heading, p.head_tail = True, b""
        self.transport.write(buffer)
        if p.drained is not None:
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(p.drained)
            except TimeoutError:
                raise httpcore.WriteTimeout("the request could not be written within the write timeout") from None

    async def aclose(self) -> None:
        """Close the connection."""
        self.transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        """The same connection over TLS."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(self.transport, self.protocol, ssl_context,
                                                 server_hostname=server_hostname)
        except TimeoutError:
            self.transport.close()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except (OSError, ssl.SSLError) as exc:
            self.transport.close()
            raise httpcore.ConnectError(str(exc)) from None
        assert transport is not None
        self.protocol.transport = transport
        return CaptureStream(transport, self.protocol)

    def get_extra_info(self, info: str) -> Any:
        """What httpcore asks of a stream: the TLS object, addresses, the socket, whether it is readable."""
        if info == "is_readable":  # an idle connection the server closed reads as readable (then b"")
            return bool(self.protocol.pending) or self.protocol.closed
        key = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername",
               "socket": "socket"}.get(info)
        return self.transport.get_extra_info(key) if key else None

    def capture(self, framing: Framing) -> Capture:
        """From now on, every byte of this connection is the response body's: stamped and kept (with what arrived
        since the headers), until ``framing`` says it ended (``Capture.ended``)."""
        p = self.protocol
        cap = Capture(framing, [], asyncio.get_running_loop().create_future())
        p.capture = cap
        while p.pending and not cap.ended.done():
            cap.take(*p.pending.popleft())
        if p.closed:
            cap.close(p.error)
        return cap

    def release(self, cap: Capture) -> bool:
        """End a capture. True when the body ended by its framing, so h11 can be handed its end (:meth:`read` gives
        it) and the connection reused; False when the connection must be closed."""
        p = self.protocol
        p.capture = None
        if not cap.framing.done or not cap.ended.done() or cap.ended.exception() is not None or p.closed:
            return False
        if tail := cap.framing.tail(cap.reads):
            p.pending.appendleft((cap.last, tail))
        return True


class CaptureBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on asyncio protocols (TCP and Unix sockets)."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        """A TCP connection (its connect bounded by ``timeout``)."""
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        return await _connected(loop.create_connection(_Protocol, host, port, local_addr=local), timeout,
                                socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        """A Unix-socket connection."""
        loop = asyncio.get_running_loop()
        return await _connected(loop.create_unix_connection(_Protocol, path), timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        """Sleep on the event loop."""
        await asyncio.sleep(seconds)


async def _connected(connect: Any, timeout: float | None, socket_options: Iterable[Any] | None) -> CaptureStream:
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await connect
    except TimeoutError:
        raise httpcore.ConnectTimeout("connect timed out") from None
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from None
    sock = transport.get_extra_info("socket")
    for option in socket_options or ():
        sock.setsockopt(*option)
    return CaptureStream(transport, protocol)


def enabled() -> bool:
    """Whether streams are read raw (``SPECPERF_RAW_READS=1`` in the environment; off by default)."""
    return os.environ.get("SPECPERF_RAW_READS", "") == "1"


def transport(verify: Any, limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx's transport with its connection pool on :class:`CaptureBackend` (httpx's own backend where the pool
    does not take one: a body is then read through httpx, as ``capture`` callers fall back to)."""
    out = httpx.AsyncHTTPTransport(verify=verify, limits=limits)
    pool = getattr(out, "_pool", None)
    if isinstance(pool, httpcore.AsyncConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = CaptureBackend()
    return out
