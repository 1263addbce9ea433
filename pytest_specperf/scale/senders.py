"""Who sends a case's streams: one small interface, two variants (as pytest-xdist keeps its schedulers).

``Local`` is the pytest process itself, exactly as before workers existed (``run_streams``, ``run_closed_loop``);
``pool.Pool`` splits the same requests over execnet worker processes, locally and on other hosts, and hands back
the same outcomes with every stamp on this process's clock. A kind measures through ``CaseContext.senders`` and
computes every figure from the merged outcomes, so percentiles stay exact whoever sent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pytest_specperf.cases.result_parts import WorkerShare
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import (
    StreamOutcome,
    StreamRequest,
    run_closed_loop,
    run_sessions,
    run_streams,
)
from pytest_specperf.endpoint.conversation import Conversation
from pytest_specperf.errors import ConfigError
from pytest_specperf.scale import remote

#: Streams one process reads faithfully at once: TTFT within 1 ms at p50 and 5 ms at p99 of the server's first
#: write, per-user decode within 1% (measured by benchmarks/scale_out.py on a 2-core machine; docs/benchmarks.md).
PER_PROCESS_STREAMS = 256
#: Open files a process keeps besides its streams' sockets (imports, logs, the simulator's pipes).
SPARE_FILES = 64


@dataclass
class Sent:
    """A case's outcomes in request order, and who sent them (None: the pytest process itself, as ever)."""

    outcomes: list[StreamOutcome]
    workers: list[WorkerShare] | None = None
    shares: list[list[int]] = field(default_factory=list)  # per worker: the indices of its outcomes


@dataclass
class SentSessions:
    """A session case's outcomes, per session and turn, and who sent them (None: the pytest process itself)."""

    sessions: list[list[StreamOutcome]]
    workers: list[WorkerShare] | None = None
    shares: list[list[int]] = field(default_factory=list)  # per worker: the indices of its sessions

    def flat(self) -> Sent:
        """Every turn in session order, each worker's share as indices into that order (for ``run/workers``)."""
        starts = [0]
        for per in self.sessions:
            starts.append(starts[-1] + len(per))
        shares = [[i for s in share for i in range(starts[s], starts[s + 1])] for share in self.shares]
        return Sent([o for per in self.sessions for o in per], self.workers, shares)


class Senders(Protocol):
    """Sends a case's requests and returns every outcome on this process's clock."""

    def start(self) -> None:
        """Reach and check every host (a one-line ConfigError naming one that fails) before anything is sent."""

    def check(self, streams: int, what: str) -> None:
        """Raise a one-line ConfigError when ``streams`` at once are more than these senders read faithfully."""

    def streams(self, client: Client, requests: Sequence[StreamRequest]) -> Sent:
        """Each request at its ``at_s`` after one shared origin (open loop, or N users sent once each)."""

    def closed_loop(self, client: Client, requests: Sequence[StreamRequest], users: int) -> Sent:
        """``users`` users work through ``requests``, each sending its next as its last one ended."""

    def sessions(self, client: Client, conversations: Sequence[Conversation], think_s: float) -> SentSessions:
        """Conversations at once, each turn built from the last answer (``run_sessions``)."""

    def close(self) -> None:
        """End every process these senders started."""


def raise_nofile() -> int:
    """Raise this process's open-file limit to its hard limit (each stream holds a socket); the soft limit after."""
    return remote.raise_nofile()[0]


def check_streams(streams: int, what: str, workers: int, nofile: int) -> None:
    """The bound on one case: at most PER_PROCESS_STREAMS per worker, and sockets within the open-file limit."""
    per = math.ceil(streams / max(workers, 1))
    if per > PER_PROCESS_STREAMS:
        need = math.ceil(streams / PER_PROCESS_STREAMS)
        raise ConfigError(f"{what}={streams} needs {need} worker processes at {PER_PROCESS_STREAMS} streams each "
                          f"(the most one process reads faithfully, docs/scale-out.md); this run has {workers}: give "
                          f"--specperf-workers={need} (or auto), or add --specperf-hosts")
    if nofile >= 0 and per + SPARE_FILES > nofile:
        raise ConfigError(f"{what}={streams} holds {per} sockets per worker, past the open-file limit RLIMIT_NOFILE "
                          f"{nofile} (hard limit; raise it with `ulimit -Hn` as root, or spread the streams with "
                          "--specperf-workers or --specperf-hosts)")


class Local:
    """The pytest process sends every stream itself: the code path and records of a run without workers."""

    def __init__(self) -> None:
        self.nofile = raise_nofile()

    def start(self) -> None:
        """Nothing to reach."""

    def check(self, streams: int, what: str) -> None:
        """One process: PER_PROCESS_STREAMS at most."""
        check_streams(streams, what, 1, self.nofile)

    def streams(self, client: Client, requests: Sequence[StreamRequest]) -> Sent:
        """``run_streams``, unchanged."""
        return Sent(run_streams(client, requests))

    def closed_loop(self, client: Client, requests: Sequence[StreamRequest], users: int) -> Sent:
        """``run_closed_loop``, unchanged."""
        return Sent(run_closed_loop(client, requests, users))

    def sessions(self, client: Client, conversations: Sequence[Conversation], think_s: float) -> SentSessions:
        """``run_sessions``, unchanged."""
        return SentSessions(run_sessions(client, [c.next_turn for c in conversations], think_s=think_s))

    def close(self) -> None:
        """Nothing started, nothing to end."""


def by_user(n_requests: int, users: int, workers: int) -> list[list[int]]:
    """Closed loop: each worker's request indices; user u sends requests u, u + users, ... and goes to worker
    u % workers, so a worker's first requests are its users' first (their ramp) and its refills stay its own."""
    return [[i for i in range(n_requests) if (i % users) % workers == w] for w in range(workers)]


def users_of(users: int, workers: int) -> list[list[int]]:
    """Closed loop: each worker's users (global numbers), in the order its local users 0, 1, ... map to them."""
    return [[u for u in range(users) if u % workers == w] for w in range(workers)]


def by_arrival(n_requests: int, workers: int) -> list[list[int]]:
    """Open loop: arrivals dealt round-robin in schedule order, so every worker sends over the whole span."""
    return [list(range(w, n_requests, workers)) for w in range(workers)]
