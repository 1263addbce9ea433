"""Ctrl-C (SIGINT) and CI's SIGTERM stop a run within seconds in every phase, and never cost the run's record.

While cases run, either signal raises ``KeyboardInterrupt`` (SIGTERM as well: its default would end the process
at once, with no saved run, history row or outputs), so pytest ends the session as interrupted and the report
writer keeps the run as partial. Python can lose that exception: raised while a finalizer runs (a ``__del__``, a
weakref callback during garbage collection) it is printed as "Exception ignored" and the code below goes on,
maybe into a wait with no end. So a watcher thread, woken by the signal itself (``signal.set_wakeup_fd``, which
works while the main thread is blocked), delivers it again every ``REDELIVER_S`` until pytest has taken it
(``pytest_keyboard_interrupt``, or the session finishing).

Once the session finishes (the saved run, the history row, the outputs, stopping what the run started), a first
signal no longer raises: an exception there would leave a history transaction or a server's stop half done. It
is noted instead; the report writer skips the outputs not yet drawn, and the exit status says interrupted. A
second signal raises as ever, for a user who really means it.

Under xdist a signal may reach the controller alone (CI's SIGTERM; a Ctrl-C where the workers run in a group of
their own). Left to xdist, a worker would finish its case, or be interrupted only after execnet's 5 s grace: so
each worker leaves its pid in a folder the controller names, and the controller passes every signal on to them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from pytest_specperf import stopping

#: seconds between deliveries of a signal that no part of pytest has taken yet
REDELIVER_S = 1.0

#: frames of an interrupt's traceback kept for pytest's one-line report (all with --full-trace)
TRACEBACK_KEPT = 4

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NUMBERS = frozenset(int(s) for s in _SIGNALS)


def _settle() -> None:
    """A Python call: a signal already delivered to this thread runs its handler here, at the latest."""


class Interrupts:
    """The run's SIGINT/SIGTERM handling (a pytest plugin object, one per process)."""

    def __init__(self) -> None:
        self.count = 0  # signals received (SIGINT or SIGTERM)
        self.signum: int | None = None  # the first one
        self.finishing = False  # the session is finishing: a first signal is noted, not raised
        self.fulltrace = False  # --full-trace: pytest shows the interrupt's whole traceback
        self._taken = threading.Event()  # pytest has the KeyboardInterrupt (or is finishing anyway)
        self._old: dict[int, Any] = {}
        self._old_fd = -1
        self._socks: tuple[socket.socket, socket.socket] | None = None
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident
        self._resent = 0  # deliveries of our own not handled yet (they never count as a user's second signal)
        self._workers: Path | None = None  # xdist controller: the folder where each worker leaves its pid
        self._pid_file: Path | None = None  # xdist worker: the pid it left there, taken back when it ends

    @property
    def requested(self) -> bool:
        """Whether the run was asked to stop."""
        return self.count > 0

    def install(self) -> bool:
        """Take SIGINT and SIGTERM where they still have Python's defaults (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in _SIGNALS:
            current = signal.getsignal(sig)
            # A handler the project installed itself stays; an ignored signal (nohup, a parent's choice) stays ignored.
            if current is signal.default_int_handler or current == signal.SIG_DFL:
                self._old[sig] = current
                signal.signal(sig, self._handle)
        if not self._old:
            return False
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        self._socks = (ours, theirs)
        try:
            self._old_fd = signal.set_wakeup_fd(ours.fileno(), warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter
            self._old_fd = -1
        self._thread = threading.Thread(target=self._watch, name="specperf-interrupts", daemon=True)
        self._thread.start()
        return True

    def uninstall(self) -> None:
        """Give the signals their previous handlers back, once no delivery of ours can still arrive."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._taken.set()
        if self._socks is not None:
            with contextlib.suppress(ValueError):
                signal.set_wakeup_fd(self._old_fd)
            for s in self._socks:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)  # wakes the watcher's recv (a close alone may not), so it ends
                s.close()
            self._socks = None
        if self._thread is not None:
            # A re-delivery sent just before this, handled after the old handler is back, would end the process
            # with SIGINT's status after pytest finished (seen: exit -2 on an engine start): wait the watcher out,
            # then let a delivery already sent reach our handler, which drops it (the interrupt is taken).
            self._thread.join(timeout=2 * REDELIVER_S)
            self._thread = None
            _settle()
        for sig, old in self._old.items():
            if signal.getsignal(sig) == self._handle:
                signal.signal(sig, old)
        self._old.clear()
        stopping.clear()
        if self._workers is not None:
            shutil.rmtree(self._workers, ignore_errors=True)
            self._workers = None
        if self._pid_file is not None:  # a worker that ended is no longer signalled (its pid may be reused)
            self._pid_file.unlink(missing_ok=True)
            self._pid_file = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True  # pytest's one line names where the signal landed, not this handler
        if self._resent > 0:  # one of ours: raise it again, unless pytest has taken the interrupt meanwhile
            self._resent -= 1
            if self._taken.is_set():
                return
            raise KeyboardInterrupt
        self.count += 1
        self.signum = self.signum or signum
        stopping.request()  # for the waits that take no exception: another writer's history lock, prompt threads
        self._pass_on(signum)
        if self.finishing and self.count == 1:
            return  # the run's record and the servers' stop complete; the exit status says interrupted
        raise KeyboardInterrupt

    def _pass_on(self, signum: int) -> None:
        """xdist controller: the signal to every worker (each stops its case and its own session)."""
        if self._workers is None:
            return
        with contextlib.suppress(OSError):
            for entry in self._workers.iterdir():
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(entry.name), signum)

    def _watch(self) -> None:
        """Wake on every signal, even while the main thread is blocked in C; deliver it again until taken."""
        assert self._socks is not None
        theirs = self._socks[1]
        try:
            while woken := theirs.recv(64):
                # Every signal with a Python handler writes its number here: a project's SIGALRM (pytest-timeout's
                # signal method) must not turn into a Ctrl-C.
                ours = [n for n in woken if n in _NUMBERS]
                if not ours:
                    continue
                while not self._taken.wait(REDELIVER_S):
                    if self._main is not None:
                        self._resent += 1
                        signal.pthread_kill(self._main, self.signum or ours[0])
        except OSError:
            return  # closed by uninstall

    def taken(self) -> None:
        """pytest has the KeyboardInterrupt: no more deliveries."""
        self._taken.set()

    # -- the hooks -------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.taken()
        if not self.fulltrace:
            # pytest shows one line of the interrupt unless --full-trace, yet formats every frame of it first (the
            # source of each parsed: seconds under load for a stack through asyncio and httpx). The frames where it
            # landed are all that line reads.
            excinfo.traceback = excinfo.traceback[-TRACEBACK_KEPT:]

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        # Before every other plugin's sessionfinish (the report writer's included): from here a first signal is
        # noted, not raised, so no write of the run is cut in half.
        self.finishing = True
        self.taken()
        try:
            return (yield)
        finally:
            if self.requested:
                session.exitstatus = pytest.ExitCode.INTERRUPTED

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: tell each worker where to leave its pid."""
        if self._workers is None:
            self._workers = Path(tempfile.mkdtemp(prefix="specperf-workers-"))
        node.workerinput["specperf_pids"] = str(self._workers)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.uninstall()
        if self.requested or self._taken.is_set():
            # CPython 3.11 marks a KeyboardInterrupt raised inside exec'd source (a dataclass's generated methods,
            # built while a module imports) as unhandled, even once pytest has taken it, and then ends the process
            # with SIGINT (exit -2, not pytest's 2). Every exec of source clears that mark first.
            exec("None")


KEY = pytest.StashKey[Interrupts]()


def install(config: pytest.Config) -> None:
    """Handle SIGINT and SIGTERM for this run (see the module's docstring)."""
    interrupts = Interrupts()
    interrupts.fulltrace = bool(config.getoption("fulltrace", False))
    if interrupts.install():
        config.stash[KEY] = interrupts
        config.pluginmanager.register(interrupts, "specperf-interrupts")
        folder = getattr(config, "workerinput", {}).get("specperf_pids")
        if folder:  # an xdist worker: where its controller finds it to pass a signal on
            with contextlib.suppress(OSError):
                interrupts._pid_file = Path(folder, str(os.getpid()))
                interrupts._pid_file.touch()


def requested(config: pytest.Config) -> bool:
    """Whether a signal asked this run to stop (the report writer then skips the outputs it has not drawn)."""
    found = config.stash.get(KEY, None)
    return found is not None and found.requested

