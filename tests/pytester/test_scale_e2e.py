"""Worker processes as a user asks for them: --specperf-workers and --specperf-hosts (and their ini twins), the
``workers`` of each load case's JSON, the usage errors, a worker that stops answering mid-case, and no worker
outliving pytest however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from support.processes import alive, assert_none_left, descendants, signal_once_started

from pytest_specperf.scale.pool import SILENCE_ENV
from pytest_specperf.scale.senders import PER_PROCESS_STREAMS
from pytest_specperf.sim import SimServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table in /proc")

CASES = """
import pytest

@pytest.mark.sustained(concurrency=6, tokens=32, ctx=100)
def test_users(specperf):
    pass

@pytest.mark.rate(rps=20, requests=12, tokens=16, ctx=100)
def test_rate(specperf):
    pass

@pytest.mark.sustained(tokens=32, ctx=100)
def test_one_stream(specperf):
    pass
"""

KEYS = {"host", "pid", "streams", "offset_s", "offset_err_s", "cpu_share", "late_p99_s"}


def test_each_load_case_says_which_workers_sent_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scale=CASES)
    pytester.makeini("[pytest]\nspecperf_workers = 2\n")  # the ini twin
    out = pytester.path / "r.json"
    with SimServer("healthy", speed=5) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}", "-p", "no:cacheprovider")
        ids = {s["response_id"] for r in json.loads(out.read_text())["results"] for s in r.get("streams", [])}
        ids |= {q["response_id"] for r in json.loads(out.read_text())["results"] for q in r.get("per_request", [])}
        served = {rec["id"] for rec in sim.requests()}
    res.assert_outcomes(passed=3)
    results = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
    for name, streams in (("test_users", 6), ("test_rate", 12)):
        shares = results[name]["workers"]
        assert len(shares) == 2 and all(set(w) == KEYS for w in shares), shares
        assert sum(w["streams"] for w in shares) == streams
        assert all(w["host"] == "popen" for w in shares)  # a local worker: no host name in the results
    assert "workers" not in results["test_one_stream"]  # one stream: the pytest process sends it, as ever
    assert ids <= served  # every stream the JSON reports, the simulator served
    pids = {w["pid"] for r in results.values() for w in r.get("workers", [])}
    assert len(pids) == 2 and not any(alive(p) for p in pids)  # both ended with pytest


def test_one_process_asked_past_its_bound_names_the_option(pytester: pytest.Pytester) -> None:
    n = PER_PROCESS_STREAMS + 1
    pytester.makepyfile(test_big=f"""
import pytest

@pytest.mark.sustained(concurrency={n}, tokens=16, ctx=64)
def test_big(specperf):
    pass
""")
    res = pytester.runpytest_subprocess("--specperf-sim-speed=20", "-p", "no:cacheprovider")
    line = next(x for x in res.outlines if f"concurrency={n} needs 2 worker processes" in x)
    assert "--specperf-workers=2" in line


@pytest.mark.parametrize("bad", ["two"])
def test_a_bad_worker_count_is_a_one_line_usage_error(pytester: pytest.Pytester, bad: str) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess(f"--specperf-workers={bad}", "-p", "no:cacheprovider")
    assert res.ret != 0
    assert any(f"--specperf-workers={bad!r} is not a whole number" in x for x in res.errlines + res.outlines)


HOLD = """
import pathlib
import threading


def test_hold(specperf):
    specperf.sustained(concurrency=4, tokens=16)  # opens two worker processes
    pathlib.Path("started").write_text("")
    threading.Event().wait()  # until the outer test signals this pytest
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_no_worker_outlives_a_signalled_pytest(pytester: pytest.Pytester, sig: signal.Signals) -> None:
    pytester.makepyfile(test_hold=HOLD)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "test_hold.py", "-p", "no:cacheprovider",
                             "--specperf-sim-speed=20", "--specperf-workers=2"], cwd=pytester.path,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    below = signal_once_started(proc, pytester.path / "started", sig)
    assert sum("execnet" in cmd or "import sys" in cmd for cmd in below.values()) >= 2, below
    assert_none_left(below, sig)


STOPPED = """
import pytest

@pytest.mark.sustained(concurrency=4, tokens=2000, ctx=64, max_drift=0.99)
def test_stopped(specperf):
    pass

@pytest.mark.sustained(concurrency=4, tokens=16, ctx=64)
def test_after(specperf):
    pass
"""


def test_a_worker_that_stops_answering_fails_its_case_in_one_line_and_the_next_case_runs(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stopped=STOPPED)
    out = pytester.path / "r.json"
    silence = 1.5
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{SILENCE_ENV: str(silence)})
    with SimServer("healthy", speed=1.0) as sim:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "test_stopped.py", "-p", "no:cacheprovider",
                                 f"--endpoint={sim.url}", "--specperf-workers=2", f"--specperf-json={out}"],
                                cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            # Mid-case: the first case's four streams reached the simulator.
            while len(httpx.get(f"{sim.url}/sim/truth").json()) < 4:
                assert proc.poll() is None and time.monotonic() < deadline, "the case never reached the simulator"
                time.sleep(0.05)
            below = descendants(proc.pid)
            workers = sorted(p for p, cmd in below.items() if "execnet" in cmd or "import sys" in cmd)
            assert len(workers) == 2, below
            os.kill(workers[0], signal.SIGSTOP)  # alive, its pipe open, and silent
            # a safety net only: without the silence window this pytest would wait for the stopped worker forever
            text = proc.communicate(timeout=20 * silence + 60)[0].decode(errors="replace")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    lines = [x for x in text.splitlines() if "sent nothing for" in x]
    assert lines and all(f"worker local (pid {workers[0]}) sent nothing for" in x for x in lines), text[-3000:]
    results = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
    assert results["test_stopped"]["verdict"] == "error", results["test_stopped"]
    assert "sent nothing for" in results["test_stopped"]["reason"]
    after = results["test_after"]
    assert after["verdict"] == "passed" and len(after["workers"]) == 2, after
    assert not {w["pid"] for w in after["workers"]} & set(workers)  # opened afresh
    assert_none_left(below, "its pytest ended")  # the stopped worker too: killed, not left stopped
