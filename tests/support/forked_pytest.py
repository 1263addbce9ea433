"""pytester's `python -m pytest` runs as forks of a preloaded process (support/fork_server.py).

``install(pytester)`` routes the runs of ``pytester.runpytest_subprocess`` (and ``pytester.run`` of
``python -mpytest``) through one fork server per test process; every other command, and every run while
``SPECPERF_TEST_FORK=0`` is set, is a plain subprocess as pytester makes it. The child is its own process
with the test's environment, working directory and output files, so what a test sees is what a subprocess
gives, at half the CPU.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).with_name("fork_server.py")
# The environment the server starts in: the test session's, before any test changes HOME or the like.
_SESSION_ENV = dict(os.environ)


class _Server:
    """The fork server of this test process, started on first use and restarted if a run was abandoned."""

    proc: subprocess.Popen[bytes] | None = None
    pending = False

    @classmethod
    def get(cls) -> subprocess.Popen[bytes]:
        if cls.proc is None or cls.proc.poll() is not None or cls.pending:
            cls.stop()
            cls.proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=_SESSION_ENV, cwd=str(SERVER.parent),
                                        bufsize=0)  # unbuffered: select() must see every line
            cls.pending = False
        return cls.proc

    @classmethod
    def stop(cls) -> None:
        if cls.proc is not None:
            cls.proc.kill()
            cls.proc.wait()
            cls.proc = None


atexit.register(_Server.stop)  # the server ends with the test process that started it, and is reaped


class ForkedRun:
    """The part of ``subprocess.Popen`` that ``Pytester.run`` uses, for one forked run."""

    stdin = None

    def __init__(self, server: subprocess.Popen[bytes], pid: int) -> None:
        self._server, self.pid = server, pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            out = self._server.stdout
            assert out is not None
            if timeout is not None and not select.select([out], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("forked pytest", timeout)
            line = out.readline()
            _Server.pending = False
            self.returncode = int(line) if line else -9
        return self.returncode

    def poll(self) -> int | None:
        out = self._server.stdout
        assert out is not None
        return self.wait() if self.returncode is not None or select.select([out], [], [], 0)[0] else None

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended on its own
                os.kill(self.pid, 9)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _start(cmdargs: Any, stdout: Any, stderr: Any) -> ForkedRun:
    server = _Server.get()
    req = {"args": [str(a) for a in cmdargs[2:]], "cwd": os.getcwd(), "env": dict(os.environ),
           "stdout": stdout.name, "stderr": stderr.name, "umask": _umask()}
    req["env"]["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), req["env"].get("PYTHONPATH", "")]))
    stdout.flush()
    stderr.flush()
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(req).encode() + b"\n")
    server.stdin.flush()
    _Server.pending = True
    return ForkedRun(server, int(server.stdout.readline()))


def install(pytester: pytest.Pytester) -> None:
    """Route this pytester's `python -m pytest` runs through the fork server."""
    if os.environ.get("SPECPERF_TEST_FORK", "1") == "0":
        return
    plain = pytester.popen

    def popen(cmdargs: Any, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
              stdin: Any = pytester.CLOSE_STDIN, **kw: Any) -> Any:
        forkable = (tuple(str(a) for a in cmdargs[:2]) == (sys.executable, "-mpytest") and not kw
                    and stdin is pytester.CLOSE_STDIN and hasattr(stdout, "name") and hasattr(stderr, "name"))
        if not forkable:
            return plain(cmdargs, stdout=stdout, stderr=stderr, stdin=stdin, **kw)
        return _start(cmdargs, stdout, stderr)

    pytester.popen = popen  # type: ignore[method-assign]
