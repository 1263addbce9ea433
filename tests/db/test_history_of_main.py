"""A history database written by the code of commit 0369b2c still loads: ``data/history_0369b2c.sqlite`` holds eight
runs of the cases in ``tests/unit/saved_runs/main_0369b2c/cases.py`` (every closed- and open-loop kind, and one case
that could not be measured), recorded by ``pytest --specperf-history`` on the simulator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_specperf import cli
from pytest_specperf.storage import records
from pytest_specperf.storage.schema import open_store
from pytest_specperf.storage.store import Store, Target

DATA = Path(__file__).parent / "data" / "history_0369b2c.sqlite"
RUN = Path(__file__).parents[1] / "unit" / "saved_runs" / "main_0369b2c" / "0001_base.json"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    out = tmp_path / "old.sqlite"
    shutil.copy(DATA, out)
    return out


def test_the_old_history_lists_its_runs_and_verdicts(db: Path) -> None:
    saved = json.loads(RUN.read_text())["results"]
    with open_store(Store(Target(path=db))) as store:
        assert [r["id"] for r in records.runs(store)] == list(range(1, 9))
        first = records.run_verdicts(store)[1]
        assert sorted((n, v) for n, v, _ in first) == sorted((r["nodeid"], r["verdict"]) for r in saved)
        error = next(r for r in saved if r["verdict"] == "error")
        assert (error["nodeid"], "error", error["reason"]) in first
        keys = records.case_keys(store)
        assert "test_cases.py::test_load@users=2" in keys and "test_cases.py::test_sweep@ctx=512" in keys
        assert not any(k.endswith("test_too_long") for k in keys)  # an error measured nothing


def test_every_stored_result_of_the_old_history_loads_whole(db: Path) -> None:
    """Each run's stored result of each case reads back as the result the run file of run 1 holds."""
    saved = {r["nodeid"]: r for r in json.loads(RUN.read_text())["results"]}
    with open_store(Store(Target(path=db))) as store:
        for nodeid, r in saved.items():
            stored = records.record_of(store, 1, nodeid)
            assert stored is not None
            assert (stored.nodeid, stored.kind, stored.verdict) == (nodeid, r["kind"], r["verdict"])


def test_the_command_lists_the_old_history(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["history", "--history", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("\nrun ") + out.startswith("run ") == 8 and "ERROR test_cases.py::test_too_long" in out
