"""Lengths drawn from a distribution, as a user writes them: a marker and a YAML case with ``tokens=``/``ctx=``
strings run by pytest on the simulator, each request's drawn lengths in the JSON as the server counted them, the
HTML report's TTFT-against-prompt and decode-against-context charts holding exactly those requests, and a bad
string a one-line collection error naming the forms."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from pytest_specperf.sim import SimServer

CASES = """
import pytest

@pytest.mark.rate(rps=10, requests=16, tokens="uniform(16, 48)",
                  ctx="mix(0.5 * uniform(60, 120), 0.5 * uniform(400, 500))")
def test_rate(specperf):
    pass

@pytest.mark.rate(rps=10, requests=4, tokens="unifrom(16, 48)")
def test_misspelt(specperf):
    pass
"""

YAML = """
drawn_load:
  sustained: {concurrency: 3, requests: 6, tokens: "normal(40, 8, min=24, max=60)", ctx: "uniform(80, 300)"}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("drawn")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
    with SimServer("healthy", speed=20) as sim:
        (out / "test_drawn.py").write_text(CASES)
        (out / "drawn.specperf.yaml").write_text(YAML)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", str(out), "-p", "no:cacheprovider", "-p", "no:randomly",
             f"--endpoint={sim.url}", f"--specperf-json={out / 'r.json'}", f"--specperf-html={out / 'report.html'}"],
            cwd=out, capture_output=True, text=True, timeout=300, env=env)
        results = json.loads((out / "r.json").read_text())["results"]
        truth = {q["response_id"]: sim.truth(q["response_id"]) for r in results
                 for q in r.get("per_request", []) + r.get("streams", []) + r.get("warmup_drain_streams", [])
                 if q.get("response_id")}
    page = (out / "report.html").read_text(encoding="utf-8")
    embedded = re.search(r'<script type="application/json" id="specperf-data">(.*?)</script>', page, re.S)
    assert embedded, done.stdout[-3000:]
    charts = json.loads(embedded.group(1))["charts"]
    # by kind, the measured ones (the misspelt case is an error record of kind rate)
    measured = {r["kind"]: (i, r) for i, r in enumerate(results) if r.get("verdict") != "error"}
    return {"stdout": done.stdout, "results": measured, "truth": truth,
            "charts": charts}


def test_each_request_sends_its_drawn_lengths(run: dict[str, Any]) -> None:
    (_, rate), (_, load) = run["results"]["rate"], run["results"]["sustained"]
    assert rate["drawn"] == {"tokens": "uniform(16, 48)", "ctx": "mix(0.5 * uniform(60, 120), 0.5 * uniform(400, 500))"}
    assert load["drawn"] == {"tokens": "normal(40, 8, min=24, max=60)", "ctx": "uniform(80, 300)"}
    for q in rate["per_request"]:
        t = run["truth"][q["response_id"]]
        assert (t["prompt_tokens"], t["completion_tokens"]) == (q["drawn_ctx"], q["drawn_tokens"])
        assert 16 <= q["drawn_tokens"] <= 48 and (60 <= q["drawn_ctx"] <= 120 or 400 <= q["drawn_ctx"] <= 500)
    assert len({q["drawn_ctx"] for q in rate["per_request"]}) >= 10
    streams = load["streams"] + load.get("warmup_drain_streams", [])
    assert len(streams) == 6
    for s in streams:
        t = run["truth"][s["response_id"]]
        assert (t["prompt_tokens"], t["completion_tokens"]) == (s["drawn_ctx"], s["drawn_tokens"])


def test_the_report_draws_latency_against_each_requests_lengths(run: dict[str, Any]) -> None:
    for kind, rows in (("rate", "per_request"), ("sustained", "streams")):
        i, r = run["results"][kind]
        charts = {c["id"]: c for c in run["charts"][f"case-{i + 1}"]}
        reqs = [q for q in r[rows] + r.get("warmup_drain_streams", []) if q.get("status", 200) == 200]
        for chart, key in (("ttft_by_prompt", "ttft_s"), ("decode_by_context", "decode_tps")):
            (series,) = charts[chart]["series"]
            got = sorted(zip(series["x"], series["y"], strict=True))
            assert got == sorted((float(q["prompt_tokens"]), q[key]) for q in reqs), (kind, chart)


def test_a_bad_distribution_is_a_one_line_collection_error(run: dict[str, Any]) -> None:
    out = run["stdout"]
    line = next(x for x in out.splitlines() if "unifrom" in x and "unknown form" in x)
    assert "use uniform(a, b), normal(mu, sigma, min=, max=)" in line and "trace(PATH)" in line
    assert "FAILED test_drawn.py::test_misspelt" in out and "1 failed, 2 passed" in out
