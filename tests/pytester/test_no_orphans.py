"""Nothing the plugin starts outlives pytest: a real pytest process is signalled mid-test (SIGTERM, SIGINT and
SIGKILL) while the embedded simulator it started runs, and every child it had must be gone afterwards.

SIGKILL runs no Python code at all, so only what the kernel does on the parent's death can end the children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table in /proc")

HOLD = '''
import pathlib
import threading


def test_hold(specperf):
    specperf.sustained(tokens=16)  # starts the embedded simulator, a child process
    pathlib.Path("started").write_text("")
    threading.Event().wait()  # until the outer test signals this pytest
'''


def _children(pid: int) -> dict[int, str]:
    """{pid: command line} of the live processes whose parent is ``pid``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = cmd
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody reaped yet has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_no_child_outlives_a_signalled_pytest(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    pytester.makepyfile(test_hold=HOLD)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "test_hold.py", "-p", "no:cacheprovider",
                             "--specperf-sim-speed=20"], cwd=pytester.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not (pytester.path / "started").exists():
            assert proc.poll() is None, proc.communicate()[0].decode(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the inner test never started the simulator"
            time.sleep(0.05)
        children = _children(proc.pid)
        assert any("pytest_specperf.sim" in cmd for cmd in children.values()), children
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # The kernel's parent-death signal is immediate and the stdin watch takes one event-loop turn; a
    # child that survived does so for good, so a generous deadline costs nothing on a passing run.
    deadline = time.monotonic() + 30
    while (left := {p: c for p, c in children.items() if _alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # leave nothing behind for the next test
    assert not left, f"still running after pytest got {sig.name}: {left}"
