"""The plugin writing to and judging against a real PostgreSQL history, as a team's CI runners would share it."""

from __future__ import annotations

import json
import statistics

import pytest

from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target

CASE = """
import pytest

@pytest.mark.sustained(tokens=200, ctx=100, repeat=3)
def test_case(specperf):
    pass
"""


def test_runs_are_recorded_in_postgres_and_judged_against_it(pytester: pytest.Pytester, pg_url: str) -> None:
    pytester.makepyfile(test_perf=CASE)
    for i in range(6):
        res = pytester.runpytest_subprocess("--specperf-sim-speed=20", f"--specperf-history={pg_url}",
                                            f"--specperf-json=r{i}.json")
        res.assert_outcomes(passed=1)
        res.stdout.fnmatch_lines([f"run recorded as run {i + 1} in history postgresql://*"])
    with schema.open_store(Store(Target(url=pg_url))) as store:
        history = records.case_history(store, "test_perf.py::test_case")
    assert [len(h.trials["decode_tps"]) for h in history] == [3] * 6
    # the sixth run was judged against the five before it (not the baseline rule), from what the server holds
    (last,) = json.loads((pytester.path / "r5.json").read_text())["results"]
    decode = next(e for e in last["history"] if e["metric"] == "decode_tps")
    assert decode["runs"] == 5
    first = json.loads((pytester.path / "r0.json").read_text())["results"][0]
    # the first run's trend point is the geometric mean of the trials its own JSON file recorded
    assert decode["series"][0]["value"] == pytest.approx(
        statistics.geometric_mean([s["decode_tps"] for s in first["streams"]]))
