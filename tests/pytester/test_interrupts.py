"""Ctrl-C (SIGINT) and CI's SIGTERM stop a real pytest run within 10 s in every phase, keep what was measured as a
partial run, and leave no process behind.

Each phase is reached by waiting for a marker the run itself leaves (a child process appearing, the simulator's
record of a request arriving, a saved run or a plot on disk), never by sleeping; then the signal goes, and the
run must have exited within ``EXIT_S`` of it. That bound is a deadline for an exit, not a performance figure:
a run that stops exits in about 2 s here, beside two CPU hogs in under 5 s, and one that hangs never exits.
Each exit time is recorded as the test's ``exit_s`` property (``--junitxml`` shows them).
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.processes import alive, descendants

from pytest_specperf.engines.llamacpp import default_model, find_binary
from pytest_specperf.engines.process import EngineNotFound
from pytest_specperf.sim import SimServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table in /proc")

EXIT_S = 10.0  # the promise: stopped within this long of the signal
READY_S = 120.0  # how long a phase may take to be reached on a loaded machine
SIGNALS = [signal.SIGINT, signal.SIGTERM]

QUICK = '''
def test_a_quick(specperf):
    specperf.sustained(tokens=16)
'''


def _run(pytester: pytest.Pytester, sig: signal.Signals, args: list[str], ready: Callable[[int], bool],
         record_property: Callable[[str, Any], None], after: Callable[[], None] | None = None) -> tuple[int, str]:
    """Start pytest with ``args``, wait for ``ready(its pid)``, send ``sig``; asserts an exit within EXIT_S and that
    nothing it started outlives it. Returns (exit status, output)."""
    log = pytester.path / "inner.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "CI")}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=pytester.path,
                                env=dict(env, PYTHONUNBUFFERED="1"), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_S
        while not ready(proc.pid):
            assert proc.poll() is None, f"the run ended before the phase: {log.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, "the phase was never reached"
            time.sleep(0.01)  # polling for the marker, not a wait for an outcome
        started = descendants(proc.pid)
        sent = time.monotonic()
        proc.send_signal(sig)
        if after is not None:
            after()
        try:
            proc.wait(timeout=EXIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"pytest still ran {EXIT_S:g} s after {sig.name}:\n{log.read_text(errors='replace')[-3000:]}")
        exit_s = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    record_property("exit_s", round(exit_s, 2))
    # What pytest stopped itself is gone when it exits; a grandchild may take one turn of its own loop.
    deadline = time.monotonic() + 5
    while (left := {p: c for p, c in {**started, **descendants(proc.pid)}.items() if alive(p)}) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # leave nothing behind for the next test
    assert not left, f"still running after pytest got {sig.name}: {left}"
    return proc.returncode, log.read_text(errors="replace")


def _saved_partial(pytester: pytest.Pytester) -> list[str]:
    """The ``partial`` of every saved run and of every history row (read from the files, not by the plugin)."""
    runs = sorted((pytester.path / ".specperf" / "runs").glob("*.json"))
    found = [json.loads(p.read_text())["partial"] for p in runs]
    db = pytester.path / ".specperf" / "history.sqlite"
    if db.exists():
        with sqlite3.connect(db) as conn:
            if conn.execute("SELECT name FROM sqlite_master WHERE name = 'runs'").fetchall():  # none: never written
                found += [row[0] for row in conn.execute("SELECT partial FROM runs")]
    return found


@pytest.fixture
def slow_sim() -> Iterator[SimServer]:
    """A slow server the outer test owns: a stream of a few thousand tokens lasts a minute."""
    with SimServer("healthy", speed=1.0) as sim:
        yield sim


def _cases_done(pytester: pytest.Pytester) -> int:
    """Cases in the run's JSON file, which the run rewrites (atomically) after every case."""
    path = pytester.path / "run.json"
    return len(json.loads(path.read_text())["results"]) if path.exists() else 0


def _requests(sim: SimServer, max_tokens: int, *, done: bool | None = None) -> int:
    return sum(r["max_tokens"] == max_tokens and (done is None or r["done"] == done) for r in sim.requests())


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_starting_the_simulator(pytester: pytest.Pytester, sig: signal.Signals,
                                record_property: Callable[[str, Any], None]) -> None:
    pytester.makepyfile(test_case=QUICK)

    def sim_started(pid: int) -> bool:  # the embedded simulator's child process exists, maybe not yet listening
        return any("pytest_specperf.sim" in c for c in descendants(pid).values())

    code, out = _run(pytester, sig, ["test_case.py", "--specperf-sim-speed=20"], sim_started, record_property)
    assert code == 2, out[-2000:]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_starting_an_engine(pytester: pytest.Pytester, sig: signal.Signals, monkeypatch: pytest.MonkeyPatch,
                            record_property: Callable[[str, Any], None]) -> None:
    if not (os.environ.get("SPECPERF_CACHE") or os.environ.get("XDG_CACHE_HOME")):  # pytester moved HOME
        monkeypatch.setenv("SPECPERF_CACHE", str(Path(pwd.getpwuid(os.getuid()).pw_dir, ".cache", "pytest-specperf")))
    try:
        find_binary(), default_model()
    except EngineNotFound as exc:
        if os.environ.get("SPECPERF_REQUIRE_ENGINE") == "1":
            pytest.fail(f"real engine required but unavailable: {exc}", pytrace=False)
        pytest.skip(f"real llama-server engine unavailable: {exc}")
    pytester.makepyfile(test_case=QUICK)

    def engine_started(pid: int) -> bool:  # llama-server runs (loading its model) below the run
        return any("llama-server" in c for c in descendants(pid).values())

    code, out = _run(pytester, sig, ["test_case.py", "--specperf-engine=llamacpp"], engine_started, record_property)
    assert code == 2, out[-2000:]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_during_warm_up(pytester: pytest.Pytester, sig: signal.Signals,
                        record_property: Callable[[str, Any], None]) -> None:
    pytester.makepyfile(test_case=QUICK)
    with SimServer("healthy", speed=0.02) as sim:  # the warm-up's 8 tokens take seconds
        code, out = _run(pytester, sig, ["test_case.py", f"--endpoint={sim.url}"],
                         lambda _: _requests(sim, 8) > 0, record_property)  # the warm-up asks for 8 tokens
    assert code == 2, out[-2000:]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_building_prompts(pytester: pytest.Pytester, sig: signal.Signals, slow_sim: SimServer,
                          record_property: Callable[[str, Any], None]) -> None:
    # After the first case, the second builds 64 prompts of 30,000 server-counted tokens before it sends any.
    pytester.makepyfile(test_case=QUICK + '''
def test_b_many_long_prompts(specperf):
    specperf.sustained(tokens=16, ctx=30000, concurrency=64)
''')
    code, out = _run(pytester, sig, ["test_case.py", f"--endpoint={slow_sim.url}", "--specperf-save",
                                     "--specperf-json=run.json"],
                     lambda _: _cases_done(pytester) == 1, record_property)
    assert code == 2, out[-2000:]
    assert _saved_partial(pytester) == ["interrupted", "interrupted"]


@pytest.mark.parametrize("users", [1, 64])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_mid_stream(pytester: pytest.Pytester, sig: signal.Signals, users: int, slow_sim: SimServer,
                    record_property: Callable[[str, Any], None]) -> None:
    pytester.makepyfile(test_case=QUICK + f'''
def test_b_long(specperf):
    specperf.sustained(tokens=3000, concurrency={users})
''')
    code, out = _run(pytester, sig, ["test_case.py", f"--endpoint={slow_sim.url}", "--specperf-save",
                                     "--specperf-json=run.json"],
                     lambda _: _cases_done(pytester) == 1 and _requests(slow_sim, 3000, done=False) >= users,
                     record_property)
    assert code == 2, out[-2000:]
    assert _saved_partial(pytester) == ["interrupted", "interrupted"]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_mid_stream_over_worker_processes(pytester: pytest.Pytester, sig: signal.Signals, slow_sim: SimServer,
                                          record_property: Callable[[str, Any], None]) -> None:
    """The controller waits for its workers' answers while hearing their heartbeats (scale/pool.py): a signal
    stops it there as anywhere, and the worker processes with it."""
    pytester.makepyfile(test_case=QUICK + '''
def test_b_long(specperf):
    specperf.sustained(tokens=3000, concurrency=4)
''')
    code, out = _run(pytester, sig, ["test_case.py", f"--endpoint={slow_sim.url}", "--specperf-save",
                                     "--specperf-json=run.json", "--specperf-workers=2"],
                     lambda _: _cases_done(pytester) == 1 and _requests(slow_sim, 3000, done=False) >= 4,
                     record_property)
    assert code == 2, out[-2000:]
    assert _saved_partial(pytester) == ["interrupted", "interrupted"]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_between_ab_trials(pytester: pytest.Pytester, sig: signal.Signals,
                           record_property: Callable[[str, Any], None]) -> None:
    pytester.makepyfile(test_case='''
import pytest


@pytest.mark.sustained(tokens=16)
def test_a_quick():
    pass


@pytest.mark.sustained(tokens=300, repeat=9)
def test_b_trials():
    pass
''')
    with SimServer("healthy", speed=2.0) as a, SimServer("healthy", speed=2.0) as b:
        # A's first trial of the second case has ended: the run goes on to B's, trial after trial.
        code, out = _run(pytester, sig, ["test_case.py", f"--specperf-ab={a.url},{b.url}", "--specperf-save",
                                         "--specperf-json=run.json"],
                         lambda _: _requests(a, 300, done=True) > 0, record_property)
        seen = sorted({r["max_tokens"] for r in a.requests()})
    assert code == 2, (seen, out[-2000:])
    assert _saved_partial(pytester) == ["interrupted", "interrupted"]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_while_writing_outputs(pytester: pytest.Pytester, sig: signal.Signals,
                               record_property: Callable[[str, Any], None]) -> None:
    # Eight cases; the run is saved first, then recorded in the history, then drawn: the signal goes as soon as the
    # saved run is on disk, while the history and the drawings are still to come.
    pytester.makepyfile(test_case="\n".join(f'''
def test_{i}(specperf):
    specperf.sustained(tokens=16)
''' for i in range(8)))
    runs = pytester.path / ".specperf" / "runs"
    code, out = _run(pytester, sig, ["test_case.py", "--specperf-sim-speed=20", "--specperf-save",
                                     "--specperf-plots=plots", "--specperf-json=run.json", "--specperf-html=r.html"],
                     lambda _: runs.is_dir() and any(runs.glob("*.json")), record_property)
    assert code == 2, out[-2000:]
    # every case was measured before the signal: the JSON has them all, and the run is kept whole in both places
    assert len(json.loads((pytester.path / "run.json").read_text())["results"]) == 8
    assert _saved_partial(pytester) == ["", ""], out[-2000:]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_while_the_history_is_written(pytester: pytest.Pytester, sig: signal.Signals,
                                      record_property: Callable[[str, Any], None]) -> None:
    """The history's write waits on another writer's lock when the signal comes; the lock is released right
    after it. The run must still be recorded (whole: every case was measured) and pytest exit at once after."""
    pytester.makepyfile(test_case=QUICK)
    db = pytester.path / ".specperf" / "history.sqlite"
    db.parent.mkdir()
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another run writing its history
    runs = pytester.path / ".specperf" / "runs"
    try:
        code, out = _run(pytester, sig, ["test_case.py", "--specperf-sim-speed=20", "--specperf-save"],
                         lambda _: runs.is_dir() and any(runs.glob("*.json")), record_property,
                         after=lambda: other.execute("COMMIT"))
    finally:
        other.close()
    assert code == 2, out[-2000:]
    assert _saved_partial(pytester) == ["", ""], out[-2000:]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_while_another_writer_holds_the_history(pytester: pytest.Pytester, sig: signal.Signals,
                                                record_property: Callable[[str, Any], None]) -> None:
    """Another writer holds the history's lock for longer than the run lives: the signal ends the wait (SQLite's
    own would last its 30 s timeout), pytest exits at once, and nothing is lost: the saved run is on disk, the
    summary names how to add it to the history, and that import then records it whole."""
    pytester.makepyfile(test_case=QUICK)
    db = pytester.path / ".specperf" / "history.sqlite"
    db.parent.mkdir()
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another run writing its history, for the whole of this one
    runs = pytester.path / ".specperf" / "runs"
    try:
        code, out = _run(pytester, sig, ["test_case.py", "--specperf-sim-speed=20", "--specperf-save"],
                         lambda _: runs.is_dir() and any(runs.glob("*.json")), record_property)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert code == 2, out[-2000:]
    assert "specperf history --import" in out, out[-2000:]
    assert _saved_partial(pytester) == [""]  # the saved run only: the history has no table yet
    imported = subprocess.run([sys.executable, "-m", "pytest_specperf.cli", "history", "--import"], cwd=pytester.path,
                              capture_output=True, text=True)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert _saved_partial(pytester) == ["", ""]


FINALIZER = '''
import pathlib
import threading


class Slow:
    def __del__(self):  # the signal lands here, where Python prints the KeyboardInterrupt and goes on
        pathlib.Path("started").write_text("")
        while not pathlib.Path("signalled").exists():
            pass


def test_b_finalizer(specperf):
    specperf.sustained(tokens=16)
    Slow()
    threading.Event().wait()  # a wait with no end: only a KeyboardInterrupt gets out of it
'''


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_lost_in_a_finalizer(pytester: pytest.Pytester, sig: signal.Signals,
                                      record_property: Callable[[str, Any], None]) -> None:
    pytester.makepyfile(test_case=QUICK + FINALIZER)
    code, out = _run(pytester, sig, ["test_case.py", "--specperf-sim-speed=20", "--specperf-save"],
                     lambda _: (pytester.path / "started").exists(), record_property,
                     after=(pytester.path / "signalled").touch)
    assert "Exception ignored" in out  # the first KeyboardInterrupt was indeed lost
    assert code == 2, out[-2000:]
    assert _saved_partial(pytester) == ["interrupted", "interrupted"]


ALARM = '''
import signal
import threading

from pytest_specperf.pytest_plugin.interrupts import REDELIVER_S


def test_alarm():
    fired = threading.Event()
    signal.signal(signal.SIGALRM, lambda *_: fired.set())
    signal.setitimer(signal.ITIMER_REAL, 0.01)
    assert fired.wait(60)
    # past the watcher's re-delivery: a Ctrl-C it made up would land in this wait
    assert not threading.Event().wait(2.5 * REDELIVER_S)
'''


def test_another_signal_is_no_interrupt(pytester: pytest.Pytester) -> None:
    """A signal the project handles itself (a SIGALRM, as pytest-timeout's signal method sends) wakes the watcher
    as every handled signal does; it must not become a Ctrl-C."""
    pytester.makepyfile(test_alarm=ALARM)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_an_interrupt_inside_generated_code_exits_with_pytests_status(pytester: pytest.Pytester) -> None:
    """A signal can land in code Python built from source: a dataclass's methods, made while a module the run
    imports on first use loads (seen: ``import httpx`` while an engine started, 2 runs in 6). pytest takes that
    KeyboardInterrupt like any other, and the run must still exit with pytest's status 2, not by SIGINT."""
    pytester.makepyfile(test_exec='def test_x():\n    exec("raise KeyboardInterrupt")\n')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 2, result.outlines[-5:]


XDIST_LONG = "".join(f'''
def test_long_{i}(specperf):
    specperf.sustained(tokens=3000)
''' for i in range(4))


def test_xdist_workers_mid_stream(pytester: pytest.Pytester, slow_sim: SimServer,
                                  record_property: Callable[[str, Any], None]) -> None:
    """SIGINT to the controller alone (as a Ctrl-C where the workers run in a group of their own) while one xdist
    worker streams and the other waits for the endpoint (one case at a time per endpoint): every worker ends
    within EXIT_S, and so does the run."""
    pytester.makepyfile(test_case=XDIST_LONG)
    code, out = _run(pytester, signal.SIGINT, ["test_case.py", "-n", "2", f"--endpoint={slow_sim.url}"],
                     lambda pid: _requests(slow_sim, 3000, done=False) >= 1, record_property)
    assert code == 2, out[-2000:]


def test_xdist_workers_and_their_simulator(pytester: pytest.Pytester,
                                           record_property: Callable[[str, Any], None]) -> None:
    """The controller starts the embedded simulator the workers share, once the first of them needs it: with CI's
    SIGTERM to the controller while the workers measure, the workers and the simulator are gone within EXIT_S."""
    pytester.makepyfile(test_case=XDIST_LONG)

    def simulator_up(pid: int) -> bool:
        return any("pytest_specperf.sim" in c for c in descendants(pid).values())

    code, out = _run(pytester, signal.SIGTERM, ["test_case.py", "-n", "2", "--specperf-sim-speed=1"], simulator_up,
                     record_property)
    assert code == 2, out[-2000:]


XDIST_WAIT = "".join(f'''
def test_wait_{i}(specperf, request):
    import os, pathlib, threading
    from pytest_specperf.pytest_plugin import interrupts
    specperf.sustained(tokens=16)
    worker = os.environ["PYTEST_XDIST_WORKER"]
    pathlib.Path("waiting-" + worker).write_text("")
    try:
        threading.Event().wait()  # a wait only a signal ends
    finally:  # which signal stopped this worker
        pathlib.Path("stopped-" + worker).write_text(str(request.config.stash[interrupts.KEY].signum))
''' for i in range(2))


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_xdist_workers_blocked_in_a_wait(pytester: pytest.Pytester, sig: signal.Signals,
                                         record_property: Callable[[str, Any], None]) -> None:
    """Both workers measured a case and then block where only a signal gets them out. The signal goes to the
    controller alone, which passes it on: each worker stops for that signal at once. (xdist's own stop would
    wait out execnet's 5 s grace and then interrupt each worker with a SIGINT of its own making.)"""
    pytester.makepyfile(test_case=XDIST_WAIT)
    code, out = _run(pytester, sig, ["test_case.py", "-n", "2", "--specperf-sim-speed=20"],
                     lambda _: len(list(pytester.path.glob("waiting-gw*"))) == 2, record_property)
    assert code == 2, out[-2000:]
    stopped = {p.name: p.read_text() for p in pytester.path.glob("stopped-gw*")}
    assert stopped == {"stopped-gw0": str(int(sig)), "stopped-gw1": str(int(sig))}, out[-2000:]
