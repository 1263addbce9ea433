"""Load cases as a user runs them: markers, YAML, direct calls, compare per level, xdist (A/B: test_crossover_e2e).

Runs are pytest subprocesses against simulators started here, so every stream's truth record can be
read back from the simulator after the run (by the response ids in the JSON report).
"""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from support.load_helpers import true_aggregate

from pytest_specperf.run.load import knee
from pytest_specperf.sim import SimServer

CASES = """
import pytest

@pytest.mark.sustained(concurrency=4, tokens=300, ctx=300, min_tps=1e5)
def test_every_user_floor(specperf):
    pass

@pytest.mark.sustained(concurrency=4, tokens=300, ctx=300, min_total_tps=1e6)
def test_aggregate_floor(specperf):
    pass

@pytest.mark.sustained(concurrency=4, tokens=300, ctx=300, ramp_s=0.2)
def test_ramped(specperf):
    assert specperf.result.concurrency == 4

def test_direct(specperf):
    r = specperf.load_sweep(concurrency=[1, 2], tokens=64, ctx=200)
    assert [lv["concurrency"] for lv in r.levels] == [1, 2]
"""

YAML = """
sweep:
  load_sweep: {concurrency: [1, 2, 4, 8], tokens: 200, ctx: 300, min_total_tps: {8: 1000000}}
"""


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _by_name(doc: dict) -> dict[str, dict]:
    return {r["nodeid"].split("::")[-1]: r for r in doc["results"]}


def test_load_cases_from_markers_yaml_and_direct_calls(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_load=CASES)
    pytester.makefile(".specperf.yaml", cases=YAML)
    out, md, xml = pytester.path / "r.json", pytester.path / "r.md", pytester.path / "junit.xml"
    with SimServer("batching", speed=5) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}",
                                            f"--specperf-markdown={md}", f"--junitxml={xml}", "-p", "no:cacheprovider")
        doc = _json(out)
        cases = _by_name(doc)
        sweep = cases["sweep"]
        truths = {lv["concurrency"]: [sim.truth(s["response_id"]) for s in lv["streams"]] for lv in sweep["levels"]}
        ramped = [sim.truth(s["response_id"]) for s in cases["test_ramped"]["streams"]]
    res.assert_outcomes(passed=2, failed=3)
    text = res.stdout.str()
    # Floors: min_tps on the 10th-percentile user, min_total_tps on the aggregate, per level in a sweep.
    assert "p10 user decode" in text and "< min_tps 100000 with 4 users" in text
    assert "< min_total_tps 1e+06 with 4 users" in text
    assert "at 8 users: aggregate" in text
    assert cases["sweep"]["verdict"] == "failed"
    assert [lv["verdict"] for lv in sweep["levels"]] == ["passed", "passed", "passed", "failed"]
    # The knee is where the true aggregate stops growing 10% per doubling (batching: past 2 users).
    true_totals = [(c, true_aggregate(recs)) for c, recs in truths.items()]
    assert knee(true_totals) == 2 and sweep["knee"] == 2, true_totals
    for lv, (_, true_total) in zip(sweep["levels"], true_totals, strict=True):
        assert abs(lv["total_tps"] / true_total - 1) < 0.03, (lv["concurrency"], lv["total_tps"], true_total)
        assert len(lv["streams"]) == lv["concurrency"] and lv["accept_len"] == pytest.approx(3.0, abs=0.3)
        assert lv["step_ms"] > 0 and lv["ttft_p90_s"] >= lv["ttft_p50_s"]
    assert "knee at 2 users" in text
    # ramp_s spreads the starts: the server saw them arrive 0.2/4 s apart (in the median gap and over the span: a
    # send held back on a busy machine makes one gap longer and the next shorter)
    arrivals = sorted(r["arrival_monotonic"] for r in ramped)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert abs(float(np.median(gaps)) - 0.05) < 0.01 and abs(arrivals[-1] - arrivals[0] - 0.15) < 0.03, gaps
    assert cases["test_ramped"]["total_tps"] is not None
    # The table shows how many users each row is about; a sweep gets a row per level.
    header = next(line for line in res.outlines if line.startswith("case "))
    assert "users" in header and "total tok/s" in header
    assert any("[load_sweep] sweep" in line and "1..8" in line for line in res.outlines)
    assert any(line.strip().startswith("@ 8 users") for line in res.outlines)
    assert "`cases.specperf.yaml::sweep` @ 4 users" in md.read_text()
    case = next(tc for tc in ET.parse(xml).iter("testcase") if tc.get("name") == "sweep")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["specperf_concurrency"] == "1,2,4,8" and props["specperf_knee"] == "2"
    assert float(props["specperf_users8_total_tps"]) == pytest.approx(sweep["levels"][-1]["total_tps"], rel=1e-4)
    assert len(props["specperf_users8_stream_decode_tps"].split(",")) == 8


COMPARE_CASE = """
import pytest

@pytest.mark.load_sweep(concurrency=[1, 16], tokens=128, ctx=1000, min_speedup=1.0)
def test_levels(specperf):
    pass
"""


def test_compare_judges_each_level_against_a_saved_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cmp=COMPARE_CASE)
    store = pytester.path / "runs"
    with SimServer("batching", speed=5, overrides={"speculation": False}) as a:
        pytester.runpytest_subprocess(f"--endpoint={a.url}", f"--specperf-storage={store}",
                                      "--specperf-save=nospec", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    saved = next(store.rglob("*.json"))
    sweep = next(r for r in _json(saved)["results"] if r["kind"] == "load_sweep")
    assert [len(lv["streams"]) for lv in sweep["levels"]] == [1, 16]  # saved runs keep every stream
    assert any(n.startswith("min_speedup 1 not judged") for n in sweep["notes"])  # no A arm to divide by
    out = pytester.path / "r.json"
    with SimServer("batching", speed=5) as b:
        res = pytester.runpytest_subprocess(f"--endpoint={b.url}", f"--specperf-storage={store}",
                                            "--specperf-compare=nospec", f"--specperf-json={out}",
                                            "-p", "no:cacheprovider")
    [r] = _json(out)["results"]
    cmp = {(c["users"], c["metric"]): c for c in r["comparisons"]}
    assert cmp[(1, "decode_tps")]["verdict"] == "improved"
    # Speculation costs the batch at 16 users (decode and total -32 to -33 % in four runs, two beside two CPU hogs);
    # the level is judged on its own and fails, and neither rate improves there. At 8 users the cost was -6.5 to
    # -11 %, which one trial a side on a busy machine left inconclusive. The simulators run at speed 5: at 20 beside
    # two hogs their own CPU, not the profile, set the step times (speculation read +11 % at 16 users). TTFT moves
    # either way with how the prefills met the batch (-28 % and +88 % in runs), so its direction is not asserted.
    at16 = [cmp[(16, m)] for m in ("decode_tps", "ttft_s", "total_tps")]
    assert any(c["verdict"] == "regressed" for c in at16)
    assert all(cmp[(16, m)]["verdict"] != "improved" for m in ("decode_tps", "total_tps"))
    assert all(c["reason"].startswith("at 16 users: ") for c in at16)
    # One trial a side: the streams of a level share the engine's steps, so they are one sample, not 16.
    assert {(c["comparison"]["n_base"], c["comparison"]["n_cand"]) for c in cmp.values()} == {(1, 1)}
    res.assert_outcomes(failed=1)


XDIST_CASES = """
import pytest

@pytest.mark.parametrize("i", range(4))
@pytest.mark.sustained(concurrency=4, tokens=64, ctx=200)
def test_load(specperf, i):
    pass

@pytest.mark.parametrize("i", range(2))
@pytest.mark.load_sweep(concurrency=[1, 2], tokens=64, ctx=200)
def test_sweep(specperf, i):
    pass

@pytest.mark.parametrize("i", range(2))
@pytest.mark.sustained(tokens=64, ctx=200)
def test_single(specperf, i):
    pass
"""


def test_load_cases_own_the_endpoint_under_four_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x=XDIST_CASES)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess("-n", "4", "--specperf-sim-speed=20", f"--specperf-json={out}",
                                        "-p", "no:cacheprovider")
    res.assert_outcomes(passed=8)
    results = _json(out)["results"]
    assert len(results) == 8
    spans = sorted((r["started_at"], r["finished_at"]) for r in results)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, "two cases measured the endpoint at once"
