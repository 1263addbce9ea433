"""Installing the plugin changes nothing in a run that does not use it: real pytest runs in subprocesses."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAST = "--specperf-sim-speed=20"
PERF_CASE = """
import pytest

@pytest.mark.two_point(ctx=64, long=1032)  # a span past the timing noise at speed 20
def test_perf(specperf):
    pass
"""
# The controller counts its simulator children at the end of the session, while they still run.
COUNT_SIMS = """
import os
from pathlib import Path


def _sim_children():
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        found += ppid == os.getpid() and b"pytest_specperf.sim" in cmd
    return found


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        Path("sims.txt").write_text(str(_sim_children()))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts processes through /proc")
@pytest.mark.parametrize(("perf_cases", "sims"), [(0, 0), (1, 1)])
def test_xdist_starts_a_simulator_only_for_perf_cases(pytester: pytest.Pytester, perf_cases: int,
                                                      sims: int) -> None:
    pytester.makeconftest(COUNT_SIMS)
    pytester.makepyfile(test_plain="def test_a(): pass\ndef test_b(): pass\n")
    if perf_cases:
        pytester.makepyfile(test_perf=PERF_CASE)
    res = pytester.runpytest_subprocess("-n", "2", FAST, "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2 + perf_cases)
    assert (pytester.path / "sims.txt").read_text() == str(sims)  # one simulator shared by both workers


def test_plugin_works_without_fcntl(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # As on Windows: the endpoint lock must not need fcntl (filelock picks what the OS has). Without fcntl
    # filelock falls back to lock files whose existence is the lock, and an flock-style lock file left by
    # an earlier test on a reused port would read as held forever: a folder of its own.
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(pytester.path / "locks"))
    pytester.makepyfile(test_perf=PERF_CASE)
    code = ("import sys; sys.modules['fcntl'] = None; import pytest; "
            f"sys.exit(pytest.main(['{FAST}', '-p', 'no:cacheprovider']))")
    res = pytester.run(sys.executable, "-c", code)
    assert res.ret == 0
    res.stdout.fnmatch_lines(["*1 passed*"])


@pytest.mark.parametrize("asked", [False, True])
def test_step_summary_is_written_only_with_markdown(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                    asked: bool) -> None:
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_perf=PERF_CASE)
    args = [FAST, *([f"--specperf-markdown={pytester.path / 'own.md'}"] if asked else [])]
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    assert summary.exists() is asked
    if asked:
        assert summary.read_text().startswith("## specperf\n\n| case |")


def test_readme_first_command_has_no_config_warning(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # `pip install -e .` has no test extras: pytest-timeout and pytest-benchmark are absent, as -p no:... makes
    # them here, and the child is a plain run, not one of this suite's xdist workers (pytest-benchmark warns on
    # their variables). Config warnings come before any test runs, so collecting shows them (measurement notes
    # depend on the data).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(REPO / name, pytester.path / name)
    shutil.copytree(REPO / "perf_cases", pytester.path / "perf_cases")
    res = pytester.runpytest_subprocess("perf_cases/", "--collect-only", "-p", "no:timeout", "-p", "no:benchmark",
                                        "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.OK
    text = res.stdout.str() + res.stderr.str()
    assert "warnings summary" not in text and "Warning" not in text, text
