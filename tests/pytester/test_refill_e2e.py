"""Closed-loop load with refill as a user runs it: ``requests=K`` on a marker, a prompt file swept at every level.

The run is a pytest subprocess against a simulator started here; what each request was and when it was in
flight is read back from the simulator's truth records by the response ids in the JSON report.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_specperf.sim import SimServer

CASES = """
import pytest

@pytest.mark.sustained(concurrency=3, requests=9, tokens=64, ctx=300, ramp_s=0.2)
def test_refill(specperf):
    r = specperf.result
    assert r.requests == 9 and r.concurrency == 3
"""

YAML = """
whole_file:
  load_sweep: {prompts: builtin:specbench-mini, sample: 8, concurrency: [1, 4], tokens: 32}
"""


def _in_flight(recs: list[dict[str, Any]], t: float) -> int:
    return sum(1 for r in recs if r["arrival_monotonic"] <= t < r["arrival_monotonic"] + r["total_s"])


def _all(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [*case["streams"], *case["warmup_drain_streams"]]


def test_requests_keep_n_in_flight_and_a_file_is_sent_whole(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_refill=CASES)
    pytester.makefile(".specperf.yaml", cases=YAML)
    out = pytester.path / "r.json"
    with SimServer("healthy", speed=5) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}",
                                            "-p", "no:cacheprovider")
        cases = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
        refill = [sim.truth(s["response_id"]) for s in _all(cases["test_refill"])]
        levels = {lv["concurrency"]: [sim.truth(s["response_id"]) for s in _all(lv)]
                  for lv in cases["whole_file"]["levels"]}
    res.assert_outcomes(passed=2)
    # 9 requests, never more than 3 at once on the server's own record, and 3 at once for most of the run
    case = cases["test_refill"]
    assert case["requests"] == 9 and len({r["id"] for r in refill}) == 9
    starts = sorted(r["arrival_monotonic"] for r in refill)
    assert max(_in_flight(refill, t) for t in starts) == 3
    assert case["warmup_s"] is not None and case["drain_s"] is not None and case["common_window_s"] > 0
    assert len(case["streams"]) + case["warmup_requests"] + case["drain_requests"] == 9
    # the table says what was left out of the judged figures
    assert any("steady window" in line and "warm-up" in line and "drain" in line for line in res.outlines)
    # the sweep sent every sampled prompt once at each level, one at a time at 1 user, four at once at 4
    for users, recs in levels.items():
        level = next(lv for lv in cases["whole_file"]["levels"] if lv["concurrency"] == users)
        assert level["requests"] == 8 and len(recs) == 8
        assert len({s["prompt_id"] for s in _all(level)}) == 8
        assert max(_in_flight(recs, r["arrival_monotonic"]) for r in recs) == users
    assert sum(f["n"] for f in cases["whole_file"]["categories"].values()) == 8


def test_fewer_requests_than_users_is_one_line_at_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.sustained(concurrency=4, requests=2, tokens=64)
        def test_too_few(specperf):
            pass
    """)
    res = pytester.runpytest_subprocess("--endpoint=http://127.0.0.1:9")  # nothing is sent: the mistake comes first
    res.assert_outcomes(failed=1)  # the bad case fails alone, before anything is measured
    res.stdout.fnmatch_lines(["*sustained(): requests=2 is below concurrency=4: each user needs a request to keep 4 "
                              "in flight; raise requests to 4 or more, or lower concurrency"])
