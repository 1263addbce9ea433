"""--specperf-history end to end on the simulator: runs recorded, a slower deploy failed against its history,
the trend drawn, and a history that cannot be used costs nothing else (real pytest runs, real databases)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_specperf.sim import load_profile

FAST = "--specperf-sim-speed=20"
CASE = """
import pytest

@pytest.mark.sustained(tokens=300, ctx=200, repeat=3)
def test_case(specperf):
    pass
"""
#: the slow deploy's steps take three times as long: decode rate -67 % by the simulator's own profile. Five
#: runs of a busy machine at 20x speed can differ by 10 %, and five runs give the prediction only 4 degrees of
#: freedom (t = 5.6 at the case's alpha), so the test's deploy is far slower than the gate's threshold.
SLOWER = 1 / 3


def _slow_profile() -> str:
    raw = load_profile("healthy").to_dict()
    raw["step_ms"] = raw["step_ms"] / SLOWER
    raw["step_ms_per_1k_ctx"] = raw["step_ms_per_1k_ctx"] / SLOWER
    return yaml.safe_dump(raw)


def _specperf(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_specperf.cli", *args], cwd=folder, capture_output=True,
                          text=True, timeout=120)


def test_a_slower_deploy_fails_against_its_history_and_the_trend_shows_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=CASE)
    (pytester.path / "slow.yaml").write_text(_slow_profile())
    first = pytester.runpytest_subprocess(FAST, "--specperf-save=first")  # a saved run is recorded too
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["run recorded as run 1 in history */.specperf/history.sqlite"])
    second = pytester.runpytest_subprocess(FAST, "--specperf-history")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*1 earlier run(s) of this set-up, fewer than the 5 that estimate its run-to-run "
                                 "noise; judged against the latest (run 1, *) by the baseline rule*"])
    for _ in range(3):
        pytester.runpytest_subprocess(FAST, "--specperf-history").assert_outcomes(passed=1)
    slow = pytester.runpytest_subprocess(FAST, "--specperf-history", "--specperf-sim=slow.yaml",
                                         "--specperf-json=r.json", "--specperf-html=r.html",
                                         "--specperf-plots=plots", "--specperf-bencher=bencher.json")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(["*decode_tps *: -*% against its history of 5 runs (predicted *"])
    (r,) = json.loads((pytester.path / "r.json").read_text())["results"]
    decode = next(e for e in r["history"] if e["metric"] == "decode_tps")
    assert decode["verdict"] == "regressed" and len(decode["series"]) == 5
    assert abs(decode["effect"] - (SLOWER - 1)) < 0.12  # the truth: the profile's steps take 3x as long
    # the trend chart in the report and the plots; the Bencher export as before
    assert "decode_tps over 5 runs: regressed" in (pytester.path / "r.html").read_text()
    assert [p.suffix for p in (pytester.path / "plots").iterdir()] == [".png"]
    bencher = json.loads((pytester.path / "bencher.json").read_text())
    assert bencher["test_perf.py::test_case"]["decode-tps"]["value"] == pytest.approx(r["decode_tps"])

    listed = _specperf(pytester.path, "history")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[1] for line in listed.stdout.splitlines() if line.startswith("run ")] == [
        "1", "2", "3", "4", "5", "6"]
    assert "  FAILED test_perf.py::test_case: " in listed.stdout  # the slow run's verdict, with its reason
    trend = _specperf(pytester.path, "trend", "test_perf.py::test_case", "-o", "trend.png")
    assert trend.returncode == 0, trend.stderr
    assert "test_perf.py::test_case decode_tps: 6 run(s)" in trend.stdout
    assert (pytester.path / "trend.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", ["corrupt file", "unreachable server"])
def test_an_unusable_history_is_one_line_and_every_other_output_is_written(pytester: pytest.Pytester,
                                                                           kind: str) -> None:
    pytester.makepyfile(test_perf=CASE)
    if kind == "corrupt file":
        (pytester.path / "bad.sqlite").write_bytes(b"not a database\n" * 200)
        target, words = "bad.sqlite", "not a usable SQLite database; move it aside"
    else:
        target, words = f"postgresql://ci:pw@127.0.0.1:{_closed_port()}/perf", "check that the server is up"
    res = pytester.runpytest_subprocess(FAST, f"--specperf-history={target}", "--specperf-save=kept",
                                        "--specperf-json=r.json", "--specperf-markdown=r.md")
    res.assert_outcomes(passed=1)
    summary = [line for line in res.stdout.lines if line.startswith("--specperf-history: history ")]
    assert len(summary) == 1 and words in summary[0], res.stdout.str()
    assert "Traceback" not in res.stdout.str() + res.stderr.str()
    res.stdout.fnmatch_lines(["*[[]sustained[]] test_case*passed*", "run saved as *0001_kept.json"])
    assert json.loads((pytester.path / "r.json").read_text())["results"][0]["verdict"] == "passed"
    assert (pytester.path / ".specperf" / "runs" / "0001_kept.json").is_file()
    assert (pytester.path / "r.md").is_file()


@pytest.mark.parametrize(("value", "words"), [
    ("mysql://db/perf", "unknown scheme 'mysql'; give a file path, sqlite:///PATH or postgresql://USER@HOST/DB"),
    ("hist", "--specperf-history=hist is a folder; give a file, e.g. --specperf-history=hist/history.sqlite"),
])
def test_a_bad_history_option_stops_the_run_before_measuring(pytester: pytest.Pytester, value: str,
                                                             words: str) -> None:
    pytester.makepyfile(test_perf=CASE)
    (pytester.path / "hist").mkdir()
    res = pytester.runpytest_subprocess(FAST, f"--specperf-history={value}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert words in res.stderr.str()


def test_the_ini_twin_records_into_its_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=CASE)
    pytester.makeini("[pytest]\nspecperf_history = perf/history.db\n")
    res = pytester.runpytest_subprocess(FAST)
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["run recorded as run 1 in history */perf/history.db"])
    listed = _specperf(pytester.path, "history", "--history", "perf/history.db")
    assert listed.returncode == 0 and listed.stdout.startswith("run 1 "), listed.stderr
