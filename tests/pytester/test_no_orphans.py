"""Nothing the plugin starts outlives pytest: a real pytest process is signalled mid-test (SIGTERM, SIGINT and
SIGKILL) while the embedded simulator it started runs, and every child it had must be gone afterwards.

SIGKILL runs no Python code at all, so only what the kernel does on the parent's death can end the children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from support.processes import assert_none_left, signal_once_started

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table in /proc")

HOLD = '''
import pathlib
import threading


def test_hold(specperf):
    specperf.sustained(tokens=16)  # starts the embedded simulator, a child process
    pathlib.Path("started").write_text("")
    threading.Event().wait()  # until the outer test signals this pytest
'''


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_no_child_outlives_a_signalled_pytest(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    pytester.makepyfile(test_hold=HOLD)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "test_hold.py", "-p", "no:cacheprovider",
                             "--specperf-sim-speed=20"], cwd=pytester.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    children = signal_once_started(proc, pytester.path / "started", sig)
    assert any("pytest_specperf.sim" in cmd for cmd in children.values()), children
    assert_none_left(children, sig)
