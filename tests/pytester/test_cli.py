"""The `specperf` command over runs saved by real pytest runs on the simulator.

A baseline at simulator speed 16, then a candidate at speed 8 (every rate halves: a real regression)
judged by the plugin itself with --specperf-compare; `specperf compare` must reach the same verdicts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.result_json import full

from pytest_specperf import cli
from pytest_specperf.storage import saved_runs as storage

CASES = '''
import pytest

@pytest.mark.two_point(ctx=200, repeat=5, long=1032)
def test_tp(specperf):
    pass

@pytest.mark.sustained(tokens=300, ctx=200, repeat=3)
def test_sus(specperf):
    pass
'''


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "test_cases.py", "-q", "-p", "no:cacheprovider", *args],
                          cwd=folder, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    (folder / "test_cases.py").write_text(CASES)
    (folder / "pytest.ini").write_text("[pytest]\n")
    done = _pytest(folder, "--specperf-sim-speed=16", "--specperf-save=base")
    assert done.returncode == 0, done.stdout[-2000:]
    done = _pytest(folder, "--specperf-sim-speed=8", "--specperf-save=new", "--specperf-compare=base")
    assert done.returncode == 1, done.stdout[-2000:]  # the plugin itself saw the regression
    return folder


def _main(folder: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--storage", str(folder / ".specperf" / "runs"), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _plugin_verdicts(folder: Path) -> set[tuple[str, Any, str]]:
    run = json.loads(next((folder / ".specperf" / "runs").glob("*_new.json")).read_text())
    return {(c["nodeid"], c["metric"], c["verdict"]) for r in run["results"] for c in r["comparisons"]}


def test_compare_reaches_the_plugins_verdicts_and_exits_1(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(runs, capsys, "compare", "base", "new")
    assert code == 1
    lines = re.findall(r"^  (\w+)\s+(\S+) (\w+): ", out, re.M)
    assert {(nodeid, metric, verdict) for verdict, nodeid, metric in lines} == _plugin_verdicts(runs)
    assert ("regressed", "test_cases.py::test_tp", "decode_tps") in lines


def test_compare_of_a_run_with_itself_passes(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(runs, capsys, "compare", "new", "new")
    assert code == 0 and "regressed" not in out


def test_list_and_show(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(runs, capsys, "list")
    assert code == 0
    assert re.search(r"^0001_base .* 2 results: 2 passed$", out, re.M)
    assert re.search(r"^0002_new .* 2 results: 2 failed$", out, re.M)
    code, out, _ = _main(runs, capsys, "show", "2")
    assert code == 0 and "[two_point] test_tp" in out and "regressed beyond" in out


def test_runs_are_found_from_a_subfolder(runs: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (runs / "sub" / "deeper").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(runs / "sub" / "deeper")
    assert cli.main(["show", "base"]) == 0
    assert "0001_base" in capsys.readouterr().out


def test_report_draws_both_sides_of_each_comparison(runs: Path, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    out_file = tmp_path / "r.html"
    code, _, _ = _main(runs, capsys, "report", "new", "-o", str(out_file), "--baseline", "base")
    assert code == 0
    page = out_file.read_text()
    data = json.loads(re.search(r'id="specperf-data">(.*?)</script>', page, re.S).group(1))
    base = json.loads(next((runs / ".specperf" / "runs").glob("*_base.json")).read_text())["results"]
    tp = next(ch for ch in data["charts"]["case-1"] if ch["id"].startswith("cmp"))
    assert tp["series"][0]["y"] == base[0]["samples_tps"]  # the baseline's trials, as saved
    assert tp["series"][1]["y"] == data["results"][0]["samples_tps"]


def test_bad_names_and_corrupt_files_are_one_line_errors(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = runs / ".specperf" / "runs" / "0007_broken.json"
    bad.write_text('{"format": "pytest-specperf/run", "version": 1, "results": [')
    try:
        code, out, err = _main(runs, capsys, "show", "nope")
        assert code == 2 and err.count("\n") == 1 and "no run 'nope'" in err and "specperf list" in err
        code, out, err = _main(runs, capsys, "compare", "base", "broken")
        assert code == 2 and err.count("\n") == 1 and "not valid JSON" in err
        code, out, _ = _main(runs, capsys, "list")
        assert code == 0 and re.search(r"^0007_broken\s+unreadable: .*not valid JSON", out, re.M)
        # the installed command too: no traceback, exit status 2
        done = subprocess.run([sys.executable, "-m", "pytest_specperf.cli", "--storage",
                               str(runs / ".specperf" / "runs"), "show", "broken"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    finally:
        bad.unlink()


def test_runs_measured_differently_are_not_judged_unless_strict(runs: Path, capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    folder = runs / ".specperf" / "runs"
    doc = json.loads(next(folder.glob("*_base.json")).read_text())
    doc["model"] = "another-model"
    other = folder / "0008_othermodel.json"
    other.write_text(json.dumps(doc))
    try:
        code, out, _ = _main(runs, capsys, "compare", "othermodel", "new")
        assert code == 0 and not re.search(r"^  regressed", out, re.M) and "  inconclusive " in out
        code, out, _ = _main(runs, capsys, "compare", "othermodel", "new", "--strict")
        assert code == 1 and "  regressed" in out
    finally:
        other.unlink()


def test_storage_that_is_missing_or_a_file_is_exit_2_and_list_names_what_it_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for folder, why in ((tmp_path / "nope", "no such folder"), (tmp_path / "afile", "is a file")):
        if why == "is a file":
            folder.write_text("x")
        assert cli.main(["--storage", str(folder), "list"]) == 2
        out, err = capsys.readouterr()
        assert not out and err.count("\n") == 1 and f"--storage {folder}" in err and why in err
    folder = tmp_path / "runs"
    good = storage.save_run(folder, [{"nodeid": "t.py::test_x", "verdict": "passed"}], {}, "good")
    (folder / "0002_bad.json").write_text("{")
    (folder / "notes.json").write_text("{}")
    assert cli.main(["--storage", str(folder), "list"]) == 0
    out, err = capsys.readouterr()
    assert re.search(rf"^{good.stem} .* 1 results: 1 passed$", out, re.M)
    assert re.search(r"^0002_bad\s+unreadable: .*not valid JSON", out, re.M)
    assert err.count("\n") == 1 and "skipped 2 file(s)" in err
    assert "0002_bad.json (not valid JSON" in err and "notes.json (not a run file name" in err


def test_report_that_cannot_be_drawn_is_one_line_and_a_chart_that_cannot_is_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_specperf.report import drawing
    from pytest_specperf.report import html as html_report

    folder = tmp_path / "runs"
    result = full({"nodeid": "t.py::test_x", "kind": "two_point", "verdict": "passed", "decode_tps": 50.0,
                   "samples_tps": [49.0, 50.0, 51.0], "ctx": 64})
    storage.save_run(folder, [result], {}, "one")

    def boom(*args: Any, **kwargs: Any) -> None:
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(drawing, "_draw_series", boom)  # every chart: each is a note, the report is written
    out_file = tmp_path / "reports" / "r.html"  # a folder not made yet: made, as the plugin's outputs make theirs
    assert cli.main(["--storage", str(folder), "report", "one", "-o", str(out_file)]) == 0
    page = out_file.read_text()
    assert "could not be drawn (ValueError: &#39;yerr&#39; must not contain negative values)" in page
    monkeypatch.setattr(html_report, "render", boom)  # the whole report: one line, exit 1, no traceback
    assert cli.main(["--storage", str(folder), "report", "one", "-o", str(tmp_path / "s.html")]) == 1
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "could not be drawn (ValueError: 'yerr' must not" in err
