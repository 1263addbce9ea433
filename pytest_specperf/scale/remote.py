"""The code a worker runs, sent over an execnet gateway (``remote_exec`` of this module's source).

Only the standard library is imported at the top: the first message tells the controller whether this host can
import pytest_specperf at all, and which version, before any request is planned for it. Messages in, each a tuple:
``("clock",)`` -> the worker's ``perf_counter()``; ``("run", text)`` -> build the client, answer ``("ready",)``, wait
for ``("go", origin)`` (the origin on this worker's clock), send the share and answer ``("part", text)`` zero or more
times and ``("done", text)`` (the answer's JSON text in pieces); ``("stop",)`` ends it.

From ``run`` until ``done`` a thread of its own sends ``("beat", streams ended)`` every ``beat_s`` of the job: the
controller hears the worker is alive however long its streams take, and gives up on one that falls silent
(``pool.SILENT_BEATS``). The thread needs only the GIL, never the event loop, so a busy loop does not silence it.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

#: Characters of the answer's JSON text per message: a long answer over a slow link arrives in pieces, each of them
#: news that the worker is alive, and beats go between them.
PART_CHARS = 1 << 18


def raise_nofile() -> tuple[int, int]:
    """The open-file limit raised to its hard limit (each stream holds a socket); (soft, hard) after. Standard
    library only, as all of this module: a host runs it before it is known to have the plugin; the controller
    calls it too (``senders.raise_nofile``)."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to raise
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def _die_with_parent() -> None:
    """A local worker ends with the process that started it, even one killed outright (SIGKILL runs no code of its
    own): the kernel's parent-death signal (Linux; elsewhere its closed pipe ends it)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _cpu_s() -> float:
    """CPU seconds this process has used, user and system."""
    t = os.times()
    return t.user + t.system


class Heartbeat:
    """Sends ``("beat", ended)`` every ``every_s`` from a daemon thread, and every message of the share's exchange under
    one lock, so a beat never splits another message (a socket's ``sendall`` from two threads may interleave) and none
    follows ``done``."""

    def __init__(self, channel: Any, every_s: float) -> None:
        self.channel = channel
        self.every_s = every_s
        self.ended = 0  # streams (session turns) of the share that ended, read or failed
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="specperf-heartbeat", daemon=True)
        self._thread.start()

    def one_ended(self) -> None:
        """A stream ended (called on the event loop; an int's increment under the GIL)."""
        self.ended += 1

    def _beat(self) -> None:
        while not self._stopped.wait(self.every_s):
            with self._lock:
                if self._stopped.is_set():
                    return
                try:
                    self.channel.send(("beat", self.ended))
                except Exception:  # the channel closed (the controller went): nothing left to tell
                    return

    def send(self, msg: Any) -> None:
        """One message between beats."""
        with self._lock:
            self.channel.send(msg)

    def finish(self, text: str) -> None:
        """The answer in pieces (beats between them), then ``done``, after which no beat goes."""
        pieces = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)] or [""]
        for piece in pieces[:-1]:
            self.send(("part", piece))
        with self._lock:
            self._stopped.set()
            self.channel.send(("done", pieces[-1]))

    def stop(self) -> None:
        """No more beats (the share failed: its error closes the channel)."""
        with self._lock:
            self._stopped.set()


def serve(channel: Any) -> None:
    """Answer the controller until it says stop or the channel closes."""
    hello: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(), "python": sys.version.split()[0],
                             "nofile": raise_nofile()[0]}
    try:
        from pytest_specperf.scale import wire
        from pytest_specperf.version import __version__
    except ImportError as exc:
        hello["error"] = f"{type(exc).__name__}: {exc}"
        channel.send(hello)
        return
    hello["version"] = __version__
    channel.send(hello)
    from pytest_specperf.endpoint.concurrent import run_closed_loop, run_sessions, run_streams
    from pytest_specperf.endpoint.conversation import Conversation

    while True:
        msg = channel.receive()
        if msg[0] == "clock":
            channel.send(time.perf_counter())
        elif msg[0] == "bind":
            _die_with_parent()
        elif msg[0] == "run":
            job = wire.loads(msg[1])
            beat = Heartbeat(channel, job["beat_s"])
            try:
                client = wire.client_from(job["client"])
                client.detect()
                run_streams(client, [])  # pays a fresh process's first async send (imports) before the barrier
                beat.send(("ready",))
                go = channel.receive()
                cpu0, wall0 = _cpu_s(), time.perf_counter()
                answer: dict[str, Any] = {}
                if "sessions" in job:  # each turn built here from the last answer, as the pytest process would
                    convs = [Conversation(**c) for c in job["sessions"]]
                    per = run_sessions(client, [c.next_turn for c in convs], think_s=job["think_s"], origin=go[1],
                                       ended=beat.one_ended)
                    answer["sessions"] = [[{**wire.outcome_dict(o), "request": wire.request_dict(o.request)}
                                           for o in turns] for turns in per]
                else:
                    requests = [wire.request_from(r) for r in job["requests"]]
                    if job["users"] is None:
                        outcomes = run_streams(client, requests, origin=go[1], ended=beat.one_ended)
                    else:
                        outcomes = run_closed_loop(client, requests, job["users"], origin=go[1], ended=beat.one_ended)
                    answer["outcomes"] = [wire.outcome_dict(o) for o in outcomes]
                cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
                client.close()
                beat.finish(wire.dumps({**answer, "cpu_s": cpu, "wall_s": wall}))
            finally:
                beat.stop()
        else:
            return


if __name__ == "__channelexec__":
    serve(channel)  # type: ignore[name-defined] # noqa: F821 (execnet puts ``channel`` in this module's globals)
