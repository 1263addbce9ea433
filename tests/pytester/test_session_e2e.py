"""The ``session`` kind through the marker, a YAML case and a direct call, and what the reports show of it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_specperf.report.views.registry import view as view_of
from pytest_specperf.sim import SimServer

pytest_plugins = ["pytester"]

CACHE = {"prefix_cache_tokens": 40000, "prefill_tokens_per_s": 3000.0, "cache_report": True}

CASES = """
import pytest

@pytest.mark.session(turns=3, tokens=24, users=2, ctx=150, turn_ctx=20, min_cache_hit=0.5)
def test_marked(specperf):
    r = specperf.result
    assert r.turns == 3 and r.requests == 6 and r.cache_hit > 0.5

def test_direct(specperf):
    r = specperf.session(turns=2, tokens=24, ctx=150, min_cache_hit=0.99)
    assert r.verdict == "failed"
"""

YAML = """
completions_session:
  session: {turns: 3, tokens: 24, ctx: 150, turn_ctx: 20, api: completions}
"""


def test_session_from_marker_yaml_and_direct_call_and_its_reports(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sessions=CASES)
    pytester.makefile(".specperf.yaml", cases=YAML)
    out, md, xml, html = (pytester.path / n for n in ("r.json", "r.md", "junit.xml", "r.html"))
    with SimServer("healthy", speed=10, overrides=CACHE) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}",
                                            f"--specperf-markdown={md}", f"--junitxml={xml}",
                                            f"--specperf-html={html}", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2, failed=1)  # the direct call's floor of 0.99 fails the test
    results = json.loads(out.read_text())["results"]
    by = {(r["nodeid"].split("::")[-1], r.get("call")): r for r in results}
    marked = by[("test_marked", None)]
    assert marked["kind"] == "session" and marked["verdict"] == "passed"
    assert [t["turn"] for t in marked["per_turn"]] == [1, 2, 3] and len(marked["per_request"]) == 6
    direct = by[("test_direct", 1)]
    assert direct["verdict"] == "failed" and "< min_cache_hit 0.99" in direct["reason"]
    assert by[("completions_session", None)]["cache_hit"] > 0.5
    text = res.stdout.str()
    assert "2 sessions x 3 turns" in text and "cache hit" in text
    assert "2 sessions x 3 turns" in md.read_text()
    case = next(c for c in ET.parse(xml).iter("testcase") if c.get("name") == "test_marked")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert float(props["specperf_cache_hit"]) == pytest.approx(marked["cache_hit"], rel=1e-5)
    # the view draws exactly the result's per-turn figures
    v = view_of(marked)
    charts = {c.id: c for c in v.charts}
    p50 = next(s for s in charts["turn_ttft"].series if s.name == "ttft p50")
    assert charts["turn_ttft"].categories == ["1", "2", "3"]
    assert p50.x == [0.0, 1.0, 2.0] and p50.y == [t["ttft_p50_s"] * 1000 for t in marked["per_turn"]]
    assert charts["turn_cached"].series[0].y == [t["cache_hit"] for t in marked["per_turn"]]
    page = html.read_text()
    assert "time to first token by turn" in page and "cached share of the prompt by turn" in page
