"""Rate and capacity cases as a user runs them: markers, YAML, direct calls, bad input, saved runs and compare."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.table_lines import block, section

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import gates as gating
from pytest_specperf.errors import ConfigError
from pytest_specperf.sim import SimServer

SPEED = 10.0

CASES = f"""
import pytest

@pytest.mark.rate(rps={0.5 * SPEED}, requests=16, tokens=64, ctx=200, slo={{"tpot_ms": {20 / SPEED}}},
                  min_attainment=0.9)
def test_light_load_meets_the_slo(specperf):
    assert specperf.result.refused == 0

@pytest.mark.rate(rps={6 * SPEED}, requests=40, tokens=64, ctx=200, arrivals="constant",
                  slo={{"tpot_ms": {12 / SPEED}, "e2e_s": 100}}, min_goodput={3 * SPEED})
def test_heavy_load_misses_it(specperf):
    pass

def test_direct(specperf):
    r = specperf.rate(rps={SPEED}, requests=8, tokens=32, ctx=100, slo={{"e2e_s": 100}})
    assert r.requests == 8 and r.attainment == 1.0
"""

YAML = f"""
yaml_rate:
  rate: {{rps: {SPEED}, requests: 12, tokens: 32, ctx: 100, arrivals: constant, slo: {{ttft_s: 5}}}}
"""


def _by_name(path: Path) -> dict[str, dict]:
    return {r["nodeid"].split("::")[-1]: r for r in json.loads(path.read_text())["results"]}


def test_rate_cases_from_markers_yaml_and_direct_calls(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rate=CASES)
    pytester.makefile(".specperf.yaml", cases=YAML)
    out, xml = pytester.path / "r.json", pytester.path / "junit.xml"
    with SimServer("batching", speed=SPEED) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}", f"--junitxml={xml}",
                                            "-p", "no:cacheprovider")
        cases = _by_name(out)
        heavy = cases["test_heavy_load_misses_it"]
        truths = [sim.truth(p["response_id"]) for p in heavy["per_request"]]
    res.assert_outcomes(passed=3, failed=1)
    text = res.stdout.str()
    assert "goodput" in text and "< min_goodput 30" in text and "tpot_ms missed most" in text
    assert "step time rose" in text  # batching: verifying everyone's drafts makes the steps slower
    assert cases["yaml_rate"]["kind"] == "rate" and cases["yaml_rate"]["verdict"] == "passed"
    light = cases["test_light_load_meets_the_slo"]
    for key in ("rps", "achieved_rps", "output_tps", "attainment", "goodput_rps", "ttft_p99_s", "tpot_p90_ms",
                "e2e_p50_s", "per_request", "refused", "slo"):
        assert key in light, key
    assert light["attainment"] >= 0.9 and len(light["per_request"]) == 16
    # the heavy case's requests shared the batch on the server, which is why they missed
    assert max(st["batch"] for t in truths for st in t["steps"]) >= 8
    light_row = block(section(res.outlines), "[rate] test_light_load_meets_the_slo")
    assert "req/s" in light_row and "attainment" in light_row
    case = next(tc for tc in ET.parse(xml).iter("testcase") if tc.get("name") == "test_heavy_load_misses_it")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert float(props["specperf_goodput_rps"]) == pytest.approx(heavy["goodput_rps"], rel=1e-4)
    assert "specperf_attainment" in props and "specperf_tpot_p90_ms" in props


@pytest.mark.parametrize(("kind", "kwargs", "needle"), [
    ("rate", {"slo": {"ttft": 1.0}}, "slo has unknown bound 'ttft'; use ttft_s, tpot_ms, e2e_s"),
    ("rate", {"rps": -2}, "rps must be a positive number"),
    ("rate", {"rps": 0.5, "requests": 400, "budget_s": 60}, "take about 800 s to arrive, more than budget_s=60"),
    ("rate", {"min_attainment": 0.9}, "slo is required"),
    ("rate", {"slo": {"tpot_ms": -1}}, "slo tpot_ms must be a positive number of ms"),
    ("rate", {"arrivals": "burst"}, "arrivals must be one of poisson, constant"),
    ("rate", {"rsp": 3}, "unknown keyword 'rsp'; did you mean 'rps'?"),
    ("capacity", {}, "slo is required"),
    ("capacity", {"slo": {"e2e_s": 5}, "target": 1.5}, "target must be a fraction"),
    ("capacity", {"slo": {"e2e_s": 5}, "budget_s": 20, "probe_s": 10}, "fewer than 3 probes"),
    ("capacity", {"slo": {"e2e_s": 5}, "start_rps": 0.02},
     "the first probe (32 requests at start_rps=0.02) takes about 2000 s, more than budget_s=900; raise start_rps"),
])
def test_bad_input_names_the_keyword(kind: str, kwargs: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_spec(kind, kwargs)
    assert needle in str(info.value) and str(info.value).startswith(f"{kind}(): ")


def test_bad_rate_marker_and_yaml_fail_their_cases(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="""
import pytest

@pytest.mark.rate(rps=-1, slo={"tpot_ms": 50})
def test_negative(specperf):
    pass
""")
    pytester.makefile(".specperf.yaml", bad="typo:\n  rate: {rps: 2, slo: {latency_s: 1}}\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(failed=2)
    text = res.stdout.str()
    assert "rate(): rps must be a positive number of requests per second, got -1" in text
    assert "slo has unknown bound 'latency_s'" in text
    assert "Traceback" not in text


def _result(nodeid: str, kind: str = "rate", **figures: float) -> Result:
    """A rate (or capacity) result record with only the figures a comparison reads set."""
    return load_result({"nodeid": nodeid, "kind": kind, "verdict": "passed", "reason": "", "endpoint": "",
                        "model": "sim", "server": "sim", "ctx": 0, "prompt_tokens": None, **figures})


def test_compare_judges_rate_cases_in_the_right_direction() -> None:
    base = {"goodput_rps": 4.0, "attainment": 0.98, "ttft_p90_s": 0.5, "tpot_p90_ms": 40.0, "e2e_p90_s": 10.0}
    worse = {"goodput_rps": 3.0, "attainment": 0.98, "ttft_p90_s": 0.5, "tpot_p90_ms": 60.0, "e2e_p90_s": 10.0}
    gate = gating.Gate(0.05, "warn")
    result = _result("t::r", **worse)
    gating.against_baseline(gate, result, [_result("t::r", **base)])
    verdicts = {c.metric: c.verdict for c in result.comparisons or []}
    assert verdicts["goodput_rps"] == "regressed" and verdicts["tpot_p90_ms"] == "regressed"
    assert verdicts["attainment"] not in ("regressed", "improved") and result.verdict == "failed"
    better = _result("t::r", **{**base, "goodput_rps": 5.5, "tpot_p90_ms": 25.0})
    gating.against_baseline(gate, better, [_result("t::r", **base)])
    verdicts = {c.metric: c.verdict for c in better.comparisons or []}
    assert verdicts["goodput_rps"] == "improved" and verdicts["tpot_p90_ms"] == "improved"
    cap = _result("t::c", "capacity", max_rps=3.0)
    gating.against_baseline(gate, cap, [_result("t::c", "capacity", max_rps=4.5)])
    assert [(c.metric, c.verdict) for c in cap.comparisons or []] == [("max_rps", "regressed")]


def test_saved_run_compares_a_rate_case(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_r=f"""
import pytest

@pytest.mark.rate(rps={SPEED}, requests=10, tokens=32, ctx=100, slo={{"e2e_s": 100}})
def test_r(specperf):
    pass
""")
    with SimServer("batching", speed=SPEED) as sim:
        first = pytester.runpytest_subprocess(f"--endpoint={sim.url}", "--specperf-save=base", "-p", "no:cacheprovider")
        first.assert_outcomes(passed=1)
        out = pytester.path / "r.json"
        again = pytester.runpytest_subprocess(f"--endpoint={sim.url}", "--specperf-compare=base",
                                              f"--specperf-json={out}", "-p", "no:cacheprovider")
    [r] = json.loads(out.read_text())["results"]
    assert {c["metric"] for c in r["comparisons"]} == {"goodput_rps", "attainment", "ttft_p90_s", "tpot_p90_ms",
                                                       "e2e_p90_s"}
    assert r["verdict"] != "error" and again.ret in (0, 1)


def test_capacity_marker_reports_its_search_and_fails_its_floor(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cap=f"""
import pytest

@pytest.mark.capacity(slo={{"tpot_ms": {25 / SPEED}}}, target=0.9, tokens=48, ctx=100, arrivals="constant",
                      start_rps={SPEED}, probe_s=1.0, min_requests=12, precision=0.5, budget_s=60, min_rps=1000)
def test_cap(specperf):
    pass
""")
    out = pytester.path / "r.json"
    with SimServer("batching", speed=SPEED, overrides={"speculation": False}) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}", "-p",
                                            "no:cacheprovider")
    res.assert_outcomes(failed=1)
    [r] = json.loads(out.read_text())["results"]
    lo, hi = r["bracket"]
    assert r["kind"] == "capacity" and r["max_rps"] == lo and hi is not None and hi / lo <= 1.5 + 1e-9
    rates = [p["rps"] for p in r["probes"]]
    assert rates[:2] == [SPEED, 2 * SPEED]  # bracketing doubles from start_rps
    assert all(p["passed"] == (p["attainment"] >= 0.9) and p["counted"] < p["requests"] for p in r["probes"])
    text = res.stdout.str()
    assert f"capacity {lo:.3g} req/s < min_rps 1000" in text and "tpot_ms missed most" in text
    # capacity is a lower bound: the highest rate that met the slo, within the bracket the JSON holds
    assert f"capacity >= {lo:.3g} req/s (bracket {lo:.3g}..{hi:.3g})" in block(section(res.outlines),
                                                                                 "[capacity] test_cap")
