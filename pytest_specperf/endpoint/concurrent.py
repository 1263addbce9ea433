"""Many timed streams at once, in one process: the client side of load cases.

:func:`run_streams` sends each :class:`StreamRequest` at its scheduled time (``at_s`` seconds after
a common origin) over one ``httpx.AsyncClient`` and returns a :class:`StreamOutcome` per request,
in order, each with the same :class:`~pytest_specperf.endpoint.sse.Trace` the sync client returns, so
``measure.stream_result`` measures every stream unchanged.

Exact time under load: while streams are open, the only work done per network read is a clock
read and an append. SSE framing, JSON and token counting run once every stream of the run has
ended, so no stream's parsing delays another's timestamps (parsing each stream as it ended put
the last chunks of 64 streams finishing together 35 ms late). An event is stamped with the read
that completed it; events that arrived in one read share its time, as they did arrive together.

Scheduling: requests with ``at_s`` in the future wait on the event loop's timer, so open-loop
arrivals (a Poisson schedule, a fixed rate) are a list of requests with increasing ``at_s``; each
outcome records how late it was actually sent (``sent_s`` against ``at_s``). A scheduled request sets
out ``LEAD_S`` before its time (its body encoded, a connection taken or opened, everything up to the
write of its headers) and waits there for its time: done at its time, that work took a busy loop
10-40 ms, the TCP connect alone several loop turns. ``sent_s`` is when its headers went to the socket
(``SentClock``), so any delay of the client's own (event-loop lag, a connect slower than the lead)
still counts as lateness, never as the server's time.

Warm-up: before the origin is taken, one streamed GET goes through a throwaway async client, so
the one-time costs of the first async request in a process (importing the async network backend)
are paid off the clock, while every measured request still opens its own connection alike.

Errors: one stream's failure does not stop the others; it is the outcome's ``error`` (a one-line
MeasurementError), and :func:`traces` raises the first one for callers that need every stream.

Example::

    reqs = [StreamRequest(prompt=p, max_tokens=300, seed=i, at_s=0.5 * i) for i, p in enumerate(prompts)]
    outcomes = run_streams(client, reqs)
    results = [measure.stream_result(o.trace) for o in outcomes if o.trace]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from pytest_specperf.endpoint import capture
from pytest_specperf.endpoint.client import HEADERS_SENT, Client, SentClock
from pytest_specperf.endpoint.sse import Trace, TraceBuilder, paused_gc, split_events
from pytest_specperf.errors import MeasurementError

T = TypeVar("T")


@dataclass(frozen=True)
class StreamRequest:
    """One streamed completion to send at ``at_s`` seconds after the run's origin."""

    prompt: str
    max_tokens: int
    api: str = "completions"
    seed: int = 0
    temperature: float = 0.0
    at_s: float = 0.0
    messages: tuple[Mapping[str, str], ...] | None = None  # chat: the conversation to send (else ``prompt``)
    salt: str | None = None  # prefix-cache namespace (Client.body); None: the client's default, a fresh one


@dataclass
class StreamOutcome:
    """What became of one request: its trace, or the error that stopped it."""

    request: StreamRequest
    trace: Trace | None
    error: MeasurementError | None
    sent_s: float  # when it was actually sent, seconds after the origin (>= request.at_s)
    origin: float  # time.perf_counter() of the run's origin, shared by every outcome of a run
    user: int = 0  # closed loop (``run_closed_loop``): the user that sent it; else its index in the run
    #: Of its lateness, how long the sending thread sat runnable while the kernel ran something else (``starved``);
    #: None where unknown (no scheduled wait, or a kernel without per-thread schedstat).
    starved_s: float | None = None

    @property
    def late_s(self) -> float:
        """How much later than scheduled the request went out (event-loop lag)."""
        return self.sent_s - self.request.at_s


#: Called on the event loop as each stream ends (a worker's heartbeat counts them, ``scale/remote.py``).
Ended = Callable[[], None]


def run_streams(client: Client, requests: Sequence[StreamRequest], *, origin: float | None = None,
                ended: Ended | None = None) -> list[StreamOutcome]:
    """Send every request at its ``at_s`` (after ``origin``, default now) and read all streams at once.

    Blocks until every stream has ended. ``client`` supplies URL, model, key, timeout, retries and
    the detected server (detected here if it was not yet). Safe to call from inside a running event
    loop (it then runs in a worker thread). ``ended``: called as each stream ends (read or failed).
    """
    client.info or client.detect()
    return _run_loop(lambda: _run(client, list(requests), origin, ended))


def _run_loop(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` on an event loop of its own, in a worker thread when the caller is inside a loop already."""

    def go() -> T:
        with paused_gc():  # a full collection mid-run would stamp every stream's events late
            return asyncio.run(main())

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return go()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(go).result()


def traces(outcomes: Sequence[StreamOutcome]) -> list[Trace]:
    """Every outcome's trace, or the first error (by request order) raised."""
    for o in outcomes:
        if o.error is not None:
            raise o.error
    return [o.trace for o in outcomes if o.trace is not None]


def run_closed_loop(client: Client, requests: Sequence[StreamRequest], concurrency: int, *,
                    origin: float | None = None, ended: Ended | None = None) -> list[StreamOutcome]:
    """``concurrency`` users work through ``requests`` in order, each sending the next one as soon as its
    previous stream ended, so that many stay in flight until the list runs out (refill).

    The first ``concurrency`` requests go at their own ``at_s`` (a ramp); a refill is due when its user's
    previous stream ended (its last read), so its lateness is the client's turnaround. Streams are parsed
    once every stream has ended, as in ``run_streams``. Outcomes come back in request order, each with its
    ``user``. ``origin``, ``ended``: as for ``run_streams``.
    """
    client.info or client.detect()
    users = max(1, min(concurrency, len(requests)))
    return _run_loop(lambda: _run_closed(client, list(requests), users, origin, ended))


async def _run_closed(client: Client, requests: list[StreamRequest], users: int, origin: float | None = None,
                      ended: Ended | None = None) -> list[StreamOutcome]:
    limits = httpx.Limits(max_connections=users, max_keepalive_connections=users)
    timeout = httpx.Timeout(client.timeout, connect=min(client.timeout, 10.0))
    done: list[tuple[StreamOutcome, _Raw | None] | None] = [None] * len(requests)
    queue = iter(range(len(requests)))  # one shared cursor: the next free user takes the next request
    async with client.async_http(timeout=timeout, limits=limits) as http:
        await _warm(client, timeout)
        start = time.perf_counter() if origin is None else origin

        async def user(u: int) -> None:
            due: float | None = None  # when this user's previous stream ended: its refill was due then
            for i in queue:
                req = requests[i]
                if due is not None:  # a refill: any delay past the last stream's end is the client's turnaround
                    req = dataclasses.replace(req, at_s=due)
                outcome, raw = await _one(client, http, req, start, ended=ended)
                outcome.user = u
                done[i] = (outcome, raw)
                due = (raw.t0 + raw.total_s if raw is not None else time.perf_counter()) - start

        await asyncio.gather(*(user(u) for u in range(users)))
    return [_parsed(client, outcome, raw) for outcome, raw in (d for d in done if d is not None)]


#: A session's next request: (turn index, the outcomes of its turns so far) -> the request, or None when done.
NextTurn = Callable[[int, list[StreamOutcome]], StreamRequest | None]


def run_sessions(client: Client, sessions: Sequence[NextTurn], *, think_s: float = 0.0, origin: float | None = None,
                 ended: Ended | None = None) -> list[list[StreamOutcome]]:
    """Conversations at once: each session sends a turn, waits for its whole answer, thinks ``think_s``, asks again.

    A turn depends on the answers before it, so each session's next request comes from its
    ``NextTurn`` once the previous trace is parsed; sessions run side by side on one event loop.
    A session's ``at_s`` of its first request staggers its start; later turns go when they are
    ready (their ``sent_s`` is still when they reached the network). A failed turn ends its session.
    ``origin``: as for ``run_streams`` (default now); ``ended``: called as each turn ends.
    """
    client.info or client.detect()
    return _run_loop(lambda: _run_sessions(client, list(sessions), think_s, origin, ended))


async def _run_sessions(client: Client, sessions: list[NextTurn], think_s: float, origin: float | None = None,
                        ended: Ended | None = None) -> list[list[StreamOutcome]]:
    n = max(len(sessions), 1)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    timeout = httpx.Timeout(client.timeout, connect=min(client.timeout, 10.0))
    async with client.async_http(timeout=timeout, limits=limits) as http:
        await _warm(client, timeout)
        start = time.perf_counter() if origin is None else origin

        async def one(next_turn: NextTurn) -> list[StreamOutcome]:
            done: list[StreamOutcome] = []
            while (req := next_turn(len(done), done)) is not None:
                if done:
                    await asyncio.sleep(think_s)
                    # later turns go when ready: their schedule is "now", so lateness stays the client's own
                    req = dataclasses.replace(req, at_s=time.perf_counter() - start)
                outcome, raw = await _one(client, http, req, start, ended=ended)
                # Parsed at once (the next turn needs this answer), in a worker thread: counting text chunks
                # may ask the server's tokenizer, which must not hold up the other sessions' timestamps.
                done.append(await asyncio.to_thread(_parsed, client, outcome, raw))
                if done[-1].error is not None:
                    break
            return done

        return list(await asyncio.gather(*(one(s) for s in sessions)))


@dataclass
class _Raw:
    """One stream as read: timestamped raw reads, parsed only once every stream has ended."""

    path: str
    t0: float
    total_s: float
    reads: list[tuple[float, bytes]]  # (seconds after t0, bytes); captured: (time.perf_counter(), framed bytes)
    starved_s: float | None = None
    framing: capture.Framing | None = None  # captured: a fresh tracker of its framing, to take it off after


async def _run(client: Client, requests: list[StreamRequest], origin: float | None, ended: Ended | None = None
               ) -> list[StreamOutcome]:
    limits = httpx.Limits(max_connections=max(len(requests), 1), max_keepalive_connections=max(len(requests), 1))
    timeout = httpx.Timeout(client.timeout, connect=min(client.timeout, 10.0))
    async with client.async_http(timeout=timeout, limits=limits) as http:
        await _warm(client, timeout)
        bodies = [_encoded(client, r) for r in requests]  # before the origin: none is encoded beside a send
        # The origin is LEAD_S ahead, so a request due at it sets out as early as every later one.
        start = time.perf_counter() + LEAD_S if origin is None else origin
        tasks = [asyncio.create_task(_one(client, http, r, start, b, ended))
                 for r, b in zip(requests, bodies, strict=True)]
        done = await asyncio.gather(*tasks)
    # Parsing waits until the last stream ended: done per stream as it ends, it would hold up the
    # event loop while other streams' chunks arrive (with 64 streams ending together, by tens of ms).
    return [_parsed(client, outcome, raw) for outcome, raw in done]


async def _warm(client: Client, timeout: httpx.Timeout) -> None:
    """One streamed request before the clock starts: the first async send in a process imports the
    network backend (tens of ms, seen as 0.0 attainment on a loaded machine).

    It goes through a client of its own, closed after: a connection it left in the measured
    client's pool would give one request a head start (no connect) over the others.
    """
    try:
        async with client.async_http(timeout=timeout) as http, \
                http.stream("GET", "/v1/models", extensions={"trace": _ignore}) as resp:
            async for _ in resp.aiter_bytes():
                pass
    except httpx.HTTPError:
        pass  # the measured requests will name the problem


async def _ignore(name: str, info: dict[str, Any]) -> None:
    """A trace callback that records nothing (exercises the traced path during warm-up)."""


#: The event loop's own sleep, for the schedule's waits (a test may stand in for ``asyncio.sleep`` to count retry
#: waits; the schedule still keeps time).
_sleep = asyncio.sleep
#: How early a scheduled request sets out: it builds its body, takes a connection (opening one) and reaches the
#: point of writing its headers this long before its time, then waits there and writes them on time. Done at its
#: time instead, that work took a busy event loop 10-40 ms (a TCP connect alone is several loop turns).
LEAD_S = 0.25
#: From this long before its time, the sending thread's run-queue wait is watched (``starved``): what of a late
#: send the host's scheduler caused (the thread runnable, the CPU given to another process), not the client's loop.
WATCH_S = 0.02
#: The last part of that wait is spent yielding to the event loop turn by turn: the loop's timers wake on whole
#: milliseconds (epoll), late by up to one.
SPIN_S = 0.001


class _GatedClock(SentClock):
    """A ``SentClock`` that holds the headers back until ``due`` (``time.perf_counter()``), then stamps them, and
    watches the sending thread's run-queue wait (``starved``) until its body is written too."""

    def __init__(self, due: float, set_out: float | None = None) -> None:
        super().__init__()
        self.due = due
        self.set_out = set_out  # ``starved()`` when the request set out for its write
        self.watched: float | None = None  # ``starved()`` where the watch began
        self.starved: float | None = None

    async def atrace(self, name: str, info: dict[str, Any]) -> None:
        """Before the headers' write (httpcore awaits this, then writes at once): wait for ``due``, then stamp.
        After the body's write: the run-queue wait since the watch began (the bytes are out only then)."""
        if self.at is None and name.endswith(HEADERS_SENT):
            # watched from WATCH_S before its time; from when it set out, if it got here later than that
            self.watched = self.set_out
            if (wait := self.due - time.perf_counter()) > WATCH_S:
                await _sleep(wait - WATCH_S)
                self.watched = starved()
            if (wait := self.due - time.perf_counter()) > SPIN_S:
                await _sleep(wait - SPIN_S)
            while time.perf_counter() < self.due:  # the last stretch by loop turns: a timer wakes up to 1 ms late
                await _sleep(0)
        elif name.endswith(BODY_SENT) and self.watched is not None and (now := starved()) is not None:
            self.starved = now - self.watched
        self(name, info)


#: httpcore's trace event once a request's body is written: its last byte is with the kernel.
BODY_SENT = "send_request_body.complete"
_SCHEDSTAT = "/proc/thread-self/schedstat"
_schedstat_ok = True


class _StatFile:
    """One thread's schedstat file, kept open (a ``pread`` is a tenth of an open-read-close, which matters in the loop
    turn where a burst of requests is written); closed when its thread ends and drops it."""

    def __init__(self) -> None:
        self.fd = os.open(_SCHEDSTAT, os.O_RDONLY)

    def __del__(self) -> None:
        os.close(self.fd)


_stat = threading.local()  # .file: the calling thread's _StatFile


def starved() -> float | None:
    """The calling thread's total run-queue wait so far, s (Linux schedstat: time runnable but not running), or
    None where the kernel does not say."""
    global _schedstat_ok
    if not _schedstat_ok:
        return None
    try:
        file = getattr(_stat, "file", None) or _StatFile()
        _stat.file = file
        return int(os.pread(file.fd, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        _schedstat_ok = False
        return None


_JSON = {"Content-Type": "application/json"}


async def _one(client: Client, http: httpx.AsyncClient, req: StreamRequest, origin: float,
               encoded: tuple[str, bytes] | None = None, ended: Ended | None = None
               ) -> tuple[StreamOutcome, _Raw | None]:
    due = origin + req.at_s
    delay = due - LEAD_S - time.perf_counter()
    if delay > 0:
        await _sleep(delay)
    sent, set_out = time.perf_counter(), starved()
    try:
        raw = await _stream(client, http, req, due, encoded, set_out)
        return StreamOutcome(req, None, None, raw.t0 - origin, origin, starved_s=raw.starved_s), raw
    except MeasurementError as exc:
        return StreamOutcome(req, None, exc, sent - origin, origin), None
    finally:
        if ended is not None:
            ended()


def _parsed(client: Client, outcome: StreamOutcome, raw: _Raw | None) -> StreamOutcome:
    """The outcome with its trace built from the raw reads (or the parse error)."""
    if raw is None:
        return outcome
    builder = TraceBuilder(client.caps, client.fail)
    try:
        reads = raw.reads if raw.framing is None else [(t - raw.t0, d)
                                                       for t, d in capture.payload(raw.reads, raw.framing)]
        for t, data in split_events(reads):
            if builder.feed(t, data):
                break
        # Text-only chunks are counted with the server's tokenizer: off the clock, after the streams.
        outcome.trace = builder.finish(raw.total_s, raw.t0, client.count_text_chunks)
    except MeasurementError as exc:
        outcome.error = exc
    except ValueError as exc:  # a chunk size that is no number (raw reads take the framing off here)
        outcome.error = client.fail(f"malformed chunked body from the server ({exc})")
    return outcome


def _encoded(client: Client, req: StreamRequest) -> tuple[str, bytes]:
    """A request's path and JSON body as bytes: a long prompt's encoding takes the loop milliseconds, which an
    open-loop run spends before its origin rather than beside other requests' sends."""
    path, body = client.body(req.prompt, req.max_tokens, req.api, True, req.seed, req.temperature, req.messages,
                             salt=req.salt)
    return path, json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def _stream(client: Client, http: httpx.AsyncClient, req: StreamRequest, due: float = 0.0,
                  encoded: tuple[str, bytes] | None = None, set_out: float | None = None) -> _Raw:
    """One stream's raw reads, each stamped on arrival (refusals retried by the sync client's policy); its headers
    are written no earlier than ``due`` (``time.perf_counter()``); ``encoded``: its path and body, built before;
    ``set_out``: ``starved()`` when it set out."""
    path, content = encoded or _encoded(client, req)

    clocks: list[_GatedClock] = []  # one per try (a refusal is retried); the last one sent what was read

    async def send() -> tuple[httpx.Response, float]:
        with client.named_errors("POST", path) as t0:
            sent = _GatedClock(due, set_out)
            clocks.append(sent)
            request = http.build_request("POST", path, content=content, headers=_JSON,
                                         extensions={"trace": sent.atrace})
            resp = await http.send(request, stream=True)
            if resp.status_code != 200:
                await resp.aread()
                await resp.aclose()
            # The send time is when the headers reached the socket (the server's clock starts on them), not when
            # the client set out to send, nor when it began to open the connection they went on.
            return resp, t0 if sent.at is None else sent.at

    resp, t0 = await client.retry_policy.acall(send)
    try:
        client.check_status(resp, f"POST {path}")
        client.check_event_stream(resp, path)
        stream = resp.extensions.get("network_stream")
        framing = capture.framing_of(resp.headers) if isinstance(stream, capture.CaptureStream) else None
        if stream is None or framing is None:  # a proxy's connection, or an encoded body: read through httpx
            reads: list[tuple[float, bytes]] = []
            await _read_all(client, resp, reads, t0)
            return _Raw(path, t0, time.perf_counter() - t0, reads, clocks[-1].starved)
        cap = await _captured(client, stream, framing)
        if stream.release(cap):
            async for _ in resp.aiter_raw():  # h11 reads the body's end alone, so the connection is reused
                pass
        return _Raw(path, t0, cap.end - t0, cap.reads, clocks[-1].starved, capture.framing_of(resp.headers))
    finally:
        await resp.aclose()


async def _captured(client: Client, stream: capture.CaptureStream, framing: capture.Framing) -> capture.Capture:
    """The body read raw by the connection's protocol (``capture``): each read stamped in the loop's callback, none
    of httpx's layers per read; a stall of the read timeout or a cut is the same named error as through httpx."""
    cap = stream.capture(framing)
    try:
        while not cap.ended.done():
            wait = cap.last + client.timeout - time.perf_counter()
            if wait <= 0:
                raise client.stalled(_tokens_so_far(cap.reads))
            await asyncio.wait((cap.ended,), timeout=wait)
        cap.ended.result()
    except httpx.RemoteProtocolError as exc:
        stream.release(cap)
        raise client.cut(_tokens_so_far(cap.reads), exc) from None
    except BaseException:
        stream.release(cap)  # detached: the connection's close (the response's, next) no longer ends this body
        raise
    return cap


async def _read_all(client: Client, resp: httpx.Response, reads: list[tuple[float, bytes]], t0: float) -> None:
    """The hot loop: stamp and keep each read; stop at the end of the body or after ``[DONE]``."""
    clock = time.perf_counter
    try:
        async for raw in resp.aiter_bytes():
            reads.append((clock() - t0, raw))
            if b"[DONE]" in raw[-16:]:
                return
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise client.cut(_tokens_so_far(reads), exc) from None
    except httpx.TimeoutException:
        raise client.stalled(_tokens_so_far(reads)) from None


def _tokens_so_far(reads: list[tuple[float, bytes]]) -> int:
    """Events received before a cut (a close count for the error message: one per data event)."""
    return sum(raw.count(b"data:") for _, raw in reads)
