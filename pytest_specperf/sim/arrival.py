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
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web


class StampedProtocol(asyncio.Protocol):
    """aiohttp's connection protocol, plus ``arrival``: when the pending request's first bytes were read."""

    def __init__(self, inner: asyncio.Protocol) -> None:
        self.inner = inner
        self.arrival: float | None = None  # None between requests

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.arrival is None:  # stamped before aiohttp parses anything, so its work is after it
            self.arrival = time.monotonic()
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
    """When ``request``'s first bytes were read (now, where it came in through another listener, e.g. a test client)."""
    protocol = _protocol(request)
    stamp = protocol.arrival if protocol is not None else None
    return time.monotonic() if stamp is None else stamp


def request_done(request: web.Request) -> None:
    """Clear the stamp once a request's handler is done with it (its body read): the next bytes are a new request."""
    protocol = _protocol(request)
    if protocol is not None:
        protocol.arrival = None


def _protocol(request: web.Request) -> StampedProtocol | None:
    transport = request.transport
    protocol = transport.get_protocol() if transport is not None else None
    return protocol if isinstance(protocol, StampedProtocol) else None


async def listen(runner: web.AppRunner, host: str, port: int, **kwargs: Any) -> asyncio.Server:
    """Serve ``runner``'s application on ``host:port`` with every connection stamped (in place of a TCPSite).

    ``runner.cleanup()`` still closes the connections; the caller closes the returned server.
    """
    server = runner.server
    if server is None:
        raise RuntimeError("call runner.setup() before listen()")
    def factory() -> asyncio.Protocol:
        return StampedProtocol(server())

    return await asyncio.get_running_loop().create_server(factory, host, port, **kwargs)
