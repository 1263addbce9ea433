"""The prefix cache decides no verdict: a run saved and compared on one server that caches prefixes as vLLM does
(with --enable-prompt-tokens-details) prefills cold on both sides, by the server's own record, so the compare
reads the server and not its cache (it read "ttft_s -83% improved" when the candidate's prompts came back cached)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_specperf.sim import SimServer

CASES = """
import pytest

@pytest.mark.sustained(tokens=40, ctx=500, repeat=3)
def test_one(specperf):
    pass

@pytest.mark.sustained(tokens=40, ctx=500, concurrency=4)
def test_four(specperf):
    pass
"""
# vLLM's automatic prefix caching (the simulator's default, spelled out) with cached tokens reported; a prefill slow
# enough that a cached one is far outside TTFT's noise floor
CACHING = {"prefix_cache_tokens": 262144, "prefix_cache_block": 16, "cache_report": True,
           "prefill_tokens_per_s": 1000.0}


def test_save_then_compare_on_one_caching_server_is_cold_on_both_sides(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=CASES)
    runs = {}
    with SimServer("healthy", speed=10, overrides=CACHING) as sim:
        target = f"--endpoint={sim.url}"
        for name, extra in (("base", ["--specperf-save=base"]), ("cand", ["--specperf-compare=base"])):
            out = pytester.path / f"{name}.json"
            res = pytester.runpytest_subprocess(target, *extra, f"--specperf-json={out}")
            results = json.loads(out.read_text())["results"]
            truth = {s["response_id"]: sim.truth(s["response_id"]) for r in results for s in r["streams"]}
            runs[name] = (res, results, truth)
    res, cand, truth = runs["cand"]
    figures = {name: {r["nodeid"].split("::")[-1]: {
        "cached": [t["cached_tokens"] for s in r["streams"] for t in [run[2][s["response_id"]]]],
        "prompt": [t["prompt_tokens"] for s in r["streams"] for t in [run[2][s["response_id"]]]],
        "cached_share": r.get("cached_share"), "ttft_s": r["ttft_s"],
        "ttft_verdict": [c["reason"] for c in r.get("comparisons") or [] if c["metric"] == "ttft_s"]}
        for r in run[1]} for name, run in runs.items()}
    if os.environ.get("SPECPERF_FIGURES"):  # the figures the note gives before and after
        Path(os.environ["SPECPERF_FIGURES"]).write_text(json.dumps(figures, indent=1))
    for name, (_, results, truth) in runs.items():
        # every stream of both runs prefilled its whole prompt, as the server recorded it
        assert all(t["cached_tokens"] == 0 and t["prompt_tokens"] == 500 for t in truth.values()), figures[name]
        assert [r.get("cached_share") for r in results] == [0.0, 0.0], figures[name]
    ttft = [c for r in cand for c in r["comparisons"] if c["metric"] == "ttft_s"]
    assert len(ttft) == 2 and not [c for c in ttft if c["verdict"] == "improved"], figures
    assert "prefix cache" not in res.stdout.str()
