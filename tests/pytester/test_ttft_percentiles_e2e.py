"""Which TTFT is judged, on the simulator (issue 47, item 4): a load sweep's TTFT ceilings are judged at each level
as ``sustained(concurrency=)`` judges them, a session's name their p90 or p99 turn, a rate case's slo bounds are
listed among its goals at a named percentile, and every TTFT figure in the table says which percentile it is. Each
figure is checked against the simulator's own record of when it wrote each first token (``truth``: the client's
TTFT is that plus its own read, never less)."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
from support.table_lines import block, section

from pytest_specperf.sim import SimServer

NO_CACHE = ("-p", "no:cacheprovider")
# one ceiling no request can meet (0.1 ms, the lowest plausible TTFT) and others every request meets
CASES = """
import pytest

@pytest.mark.load_sweep(concurrency=[1, 4], tokens=64, ctx=200, max_ttft_s=60, max_ttft_p90_s={4: 0.0001},
                        max_ttft_p99_s=60)
def test_sweep(specperf): pass

@pytest.mark.session(users=2, turns=3, tokens=32, ctx=64, turn_ctx=16, max_ttft_s=60, max_ttft_p99_s=0.0001)
def test_session(specperf): pass

@pytest.mark.rate(rps=40, requests=12, tokens=16, ctx=64, slo={"ttft_s": 60, "e2e_s": 60}, min_attainment=0.95)
def test_rate(specperf): pass
"""
#: the client reads a first token after the server wrote it: at most this much later on a busy 2-core host
READ_S = 0.25


def _within_truth(seen: float, truth: list[float], q: int) -> None:
    """A percentile of the client's TTFTs against the same percentile of the simulator's own (never below it)."""
    true = float(np.percentile(truth, q))
    assert true <= seen <= true + READ_S, (q, seen, true)


def test_ttft_ceilings_and_cells_name_their_percentile(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ttft=CASES)
    out, page = pytester.path / "r.json", pytester.path / "r.html"
    # streams of 100 ms and more: a client judged behind its schedule (its starts spread over a quarter of a stream)
    # would excuse the timed ceilings' failures, and a busy host spreads a few ms
    with SimServer("healthy", speed=2.0) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}",
                                            f"--specperf-html={page}", *NO_CACHE)
        results = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
        truth = {rid: sim.truth(rid)["ttft_s"] for r in results.values()
                 for rid in [s["response_id"] for lv in r.get("levels", []) for s in lv["streams"]]
                 + [q["response_id"] for q in r.get("per_request", [])]}
    res.assert_outcomes(passed=1, failed=2)
    lines = section(res.outlines)
    doc = html.unescape(page.read_text(encoding="utf-8"))

    # load_sweep: each level judged on its ceilings, the p90 one failing at 4 users alone (set only there)
    sweep = results["test_sweep"]
    one, four = sweep["levels"]
    assert [g["keyword"] for g in one["goals"]] == ["max_ttft_s", "max_ttft_p99_s"]
    assert [g["keyword"] for g in four["goals"]] == ["max_ttft_s", "max_ttft_p90_s", "max_ttft_p99_s"]
    assert one["verdict"] == "passed" and four["verdict"] == "failed"
    ttfts = [s["ttft_s"] for s in four["streams"]]
    labels = {g["keyword"]: (g["label"], g["value"]) for g in four["goals"]}
    assert labels["max_ttft_s"] == ("ttft p50", pytest.approx(float(np.median(ttfts))))
    assert labels["max_ttft_p90_s"] == ("ttft p90", pytest.approx(float(np.percentile(ttfts, 90))))
    assert labels["max_ttft_p99_s"] == ("ttft p99", pytest.approx(float(np.percentile(ttfts, 99))))
    true4 = [truth[s["response_id"]] for s in four["streams"]]
    for q, key in ((50, "max_ttft_s"), (90, "max_ttft_p90_s"), (99, "max_ttft_p99_s")):
        _within_truth(labels[key][1], true4, q)
    p90 = labels["max_ttft_p90_s"][1]
    assert f"at 4 users: ttft p90 {p90:.3f} s > max_ttft_p90_s 0.0001 at ctx " in sweep["reason"]
    assert "at 1 user" not in sweep["reason"]
    row = block(lines, "@ 4 users")
    assert f" p50 {np.median(ttfts) * 1000:.0f} ms " in row, row
    assert "max_ttft_p90_s 0.0001 s at 4 users: ttft p90 " in doc

    # session: max_ttft_s reads the p90 turn and says so; max_ttft_p99_s the p99 turn
    session = results["test_session"]
    turns = [q["ttft_s"] for q in session["per_request"]]
    goals = {g["keyword"]: (g["label"], g["value"]) for g in session["goals"]}
    assert goals["max_ttft_s"] == ("ttft p90 turn", pytest.approx(float(np.percentile(turns, 90))))
    assert goals["max_ttft_p99_s"] == ("ttft p99 turn", pytest.approx(float(np.percentile(turns, 99))))
    true_turns = [truth[q["response_id"]] for q in session["per_request"]]
    _within_truth(goals["max_ttft_p99_s"][1], true_turns, 99)
    assert session["reason"].startswith(f"ttft p99 turn {goals['max_ttft_p99_s'][1]:.3f} s > max_ttft_p99_s 0.0001 "
                                        "over 6 turns of 2 session(s)")
    row = block(lines, "test_session")
    assert f" p50 {np.median(turns) * 1000:.0f} ms " in row and "max_ttft_s 60 s: ttft p90 turn " in row, row

    # rate: each slo bound among the goals, at the percentile min_attainment=0.95 needs (p99)
    rate = results["test_rate"]
    per = [q for q in rate["per_request"] if q["status"] == 200]
    goals = {g["keyword"]: (g["label"], g["value"]) for g in rate["goals"]}
    assert list(goals) == ["min_attainment", "slo ttft_s", "slo e2e_s"]
    assert goals["slo ttft_s"] == ("ttft p99", pytest.approx(float(np.percentile([q["ttft_s"] for q in per], 99))))
    assert goals["slo e2e_s"] == ("e2e p99", pytest.approx(float(np.percentile([q["e2e_s"] for q in per], 99))))
    _within_truth(goals["slo ttft_s"][1], [truth[q["response_id"]] for q in per], 99)
    row = block(lines, "test_rate")
    assert re.search(r" p50 \d+ ms ", row) and "slo ttft_s 60 s: ttft p99 " in row, row
    assert "slo ttft_s 60 s: ttft p99 " in doc
