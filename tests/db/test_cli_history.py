"""`specperf history` and `specperf trend` over a SQLite history built from saved runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_specperf import cli
from pytest_specperf.compare import storage


def _save(folder: Path, i: int, level: float, rng: np.random.Generator) -> None:
    streams = [{"decode_tps": float(100 * math.exp(level + rng.normal(0, 0.01))), "ttft_s": 0.2} for _ in range(4)]
    result = {"nodeid": "t.py::case", "kind": "sustained", "model": "m", "server": "sim", "verdict": "passed",
              "decode_tps": streams[0]["decode_tps"], "ttft_s": 0.2, "streams": streams}
    storage.save_run(folder, [result], {"model": "m", "server": "sim", "commit": {"id": f"commit{i:02d}"}}, f"r{i}")


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
    assert cli.main(["trend", "t.py::case", "--history", str(db), "-o", str(tmp_path / "t.svg")]) == 0
    out = capsys.readouterr().out
    # the change is marked at the eleventh run, with its size (the truth: -15 %)
    marked = [line for line in out.splitlines() if "<- change" in line]
    assert len(marked) == 1 and "commit10" in marked[0]  # decode_tps only: ttft_s is flat
    effect = float(marked[0].split("<- change ")[1].split()[0].rstrip("%")) / 100
    assert abs(effect - (-0.15)) < 0.03
    assert (tmp_path / "t.svg").read_text().lstrip().startswith("<?xml")


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
