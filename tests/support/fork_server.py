"""A process that imports pytest and the plugin once, then forks one child per `python -m pytest` run.

Run as a script by ``support.forked_pytest``; never imported by a test. A fresh interpreter spends about
0.8 CPU seconds importing pytest, numpy, httpx and the plugin before a pytester run does anything; the suite
makes hundreds of such runs on two cores, so a fork of a process that already holds those modules saves a
quarter of the suite's CPU. Each child is otherwise the run a subprocess would be: its own process, the test's
working directory, environment and ``PYTHONPATH``, stdin from /dev/null, stdout and stderr into pytester's files,
and a normal interpreter exit (threads joined, atexit handlers run).

Protocol, one JSON line per run on stdin: ``{"args", "cwd", "env", "stdout", "stderr", "umask"}``; the server answers
the child's pid, then its exit status (as ``subprocess.Popen.returncode`` has it), each on its own line.
"""

from __future__ import annotations

import json
import os
import pkgutil
import sys

# Only what a perf-case run imports anyway. Third-party pytest plugins are left to pytest's own loading, so it
# can rewrite their asserts as it does in a fresh interpreter.
import httpx  # noqa: F401
import numpy  # noqa: F401
import pytest

import pytest_specperf

for _mod in pkgutil.walk_packages(pytest_specperf.__path__, "pytest_specperf."):
    __import__(_mod.name)

# The prompt corpora (package data, parsed once per process and cached): 0.04-0.09 s of CPU per run that builds a
# prompt, paid here once instead.
from pytest_specperf.prompts import exact_length  # noqa: E402

for _kind in exact_length.KINDS:
    exact_length._corpus(_kind)

#: Plugins imported above that pytest would otherwise warn it cannot rewrite: httpx imports anyio, and the plugin
#: itself is marked for rewriting where PYTHONPATH names the source tree (as in a helper's worktree).
_PLUGINS_IMPORTED_EARLY = ("anyio", "pytest_specperf")
_BASE_PATH = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]


def _child(req: dict) -> int:
    """Become the run: working directory, environment, paths and standard streams, then pytest."""
    os.chdir(req["cwd"])
    os.umask(req["umask"])
    os.environ.clear()
    os.environ.update(req["env"])
    extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [req["cwd"], *extra, *_BASE_PATH]
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(req["stdout"], os.O_WRONLY | os.O_APPEND), 1)
    os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_APPEND), 2)
    for name in _PLUGINS_IMPORTED_EARLY:
        mod = sys.modules.get(name)
        if mod is not None:  # pytest's own marker for "imported before the rewrite hook, on purpose"
            mod.__doc__ = f"PYTEST_DONT_REWRITE\n{mod.__doc__ or ''}"
    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *req["args"]]
    return int(pytest.main(req["args"]))


def main() -> None:
    """Serve runs until the test process closes stdin."""
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            # leaves the loop by SystemExit, so the interpreter ends as `python -m pytest` does
            raise SystemExit(_child(req))
        os.write(1, f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"{os.waitstatus_to_exitcode(status)}\n".encode())


if __name__ == "__main__":
    main()
