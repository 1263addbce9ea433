"""`specperf history` and `specperf trend` over a SQLite history built from saved runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.result_json import full

from pytest_specperf import cli
from pytest_specperf.storage import saved_runs as storage


def _save(folder: Path, i: int, level: float, rng: np.random.Generator) -> None:
    streams = [{"decode_tps": float(100 * math.exp(level + rng.normal(0, 0.01))), "ttft_s": 0.2} for _ in range(4)]
    result = {"nodeid": "t.py::case", "kind": "sustained", "model": "m", "server": "sim", "verdict": "passed",
              "decode_tps": streams[0]["decode_tps"], "ttft_s": 0.2, "streams": streams}
    meta = {"model": "m", "server": "sim", "commit": {"id": f"commit{i:02d}"}}
    storage.save_run(folder, [full(result)], meta, f"r{i}")


def test_saved_runs_import_once_and_the_trend_shows_the_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    folder, db = tmp_path / "runs", tmp_path / "h.sqlite"
    rng = np.random.default_rng(9)
    for i in range(16):
        _save(folder, i, 0.0 if i < 10 else math.log(0.85), rng)  # 15 % slower from the eleventh run
    base = ["--storage", str(folder), "history", "--history", str(db)]
    assert cli.main([*base, "--import"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("imported 16 run(s) from") and out.count("\nrun ") == 16
    assert cli.main([*base, "--import"]) == 0
    assert "imported 0 run(s)" in capsys.readouterr().out
    # -o in a folder not made yet: made, as the plugin's outputs make theirs
    assert cli.main(["trend", "t.py::case", "--history", str(db), "-o", str(tmp_path / "charts" / "t.svg")]) == 0
    out = capsys.readouterr().out
    # the change is marked at the eleventh run, with its size (the truth: -15 %)
    marked = [line for line in out.splitlines() if "<- change" in line]
    assert len(marked) == 1 and "commit10" in marked[0]  # decode_tps only: ttft_s is flat
    effect = float(marked[0].split("<- change ")[1].split()[0].rstrip("%")) / 100
    assert abs(effect - (-0.15)) < 0.03
    assert (tmp_path / "charts" / "t.svg").read_text().lstrip().startswith("<?xml")


def test_trend_of_an_unknown_case_names_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, db = tmp_path / "runs", tmp_path / "h.sqlite"
    _save(folder, 0, 0.0, np.random.default_rng(1))
    assert cli.main(["--storage", str(folder), "history", "--import", "--history", str(db)]) == 0
    capsys.readouterr()
    assert cli.main(["trend", "other", "--history", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no runs of 'other'" in err and "known cases include: t.py::case" in err


def test_trend_marks_no_change_where_the_gate_would_not_look_for_one(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Fewer runs than the gate's change-point check needs: the trend shows the runs but marks no change, since the
    gate would mark none (a short series' change points are often spurious)."""
    from pytest_specperf.history.decide import CHANGE_MIN_RUNS

    folder, db = tmp_path / "runs", tmp_path / "h.sqlite"
    rng = np.random.default_rng(9)
    n = CHANGE_MIN_RUNS - 1
    for i in range(n):
        _save(folder, i, 0.0 if i < n - 3 else math.log(0.85), rng)  # the step the longer history above marks
    assert cli.main(["--storage", str(folder), "history", "--import", "--history", str(db)]) == 0
    capsys.readouterr()
    assert cli.main(["trend", "t.py::case", "--history", str(db)]) == 0
    out = capsys.readouterr().out
    assert "<- change" not in out


def _case(nodeid: str, decode: list[float], rng: np.random.Generator) -> Any:
    """A sustained result whose streams' TTFT differ (150 to 250 ms); its ttft_s is their median, as measured."""
    from test_gate import _typed

    ttft = [float(x) for x in rng.uniform(0.15, 0.25, len(decode))]
    return _typed({"nodeid": nodeid, "kind": "sustained", "model": "m", "server": "sim", "verdict": "passed",
                   "decode_tps": float(np.median(decode)), "ttft_s": float(np.median(ttft)), "ctx": 100,
                   "tokens": 200,
                   "streams": [{"decode_tps": d, "ttft_s": t} for d, t in zip(decode, ttft, strict=True)]})


def test_history_lists_verdicts_and_trend_marks_the_first_failing_run(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """10 runs at 100 tok/s, then a deploy 7 % slower that gets slower still (85, 80, 80), each run judged and
    recorded as a gated run is: every one fails its history gate. The change point of the runs' levels alone falls
    at the second slow run (the larger step); the trend marks it where the gate first failed, run 11."""
    from test_gate import _meta, _trials

    from pytest_specperf.history import against_history
    from pytest_specperf.report.table import cells
    from pytest_specperf.storage import records, schema
    from pytest_specperf.storage.store import Store, Target

    db = tmp_path / "h.sqlite"
    rng = np.random.default_rng(51)
    levels = [0.0] * 10 + [math.log(x) for x in (0.93, 0.85, 0.8, 0.8)]
    with schema.open_store(Store(Target(path=db))) as store:
        for i, lv in enumerate(levels):
            r, *others = (_case(nodeid, _trials(rng, level), rng) for nodeid, level in
                          (("t.py::test_single_user", lv), ("u.py::test_long[a]", 0.0), ("u.py::test_long[b]", 0.0)))
            if i >= 10:
                against_history.judge(store, r, {}, max_regression=0.05)
                assert r.verdict == "failed", r.reason
            records.record_run(store, [r, *others], _meta(i), gated=True)
        stored = records.result_of(store, 11, "t.py::test_single_user")
    assert stored is not None
    assert cli.main(["history", "test_single_user", "--history", str(db)]) == 0  # a unique test name
    out = capsys.readouterr().out.splitlines()
    runs = [line for line in out if line.startswith("run ")]
    assert len(runs) == 14 and runs[0].endswith("1 case(s): 1 passed") and runs[-1].endswith("1 case(s): 1 failed")
    failed = [line for line in out if line.startswith("  FAILED t.py::test_single_user: t.py::test_single_user "
                                                      "decode_tps")]
    assert len(failed) == 4 and all("against its history of 10 runs" in line for line in failed), out
    assert sum("held out of the prediction: t.py::test_single_user (failed its history gate; if the change is meant: "
               "specperf history accept " in line for line in out) == 4

    # a test name matching two cases is one line naming both
    assert cli.main(["trend", "test_long", "--history", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches 2 cases" in err and "u.py::test_long[a], u.py::test_long[b]" in err
    assert cli.main(["trend", "test_single_user", "--history", str(db)]) == 0
    out = capsys.readouterr().out
    decode = out.split(" ttft_s: ")[0].splitlines()
    marked = [line for line in decode if "<- change" in line]
    assert len(marked) == 1 and marked[0].split()[1] == "11", out
    assert "first run to fail its history gate" in marked[0] and "FAILED its history gate" in marked[0]
    # TTFT as the table shows it, the same figure in the same unit (ms), and the statistic named
    ttft = out.split(" ttft_s: ")[1].splitlines()
    assert "ttft as the table shows it (p50 of the streams)" in ttft[0]
    row11 = next(line for line in ttft if line.split()[:2] == ["run", "11"])
    assert f"ttft {cells(stored)[2]}  judged" in row11, (row11, cells(stored)[2])
    # the run failed its history gate on decode alone: its TTFT row says so, not that TTFT failed
    assert "FAILED its history gate on decode_tps (ttft_s passed)" in row11, row11
