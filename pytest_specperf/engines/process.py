"""A local engine server as a child process: spawn, wait for ``/health``, stop; shared by llama.cpp and vLLM.

Each engine module says only what differs: its command line, its environment, how long start-up may take and
how its errors read. The child is tied to this process (SIGKILL when it dies) and stopped on garbage collection
if :meth:`EngineProcess.stop` was never called, so a crashed test run leaves no server behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self


class EngineError(Exception):
    """A local engine could not be found, started or used."""


class EngineNotFound(EngineError):
    """The engine's binary, build or model is missing."""


class EngineStartError(EngineError):
    """The engine was found but did not come up healthy."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """Child pre-exec: SIGKILL the child if the Python process dies without cleaning up (Linux only).

    The kernel sends it when the thread that started the child ends, so call it only from the main thread."""
    with contextlib.suppress(Exception):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; always reaps the process."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
    except BaseException:  # a second Ctrl-C during the grace: killed and reaped before the interrupt goes on
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        raise
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def tail(path: Path, n: int) -> str:
    """The last ``n`` lines of a log file ("" when it cannot be read)."""
    try:
        with path.open("rb") as f:
            lines = deque(f, maxlen=n)
    except OSError:
        return ""
    return b"".join(lines).decode("utf-8", "replace").rstrip("\n")


class EngineProcess:
    """One engine server on 127.0.0.1; a context manager. Subclasses give the command and the wording."""

    #: the engine's name in errors, e.g. "llama-server"
    NAME = "engine"
    #: seconds between health checks, and the timeout of one check
    HEALTH_POLL_S = 0.1
    HEALTH_TIMEOUT_S = 2.0

    def __init__(self, *, port: int, log_path: Path | None, startup_timeout: float, stop_grace: float) -> None:
        self._port_wanted = port
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.port: int | None = None
        self.args: list[str] = []
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self.startup_s: float | None = None  # seconds from spawn to a healthy /health
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., EngineProcess] | None = None
        self._started_at = 0.0

    # -- what differs per engine -------------------------------------------------------------------

    def _env(self) -> dict[str, str] | None:
        """The child's environment (None: this process's)."""
        return None

    def _exited_message(self, code: int) -> str:
        return f"{self.NAME} exited with code {code} during startup; log {self.log_path}:\n{self.log_tail()}"

    def _timeout_message(self, last: str) -> str:
        return (f"{self.NAME} not healthy after {self.startup_timeout:.0f}s (last: {last}); "
                f"log {self.log_path}:\n{self.log_tail()}")

    # -- state --------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT (no trailing slash)."""
        if self.port is None:
            raise EngineError("server not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id while running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server process (None before start / after stop)."""
        return self._proc

    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the server log."""
        return tail(self.log_path, n) if self.log_path is not None else ""

    # -- lifecycle ----------------------------------------------------------------------------------

    def _launch(self, command: Callable[[int], list[str]], bind_error: str) -> None:
        """Spawn and wait for health; a port we picked ourselves can be taken before the server binds it, so
        only then (``bind_error`` in its log) retry on a fresh port. Any failure stops the process first."""
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"specperf-{self.NAME.lower()}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        attempts = 3 if self._port_wanted == 0 else 1
        for attempt in range(attempts):
            self.port = self._port_wanted or free_port()
            self.args = command(self.port)
            try:
                self._spawn()
                self._wait_healthy()
                return
            except EngineStartError:
                bind_failed = bind_error in self.log_tail(30).lower()
                self.stop()
                if not (bind_failed and attempt + 1 < attempts):
                    raise
            except BaseException:
                self.stop()  # KeyboardInterrupt during start-up must not leave the server behind
                raise

    def _spawn(self) -> None:
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"# {' '.join(self.args)}\n".encode())
            log.flush()
            # Parent-death signal is per thread: only safe to ask for it from the main thread.
            pdeath = sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
            self._proc = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self._env(),
                preexec_fn=die_with_parent if pdeath else None,
            )
        self._started_at = time.monotonic()
        # Runs on garbage collection or interpreter exit if stop() was never called.
        self._finalizer = weakref.finalize(self, _terminate, self._proc, self.stop_grace)

    def _wait_healthy(self) -> None:
        import httpx  # only a started engine needs it

        assert self._proc is not None
        deadline = self._started_at + self.startup_timeout
        last = "no answer"
        with httpx.Client(timeout=self.HEALTH_TIMEOUT_S) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise EngineStartError(self._exited_message(code))
                try:
                    r = client.get(f"{self.url}/health")
                    if r.status_code == 200:
                        self.startup_s = time.monotonic() - self._started_at
                        return
                    last = f"HTTP {r.status_code}"  # 503 while the model loads
                except httpx.HTTPError as exc:
                    last = type(exc).__name__
                if time.monotonic() > deadline:
                    raise EngineStartError(self._timeout_message(last))
                time.sleep(self.HEALTH_POLL_S)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after the grace period; idempotent."""
        proc, self._proc = self._proc, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            _terminate(proc, self.stop_grace)

    def start(self) -> Self:
        """Start the process and wait until GET /health is 200; raises EngineStartError naming the log."""
        if self._proc is not None:
            raise EngineError("server already started")
        self._launch(*self._prepare())
        return self

    def _prepare(self) -> tuple[Callable[[int], list[str]], str]:
        """Check what start-up needs (EngineNotFound otherwise); the command for a port, and the text of the
        engine's log that says its port was taken."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid} url={self.url}" if self.running() else "stopped"
        return f"{type(self).__name__}(preset={getattr(self, 'preset', None)!r}, {state})"
