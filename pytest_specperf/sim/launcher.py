"""``SimServer``: start a simulator (child process or thread), wait until healthy, query, stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx  # the parent side only: the simulator child (__main__) does not import this module

from pytest_specperf.endpoint.tls import tls
from pytest_specperf.engines.process import die_with_parent
from pytest_specperf.sim.engine import Engine
from pytest_specperf.sim.profile import Profile, load_profile

READY_RE = re.compile(r"listening on (http://\S+)")


class SimStartError(RuntimeError):
    """The simulator did not come up; the message carries the child's stderr tail."""


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _terminate(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> int | None:
    """Ask a child to stop (SIGTERM), then kill it if it does not; returns its exit code."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
    except BaseException:  # a second Ctrl-C while it stops: it is killed and reaped before the interrupt goes on
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
        raise
    return proc.returncode


class SimServer:
    """A running simulator: a context manager (or ``start()``/``stop()``) with ``url``, ``model``, ``truth()``.

    By default it is a child process (``python -m pytest_specperf.sim``) so its timing does not
    share a GIL with the measuring client; ``in_process=True`` runs it on a thread with its own
    event loop instead (quicker to start, fine for functional tests).
    """

    def __init__(self, profile: str | Path | Profile = "healthy", *, speed: float = 1.0, port: int = 0,
                 host: str = "127.0.0.1", in_process: bool = False, overrides: Mapping[str, Any] | None = None,
                 startup_timeout: float = 30.0) -> None:
        if isinstance(speed, bool) or not isinstance(speed, int | float) or not speed > 0:
            raise ValueError(f"speed must be a number > 0, got {speed!r}")
        self.profile: Profile = load_profile(profile, overrides)
        self.speed = float(speed)
        self.host = host
        self.port = port
        self.in_process = in_process
        self.startup_timeout = startup_timeout
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._engine: Engine | None = None
        self._finalizer: weakref.finalize[..., SimServer] | None = None
        self._healthy = False
        self._paths: tuple[Path, Path] | None = None

    @property
    def model(self) -> str:
        """The served model name (``/v1/models`` id)."""
        return self.profile.model

    @property
    def dialect(self) -> str:
        """vllm, sglang or llamacpp."""
        return self.profile.dialect

    @property
    def pid(self) -> int | None:
        """The child's process id (None in-process or when stopped)."""
        return self._proc.pid if self._proc is not None else None

    # lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> SimServer:
        """Start the server and wait until ``/health`` answers 200; returns self."""
        self._spawn()
        self._wait_ready()
        return self

    def _spawn(self) -> None:
        if self.in_process or self._proc is not None or self.url:
            return
        self._start_child()

    def _wait_ready(self) -> None:
        if self.url and (self.in_process or self._healthy):
            return
        if self.in_process:
            self._start_thread()
        else:
            self._read_url()
        self._wait_healthy()
        self._healthy = True

    def stop(self) -> None:
        """Stop the server (idempotent); a child gets SIGTERM, then SIGKILL after 5 s."""
        if self._proc is not None:
            _terminate(self._proc)
            self._proc = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if self._thread is not None and self._loop is not None and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
            self._thread.join(10)
            self._thread = None
        self.url = ""
        self._engine = None
        self._healthy = False
        self._paths = None

    def _start_child(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="specperf-sim-")
        out_path, err_path = Path(self._tmp.name, "stdout"), Path(self._tmp.name, "stderr")
        cmd = [sys.executable, "-m", "pytest_specperf.sim", "--profile-json", self.profile.to_json(),
               "--host", self.host, "--port", str(self.port), "--speed", repr(self.speed), "--exit-on-stdin-eof"]
        env = dict(os.environ)
        # the child must import this very package even when it is not installed
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        # The child serves plain HTTP and opens no connection of its own, but importing aiohttp builds a verifying
        # TLS context, which reads the system's whole CA bundle: 0.1-0.5 s of CPU for every simulator started. An
        # empty bundle makes that read free; any TLS verification the child ever tried would fail, never pass.
        env["SSL_CERT_FILE"] = os.devnull
        # The child must end with this process whatever kills it (SIGKILL runs no finalizer): it stops when
        # its stdin pipe reads EOF, which the kernel delivers when the only write end (ours) closes; on
        # Linux the main thread's children also get SIGKILL from the kernel when this process dies.
        pdeath = sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
                                          preexec_fn=die_with_parent if pdeath else None)
        self._finalizer = weakref.finalize(self, _terminate, self._proc)
        self._paths = (out_path, err_path)

    def _read_url(self) -> None:
        assert self._proc is not None and self._paths is not None
        out_path, err_path = self._paths
        deadline = time.monotonic() + self.startup_timeout
        while True:
            m = READY_RE.search(out_path.read_text(encoding="utf-8", errors="replace"))
            if m:
                self.url = m.group(1)
                return
            code = self._proc.poll()
            if code is not None or time.monotonic() > deadline:
                what = (f"exited with code {code}" if code is not None
                        else f"printed no URL in {self.startup_timeout:g} s")
                tail = _tail(err_path) or _tail(out_path) or "(no output)"
                self.stop()
                raise SimStartError(f"specperf simulator {what}; its stderr ends with:\n{tail}")
            time.sleep(0.01)

    def _start_thread(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def on_ready(url: str, engine: Engine) -> None:
            self.url = url
            self._engine = engine
            ready.set()

        # Imported here, not at the top: the server (aiohttp, 0.2-0.3 s of CPU) runs in this process only
        # in_process; a child simulator imports it itself, and the parent only reads its URL and asks it over HTTP.
        from pytest_specperf.sim.server import run_server

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stop_event = asyncio.Event()
            try:
                loop.run_until_complete(run_server(self.profile, self.speed, self.host, self.port,
                                                   self._stop_event, on_ready))
            except BaseException as exc:
                failure.append(exc)
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name="specperf-sim", daemon=True)
        self._thread.start()
        if not ready.wait(self.startup_timeout) or failure:
            reason = f"{type(failure[0]).__name__}: {failure[0]}" if failure else "timed out"
            self._thread = None
            raise SimStartError(f"specperf simulator (in-process) did not start: {reason}")

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last = ""
        with httpx.Client(timeout=2.0, verify=tls()) as client:
            while time.monotonic() < deadline:
                if self._proc is not None and self._proc.poll() is not None:
                    break
                try:
                    if client.get(self.url + "/health").status_code == 200:
                        return
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.02)
        tail = _tail(Path(self._tmp.name, "stderr")) if self._tmp else ""
        self.stop()
        raise SimStartError(f"specperf simulator never became healthy ({last or 'no answer'})"
                            + (f"; its stderr ends with:\n{tail}" if tail else ""))

    # queries --------------------------------------------------------------------------------

    def _require(self) -> None:
        if not self.url:
            raise RuntimeError("SimServer is not running: use it as a context manager or call start()")

    def truth(self, response_id: str) -> dict[str, Any]:
        """The truth record of a response (same body as ``GET /sim/truth/{id}``); KeyError if unknown."""
        self._require()
        if self._engine is not None:
            rec = self._engine.truth.get(response_id)
            if rec is None:
                raise KeyError(response_id)
            return rec
        resp = httpx.get(f"{self.url}/sim/truth/{response_id}", timeout=10.0, verify=tls())
        if resp.status_code == 404:
            raise KeyError(response_id)
        resp.raise_for_status()
        body: dict[str, Any] = resp.json()
        return body

    def requests(self) -> list[dict[str, Any]]:
        """Every kept truth record without its steps, oldest first (``GET /sim/truth``)."""
        self._require()
        if self._engine is not None:
            return self._engine.truth.summaries()
        resp = httpx.get(f"{self.url}/sim/truth", timeout=10.0, verify=tls())
        resp.raise_for_status()
        records: list[dict[str, Any]] = resp.json()
        return records

    def seen(self) -> list[dict[str, str]]:
        """Every request that reached the server outside /sim/, oldest first: method, path, query string and
        Authorization header as received (``GET /sim/seen``)."""
        self._require()
        if self._engine is not None:
            return list(self._engine.seen)
        resp = httpx.get(f"{self.url}/sim/seen", timeout=10.0, verify=tls())
        resp.raise_for_status()
        seen: list[dict[str, str]] = resp.json()
        return seen

    def reset(self, *, truth: bool = False) -> dict[str, Any]:
        """Clear fault counters (and truth records with ``truth=True``)."""
        self._require()
        resp = httpx.post(f"{self.url}/sim/reset", params={"truth": "1" if truth else "0"}, timeout=10.0,
                          verify=tls())
        resp.raise_for_status()
        cleared: dict[str, Any] = resp.json()
        return cleared

    def send_signal(self, sig: int = signal.SIGINT) -> None:
        """Signal the child process (tests of clean shutdown)."""
        if self._proc is None:
            raise RuntimeError("send_signal needs a subprocess SimServer")
        self._proc.send_signal(sig)

    def __repr__(self) -> str:
        where = self.url or "stopped"
        return f"SimServer({self.profile.name!r}, dialect={self.dialect!r}, speed={self.speed:g}, {where})"


def start_all(servers: Iterable[SimServer]) -> None:
    """Start several simulators at once: every child process boots in parallel, then each is awaited."""
    servers = list(servers)
    try:
        for server in servers:
            server._spawn()
        for server in servers:
            server._wait_ready()
    except BaseException:
        for server in servers:
            server.stop()
        raise
