"""When a request reached the simulator: stamped as its first bytes are read off the socket.

aiohttp runs a request's handler only once the event loop gets to it. When several requests arrive
together, each handler starts after the earlier ones have parsed and tokenized their prompts (0.5 to
1 ms each, several ms on a busy machine), so a clock started in the handler misses a wait that the
client sees, and it misses more the later a request is in the queue (in one measurement at 4 users
beside two CPU hogs, the plugin's TTFT was 1.5, 2.4, 4.8 and 5.4 ms above the truth's in send
order; docs/benchmarks.md). The truth's ``arrival`` is therefore taken here, by a thin protocol
in front of aiohttp's own that notes when the pending request's first bytes came in. The handler
reads it (:func:`arrival_of`) and the routes' middleware clears it when the request is done
(:func:`request_done`), so the next request on a kept-alive connection is stamped by its own bytes.

That protocol still runs on the event loop, so a loop busy elsewhere (a long prompt tokenized, a hundred
streams written, a busy machine scheduling the process late) read the bytes late and stamped them late:
replaying 162 long prompts at ten times the trace's pace put the stamp 130-250 ms behind the senders. On
Linux the stamp is therefore the kernel's own: every accepted socket asks for receive timestamps
(``SO_TIMESTAMPNS``) and is read with ``recvmsg``, so the time the bytes reached the socket comes with them,
whenever the loop gets to read them (:class:`StampedSocket`; converted from the wall clock the kernel gives to
``time.monotonic``). Elsewhere the read time stands in.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import struct
import sys
import time
from typing import Any

from aiohttp import web

#: Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS): receive times in ns with each read (Python names neither).
_SO_TIMESTAMPNS = 35
KERNEL_STAMPS = sys.platform.startswith("linux")
_ANCILLARY = socket.CMSG_SPACE(16)


class StampedSocket(socket.socket):
    """An accepted socket whose reads keep the kernel's receive time of the bytes they return (``stamp``)."""

    stamp: float | None = None  # time.monotonic() of the last read's bytes reaching the socket

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(bufsize, _ANCILLARY, flags)
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack("qq", raw[:16])
                # The kernel stamps in wall time; the truth's clock is monotonic (the client's, on one host).
                self.stamp = sec + nsec * 1e-9 - (time.time() - time.monotonic())
        return data


class StampedProtocol(asyncio.Protocol):
    """aiohttp's connection protocol, plus ``arrival``: when the pending request's first bytes were read."""

    def __init__(self, inner: asyncio.Protocol, sock: StampedSocket | None = None) -> None:
        self.inner = inner
        self.sock = sock  # the kernel's receive time of each read, where it gives one
        self.arrival: float | None = None  # None between requests
        self.read_at: float | None = None  # when the loop read those bytes (= arrival without kernel stamps)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.arrival is None:  # stamped before aiohttp parses anything, so its work is after it
            stamp = self.sock.stamp if self.sock is not None else None
            self.read_at = time.monotonic()
            self.arrival = self.read_at if stamp is None else min(stamp, self.read_at)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def arrival_of(request: web.Request) -> float:
    """When the loop read ``request``'s first bytes, before any handler's work (now, where it came in through another
    listener, e.g. a test client): the truth's ``arrival_monotonic``, from which every step time counts."""
    protocol = _protocol(request)
    stamp = protocol.read_at if protocol is not None else None
    return time.monotonic() if stamp is None else stamp


def received_of(request: web.Request) -> float | None:
    """When ``request``'s first bytes reached the socket: on Linux the kernel's receive time, which a busy event loop
    cannot delay (the truth's ``received_monotonic``, what a replay's send fidelity is judged by); else the loop's
    read; None where it came in through another listener."""
    protocol = _protocol(request)
    return protocol.arrival if protocol is not None else None


def request_done(request: web.Request) -> None:
    """Clear the stamp once a request's handler is done with it (its body read): the next bytes are a new request."""
    protocol = _protocol(request)
    if protocol is not None:
        protocol.arrival = protocol.read_at = None


def _protocol(request: web.Request) -> StampedProtocol | None:
    transport = request.transport
    protocol = transport.get_protocol() if transport is not None else None
    return protocol if isinstance(protocol, StampedProtocol) else None


class Listener:
    """The listening socket and its accept loop (what ``listen`` returns; ``close`` stops both)."""

    def __init__(self, sock: Any, task: asyncio.Task[None] | None = None,
                 server: asyncio.Server | None = None) -> None:
        self.sockets: list[Any] = [sock]
        self._task, self._server = task, server

    def close(self) -> None:
        """Stop accepting (open connections stay until the runner's cleanup)."""
        if self._server is not None:
            self._server.close()
        if self._task is not None:
            self._task.cancel()
            self.sockets[0].close()


async def listen(runner: web.AppRunner, host: str, port: int, **kwargs: Any) -> Listener:
    """Serve ``runner``'s application on ``host:port`` with every connection stamped (in place of a TCPSite).

    On Linux each accepted socket carries the kernel's receive times (:class:`StampedSocket`); elsewhere the
    loop's own server stamps each first read. ``runner.cleanup()`` still closes the connections; the caller
    closes the returned listener.
    """
    server = runner.server
    if server is None:
        raise RuntimeError("call runner.setup() before listen()")
    loop = asyncio.get_running_loop()
    if not KERNEL_STAMPS:
        def factory() -> asyncio.Protocol:
            return StampedProtocol(server())

        srv = await loop.create_server(factory, host, port, **kwargs)
        return Listener(srv.sockets[0], server=srv)
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    lsock = socket.socket(info[0], socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # On the listener too, so the kernel stamps a connection's bytes from the first (the accepted socket inherits it),
    # even where they came before a busy loop accepted it.
    lsock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    lsock.bind(info[4])
    lsock.listen(int(kwargs.get("backlog", 100)))
    lsock.setblocking(False)

    async def accept() -> None:
        while True:
            conn, _ = await loop.sock_accept(lsock)
            sock = StampedSocket(conn.family, conn.type, conn.proto, fileno=conn.detach())
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.connect_accepted_socket(functools.partial(StampedProtocol, server(), sock), sock)

    return Listener(lsock, task=asyncio.create_task(accept()))
