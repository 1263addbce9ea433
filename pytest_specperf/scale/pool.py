"""Worker processes over execnet: local ``popen`` gateways and other hosts (``ssh=``, ``socket=``).

Per case: every worker's clock offset to this process is measured by round trips (the sample of least round
trip, its uncertainty half that trip), each gets its share of the plan the controller made, all wait at one
start barrier (an origin on the controller's clock, moved onto each worker's), and each returns its raw outcomes,
which come back onto the controller's clock. A worker that dies mid-case fails that case with a one-line error
naming it; the next case opens the workers afresh.

A worker that stays alive but stops answering (stopped, wedged, its host or network gone without a reset) would
hold the run forever: from its share until its answer it sends a heartbeat every ``silence / SILENT_BEATS`` seconds
from a thread of its own, with how many of its streams ended, and the controller gives up on a worker it has heard
nothing from for the silence window (``SILENCE_S``, ``SPECPERF_WORKER_SILENCE_S``): the case fails with a one-line
error naming it, and every worker is ended as after a death. A slow worker is never given up on: its beats go on
however long its streams take.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import queue
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import execnet
import numpy as np

from pytest_specperf.cases.result_parts import WorkerShare
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
from pytest_specperf.endpoint.conversation import Conversation
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.scale import remote, senders, wire
from pytest_specperf.scale.senders import Sent, SentSessions
from pytest_specperf.version import __version__

#: Round trips per worker and case for its clock offset (the least one is kept).
CLOCK_SAMPLES = 24
#: The start barrier's origin lies this far ahead of the last "ready", plus the largest round trip.
START_MARGIN_S = 0.25
#: Seconds to wait for a worker's first answer (a gateway that opened but runs nothing).
HELLO_TIMEOUT_S = 60.0
#: Seconds without a word from a worker (no heartbeat, clock reply or answer) after which it is given up on.
SILENCE_S = 10.0
#: Heartbeats a worker sends per silence window: a silence is this many beats missed in a row.
SILENT_BEATS = 10
#: Sets the silence window in seconds (tests make it short; a link with long stalls may want it longer).
SILENCE_ENV = "SPECPERF_WORKER_SILENCE_S"
#: What the callback of a worker's channel is given when the channel closes.
_CLOSED = object()


def silence_s() -> float:
    """The silence window: ``SPECPERF_WORKER_SILENCE_S`` when set, else ``SILENCE_S``."""
    raw = os.environ.get(SILENCE_ENV, "").strip()
    if not raw:
        return SILENCE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{SILENCE_ENV}={raw!r} is not a number of seconds above 0; give the seconds without a "
                          f"word from a worker after which it is given up on (default {SILENCE_S:g}), or unset it")
    return value


class _Silent(Exception):
    """A worker sent nothing for the silence window."""

    def __init__(self, worker: Worker, quiet_s: float, during: str) -> None:
        super().__init__(worker.name)
        self.worker, self.quiet_s, self.during = worker, quiet_s, during


class _Failed(Exception):
    """A worker's channel ended, or it sent what it should not: ``cause`` says how."""

    def __init__(self, worker: Worker, cause: BaseException) -> None:
        super().__init__(worker.name)
        self.worker, self.cause = worker, cause


@dataclass(eq=False)  # one worker is itself only (``in``, dict keys)
class Worker:
    """One open gateway and its channel to ``worker.serve``."""

    spec: str
    gateway: Any  # execnet.Gateway (execnet ships no types)
    channel: Any
    pid: int
    host: str
    nofile: int
    bell: threading.Event  # the pool's: set whenever any worker's message arrives
    offset_s: float = 0.0
    offset_err_s: float = math.inf
    #: (arrival on the monotonic clock, message) as the channel's receiver thread put them
    inbox: queue.SimpleQueue[tuple[float, Any]] = field(default_factory=queue.SimpleQueue)
    heard: float = 0.0  # when its last message arrived, or it was last asked for one (monotonic)
    ended: int = 0  # streams (session turns) of its share that ended, by its last beat
    planned: int = 0  # streams (session turns) of its share
    unit: str = "streams"

    def listen(self) -> None:
        """Every message from now on goes to the inbox, stamped as it arrives, and rings the bell."""

        def arrived(msg: Any) -> None:
            self.inbox.put((time.monotonic(), msg))
            self.bell.set()

        self.heard = time.monotonic()
        self.channel.setcallback(arrived, endmarker=_CLOSED)

    def next(self, silence_s: float, during: str) -> Any:
        """Its next message (``_Silent`` once it has been silent for ``silence_s``, ``_Failed`` when its channel
        ended)."""
        try:
            at, msg = self.inbox.get(timeout=max(0.0, self.heard + silence_s - time.monotonic()))
        except queue.Empty:
            raise _Silent(self, time.monotonic() - self.heard, during) from None
        return self._take(at, msg)

    def ask(self, msg: Any) -> None:
        """Send a message that it answers: its silence counts from now (it said nothing while it had nothing to do)."""
        self.channel.send(msg)
        self.heard = time.monotonic()

    def poll(self) -> Any:
        """Its next message, ``None`` when none is waiting (``_Failed`` when its channel ended)."""
        try:
            at, msg = self.inbox.get_nowait()
        except queue.Empty:
            return None
        return self._take(at, msg)

    def _take(self, at: float, msg: Any) -> Any:
        self.heard = max(self.heard, at)
        if msg is _CLOSED:
            self.inbox.put((at, msg))  # for any later read
            try:
                self.channel.waitclose(1.0)  # a remote traceback is raised here
                cause: BaseException = EOFError("its channel closed")
            except Exception as exc:
                cause = exc
            raise _Failed(self, cause)
        return msg

    @property
    def name(self) -> str:
        """How messages name it: its spec (a local process is ``popen``), host and pid."""
        if self.spec == "popen":
            return f"local (pid {self.pid})"  # this machine's name stays out of results (docs/security.md)
        return f"{self.spec} (host {self.host}, pid {self.pid})"

    def clock(self, silence_s: float) -> None:
        """Offset = worker clock - controller clock at the midpoint of the quickest round trip."""
        best = (math.inf, 0.0)
        for _ in range(CLOCK_SAMPLES):
            t1 = time.perf_counter()
            self.ask(("clock",))
            tw = self.next(silence_s, "at its clock round trips")
            if not isinstance(tw, float):
                raise _Failed(self, ValueError(f"expected its clock, got {str(tw)[:80]!r}"))
            t2 = time.perf_counter()
            if t2 - t1 < best[0]:
                best = (t2 - t1, tw - (t1 + t2) / 2)
        self.offset_err_s, self.offset_s = best[0] / 2, best[1]


def local_specs(n: int) -> list[str]:
    """``n`` local worker processes on this Python (they import the same pytest_specperf)."""
    return ["popen"] * n


class Pool:
    """Senders over execnet workers: ``local`` popen processes (``"auto"``: as many as the case needs, up to the
    cores) and one worker per host spec."""

    def __init__(self, local: int | str, hosts: Sequence[str] = ()) -> None:
        self.local = local
        self.hosts = list(hosts)
        self.nofile = senders.raise_nofile()
        self._group: Any = None
        self._workers: list[Worker] = []
        self._broken: str | None = None  # a host that could not be used: every later case says so at once
        self.silence_s = silence_s()
        self._bell = threading.Event()  # any worker's message arrived

    # -- opening ------------------------------------------------------------------------------------------

    def _max_local(self) -> int:
        return (os.cpu_count() or 1) if self.local == "auto" else int(self.local)

    def _wanted(self, streams: int) -> int:
        """Local workers for a case of ``streams`` at once: all given, or with auto as many as the bound needs."""
        if self.local != "auto":
            return int(self.local)
        need = math.ceil(streams / senders.PER_PROCESS_STREAMS) - len(self.hosts)
        return max(1 if not self.hosts else 0, min(need, self._max_local()))

    def _open(self, n_local: int) -> list[Worker]:
        """The case's workers: hosts first (checked before anything is sent), then local processes."""
        if self._broken:
            raise ConfigError(self._broken)
        if self._group is None:
            self._group = execnet.Group()
        have_local = [w for w in self._workers if w.spec == "popen"]
        for spec in self.hosts:
            if not any(w.spec == spec for w in self._workers):
                self._workers.append(self._connect(spec))
        for _ in range(n_local - len(have_local)):
            self._workers.append(self._connect("popen"))
        hosts = [w for w in self._workers if w.spec != "popen"]
        return hosts + [w for w in self._workers if w.spec == "popen"][:n_local]

    def _connect(self, spec: str) -> Worker:
        """Open one gateway and hear from it: a host that cannot be reached or cannot import pytest_specperf is a
        one-line error naming it, before any request is planned for it."""
        label = "this machine" if spec == "popen" else spec
        option = "--specperf-workers" if spec == "popen" else "--specperf-hosts"
        # execnet leaves the socket of a refused connection open; it is freed with the exception, and its
        # ResourceWarning is execnet's, not the user's
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            try:
                gw = self._group.makegateway(spec)
                ch = gw.remote_exec(remote)
                hello = ch.receive(HELLO_TIMEOUT_S)
            except Exception as exc:  # execnet raises plain OSError, HostNotFound, TimeoutError, EOFError alike
                self._broken = (f"{option}: cannot reach {label} ({type(exc).__name__}: "
                                f"{' '.join(str(exc).split())[:160]}); check it is up and its ssh or execnet socket "
                                f"server listens, or drop it from {option}")
            gc.collect()
        if self._broken:
            raise ConfigError(self._broken)
        if "error" in hello or hello.get("version") != __version__:
            found = hello.get("error") or f"it has pytest-specperf {hello.get('version')}"
            self._broken = (f"{option}: {label} (host {hello['host']}) cannot run a worker: {found}; install "
                            f"pytest-specperf=={__version__} into the Python its gateway starts (python "
                            f"{hello['python']} there)")
            gw.exit()
            raise ConfigError(self._broken)
        if spec.startswith("popen"):
            ch.send(("bind",))  # a local worker dies with this process, however it ends
        worker = Worker(spec, gw, ch, int(hello["pid"]), str(hello["host"]), int(hello["nofile"]), self._bell)
        worker.listen()
        return worker

    # -- Senders ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Every host opened and checked (local processes open when a case needs them)."""
        self._open(0)

    def check(self, streams: int, what: str) -> None:
        """PER_PROCESS_STREAMS per worker at most, with every worker this run may open."""
        most = self._max_local() + len(self.hosts)
        senders.check_streams(streams, what, most, self.nofile)

    def _alone(self, streams: int) -> bool:
        """With auto and no hosts, a case one process reads is sent by the pytest process, as without workers."""
        return self.local == "auto" and not self.hosts and self._wanted(streams) <= 1

    def streams(self, client: Client, requests: Sequence[StreamRequest]) -> Sent:
        """Open loop (or N users sent once each): arrivals dealt round-robin over the workers."""
        if self._alone(len(requests)):
            return senders.Local().streams(client, requests)
        workers = self._open(self._wanted(len(requests)))
        shares = senders.by_arrival(len(requests), len(workers))
        return self._run(client, list(requests), workers, shares, None)

    def closed_loop(self, client: Client, requests: Sequence[StreamRequest], users: int) -> Sent:
        """Closed loop: users dealt round-robin, each with its own requests."""
        users = max(1, min(users, len(requests)))
        if self._alone(users):
            return senders.Local().closed_loop(client, requests, users)
        workers = self._open(self._wanted(users))
        workers = workers[:users]
        shares = senders.by_user(len(requests), users, len(workers))
        mine = senders.users_of(users, len(workers))
        for w, us in zip(workers, mine, strict=True):  # each host's own limit, as its worker found it
            if 0 <= w.nofile < len(us) + senders.SPARE_FILES:
                raise ConfigError(f"concurrency={users} gives worker {w.name} {len(us)} sockets, past its open-file "
                                  f"limit RLIMIT_NOFILE {w.nofile} (its hard limit): raise it there (`ulimit -Hn` as "
                                  "root), or spread the streams over more --specperf-workers or --specperf-hosts")
        return self._run(client, list(requests), workers, shares, mine)

    def sessions(self, client: Client, conversations: Sequence[Conversation], think_s: float) -> SentSessions:
        """Sessions dealt round-robin; each worker builds its sessions' turns from their answers, as ``Local``."""
        n = len(conversations)
        if self._alone(n):
            return senders.Local().sessions(client, conversations, think_s)
        workers = self._open(self._wanted(n))[:max(n, 1)]
        shares = senders.by_arrival(n, len(workers))
        pairs = [(w, s) for w, s in zip(workers, shares, strict=True) if s]
        jobs = [{"sessions": [dataclasses.asdict(conversations[i]) for i in share], "think_s": think_s}
                for _, share in pairs]
        done, origin = self._exchange(client, [w for w, _ in pairs], jobs)
        out: list[list[StreamOutcome]] = [[] for _ in range(n)]
        shares_out = []
        for (w, share), got in zip(pairs, done, strict=True):
            late: list[float] = []
            for i, turns in zip(share, got["sessions"], strict=True):
                out[i] = [wire.outcome_from(d, wire.request_from(d["request"]), w.offset_s, origin) for d in turns]
                for o in out[i]:
                    o.user = i
                late += [o.late_s for o in out[i]]
            shares_out.append(self._share(w, sum(len(out[i]) for i in share), got, late))
        return SentSessions(out, shares_out, [share for _, share in pairs])

    @staticmethod
    def _share(w: Worker, streams: int, got: dict[str, Any], late: list[float]) -> WorkerShare:
        """What the case's JSON says of one worker."""
        # a local worker is "popen": the host name stays out of saved runs (docs/security.md keeps only its hash)
        return WorkerShare(host=w.spec, pid=w.pid, streams=streams,
                           offset_s=w.offset_s, offset_err_s=w.offset_err_s,
                           cpu_share=got["cpu_s"] / got["wall_s"] if got["wall_s"] > 0 else math.nan,
                           late_p99_s=float(np.percentile(late, 99)) if late else math.nan)

    def _run(self, client: Client, requests: list[StreamRequest], workers: list[Worker], shares: list[list[int]],
             users: list[list[int]] | None) -> Sent:
        pairs = [(w, s, None if users is None else users[k]) for k, (w, s) in enumerate(zip(workers, shares,
                                                                                              strict=True)) if s]
        jobs = [{"requests": [wire.request_dict(requests[i]) for i in share],
                 "users": None if mine is None else len(mine)} for _, share, mine in pairs]
        done, origin = self._exchange(client, [w for w, _, _ in pairs], jobs)
        outcomes: list[StreamOutcome | None] = [None] * len(requests)
        shares_out = []
        for (w, share, mine), got in zip(pairs, done, strict=True):
            late: list[float] = []
            for i, d in zip(share, got["outcomes"], strict=True):
                o = wire.outcome_from(d, requests[i], w.offset_s, origin)
                if mine is not None:
                    o.user = mine[o.user]
                else:
                    o.user = i
                outcomes[i] = o
                late.append(o.late_s)
            shares_out.append(self._share(w, len(share), got, late))
        return Sent([o for o in outcomes if o is not None], shares_out, [share for _, share, _ in pairs])

    def _exchange(self, client: Client, workers: list[Worker], jobs: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], float]:
        """Clocks, shares, the start barrier and the raw outcomes back: (each worker's answer, the origin)."""
        fields = wire.client_fields(client)
        beat_s = self.silence_s / SILENT_BEATS
        now: Worker | None = None
        try:
            for now in workers:
                now.clock(self.silence_s)
            for now, job in zip(workers, jobs, strict=True):
                sessions = job.get("sessions")
                now.planned = len(job["requests"]) if sessions is None else sum(int(c["turns"]) for c in sessions)
                now.unit, now.ended = "streams" if sessions is None else "session turns", 0
                now.ask(("run", wire.dumps({"client": fields, "beat_s": beat_s, **job})))
            now = None
            self._gather(workers, "ready")
            # The start barrier: one origin on this clock, each worker given it on its own.
            origin = time.perf_counter() + START_MARGIN_S + max(2 * w.offset_err_s for w in workers)
            for now in workers:
                now.channel.send(("go", origin + now.offset_s))
            now = None
            done = []
            for w, text in zip(workers, self._gather(workers, "done"), strict=True):
                try:
                    done.append(wire.loads(text))
                except ValueError as exc:
                    raise _Failed(w, exc) from None
        except _Silent as quiet:
            self._drop(workers)  # it may never answer again: ended at once, and every other worker with it
            w = quiet.worker
            during = (f"mid-case ({w.ended} of {w.planned} {w.unit} ended)" if quiet.during == "done" else
                      "before its share started" if quiet.during == "ready" else quiet.during)
            raise MeasurementError(f"worker {w.name} sent nothing for {quiet.quiet_s:.1f} s {during}: its process is "
                                   "stopped or hung, or its host or the network to it stopped answering; check that "
                                   f"host and its network ({SILENCE_ENV} sets the window, now {self.silence_s:g} s); "
                                   "this case was not measured, every worker was ended and the next case opens its "
                                   "workers afresh") from None
        except (_Failed, EOFError, OSError, execnet.RemoteError, execnet.TimeoutError, ValueError) as exc:
            self._drop(workers)  # a dead channel cannot be reused: every worker goes, the next case opens afresh
            if isinstance(exc, _Failed):
                who, cause = exc.worker.name, exc.cause
            else:
                who, cause = now.name if now is not None else "a worker", exc
            raise MeasurementError(f"worker {who} ended mid-case ({type(cause).__name__}: "
                                   f"{_last_line(cause)}); this case was not measured, the next case opens its "
                                   "workers afresh") from None
        except BaseException:  # Ctrl-C or SIGTERM mid-case (interrupts.py): the workers stop now, not at the end
            self._drop(workers)
            raise
        return done, origin

    def _gather(self, workers: list[Worker], what: str) -> list[str]:
        """Every worker's ``what`` message (for ``done``, its answer's text, put together from its pieces), taken
        in whatever order they come, beats noted on the way. ``_Silent`` for the first worker that sent nothing
        for the silence window: a stream can take the client's whole timeout, but a live worker beats meanwhile."""
        answers: list[str | None] = [None] * len(workers)
        parts: list[list[str]] = [[] for _ in workers]
        while True:
            self._bell.clear()  # before the inboxes are read: a message arriving after this rings it again
            for i, w in enumerate(workers):
                while answers[i] is None and (msg := w.poll()) is not None:
                    kind = msg[0] if isinstance(msg, tuple | list) and msg else None
                    if kind == "beat":
                        w.ended = int(msg[1])
                    elif kind == "part" and what == "done":
                        parts[i].append(str(msg[1]))
                    elif kind == what:
                        answers[i] = "".join(parts[i]) + (str(msg[1]) if what == "done" else "")
                    else:
                        raise _Failed(w, ValueError(f"expected {what!r}, got {str(msg)[:80]!r}"))
            waiting = [w for w, a in zip(workers, answers, strict=True) if a is None]
            if not waiting:
                return [a or "" for a in answers]
            quiet = min(waiting, key=lambda w: w.heard)
            left = quiet.heard + self.silence_s - time.monotonic()
            if left <= 0:
                raise _Silent(quiet, time.monotonic() - quiet.heard, what)
            self._bell.wait(left)

    # -- ending -------------------------------------------------------------------------------------------

    def _drop(self, cut: Sequence[Worker] = ()) -> None:
        """End every worker: those of a failed case (``cut``: mid-share, silent or dead) at once, their processes
        killed (a local one, or the ssh client of a remote one) or a ``socket=`` host's connection shut, so that
        nothing waits on them (a busy worker heeds no "stop", and execnet would give it 5 s); the others are told
        to stop and waited for (killed after 5 s). The next case opens its workers afresh."""
        workers, self._workers = self._workers, []
        group, self._group = self._group, None
        for w in cut:
            with contextlib.suppress(Exception):  # already gone
                if w.spec.startswith("socket="):
                    w.gateway._io.close_read()  # its receiver thread reads the end of the stream at once
                else:
                    w.gateway._io.kill()
        for w in workers:
            if w in cut:
                continue
            with contextlib.suppress(Exception):  # already gone
                w.channel.send(("stop",))
        if group is not None:
            group.terminate(timeout=5.0)

    def close(self) -> None:
        """Stop every worker and close every gateway (local processes are waited for, then killed)."""
        self._drop()


def _last_line(exc: BaseException) -> str:
    """A remote traceback's last line, or the exception's text, on one line."""
    lines = [x for x in str(exc).strip().splitlines() if x.strip()]
    return " ".join((lines[-1] if lines else type(exc).__name__).split())[:200]


def senders_for(workers: int | str, hosts: Sequence[str]) -> senders.Senders:
    """The run's senders: this process alone for one worker and no hosts (as without workers), else a pool."""
    if workers == 1 and not hosts:
        return senders.Local()
    return Pool(workers, hosts)
