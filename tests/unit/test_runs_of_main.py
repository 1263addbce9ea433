"""Runs saved by the code of commit 0369b2c (before results became records at the storage edge only) still load and
judge alike: ``saved_runs/main_0369b2c/`` holds a run of every closed- and open-loop kind plus a case that could not
be measured (``0001_base``), and the same cases judged by the plugin against it (``0002_compared``), written by
``pytest --specperf-save`` on the simulator (the cases: ``main_0369b2c/cases.py``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf import cli
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.storage import saved_runs as storage

FOLDER = Path(__file__).parent / "saved_runs" / "main_0369b2c"


def _doc(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((FOLDER / name).read_text())
    return out


def _stored_verdicts() -> Counter[tuple[str, Any, Any, Any, str]]:
    """What the plugin of that commit decided against the baseline, comparison by comparison."""
    return Counter((c["nodeid"], c["ctx"], c.get("users"), c["metric"], c["verdict"])
                   for r in _doc("0002_compared.json")["results"] for c in r.get("comparisons") or [])


def test_every_result_of_the_old_runs_loads() -> None:
    for name in ("0001_base.json", "0002_compared.json"):
        run = storage.load_run(FOLDER / name)
        assert run is not None
        loaded = run.typed_results()
        assert [r.nodeid for r in loaded] == [r["nodeid"] for r in _doc(name)["results"]]
        kinds = Counter(str(r["kind"]) for r in _doc(name)["results"])
        assert kinds == Counter({"sustained": 2, "two_point": 1, "ctx_sweep": 1, "load_sweep": 1, "rate": 1,
                                 "session": 1})


def test_the_command_judges_the_old_runs_as_the_plugin_did(capsys: pytest.CaptureFixture[str]) -> None:
    """``specperf compare`` over the two files reaches every verdict the plugin of that commit stored, and the
    case that could not be measured is skipped on both sides, not compared."""
    base, new = (storage.load_run(FOLDER / n) for n in ("0001_base.json", "0002_compared.json"))
    assert base is not None and new is not None
    ccs, fail = cli.judge(base, new, 0.05, "warn")
    measured = Counter((cc.nodeid, cc.ctx, cc.users, cc.metric, cc.verdict) for cc in ccs if cc.metric is not None)
    assert measured == _stored_verdicts() and fail == []
    errored = [cc for cc in ccs if cc.nodeid.endswith("test_too_long")]
    assert [(cc.verdict, cc.metric) for cc in errored] == [("skipped", None)]
    assert "baseline errored" in errored[0].reason or "candidate errored" in errored[0].reason


def test_the_command_shows_the_old_run_with_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--storage", str(FOLDER), "show", "0001_base"]) == 0
    out = capsys.readouterr().out
    assert "test_too_long" in out and "error" in out and "test_session" in out


def test_every_kind_round_trips_record_json_record() -> None:
    """record -> JSON -> record is the same record for every kind of the old runs, the error record among them, and
    the JSON it writes is the JSON it was read from."""
    seen = set()
    for name in ("0001_base.json", "0002_compared.json"):
        for data in _doc(name)["results"]:
            record = load_record(data)
            assert to_dict(record) == data
            assert load_record(to_dict(record)) == record
            seen.add(type(record).__name__)
    assert seen == {"SustainedResult", "TwoPointResult", "SweepResult", "LoadSweepResult", "RateResult",
                    "SessionResult", "ErrorRecord"}


def test_the_report_draws_against_an_old_baseline_with_an_errored_case(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The comparison charts read the baseline's results as records: its case that could not be measured is
    skipped, not read as a damaged result (which cost the whole report before)."""
    out = tmp_path / "r.html"
    code = cli.main(["--storage", str(FOLDER), "report", "0002_compared", "-o", str(out), "--baseline", "0001_base"])
    assert code == 0, capsys.readouterr().err
    assert out.stat().st_size > 10_000 and "test_too_long" in out.read_text()
