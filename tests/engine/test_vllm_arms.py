"""Engine arms on a real vLLM: one option starts a vLLM per number of speculative tokens (the ngram preset with
``num_speculative_tokens`` K, or no speculation), and a small sweep over them gives the users x arms table.

The arm deployed here drafts 2 tokens a step while the ngram preset alone drafts 4: on repetitive text vLLM's
own per-request figures (``metrics.speculative_decoding``) show at most 1 + 2 tokens a step, which a preset
that kept its own 4 would pass (3.7-3.9 measured there)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pytest_specperf.engines.vllm import STARTUP_TIMEOUT_S

# three servers start one after another inside the one pytest run
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(3 * STARTUP_TIMEOUT_S + 600)]

CASES = """
import pytest

@pytest.mark.load_sweep(concurrency=[1, 2], tokens=48, ctx=64, content="repetitive", deployed="k2")
def test_sweep(specperf):
    pass
"""


def test_three_engine_arms_sweep_on_vllm(pytester: pytest.Pytester, vllm_build: tuple[Path, Path], monkeypatch) -> None:
    # pytester runs with its own HOME: point the run at the build's cache (CACHE/vllm-VERSION/venv/bin/python)
    monkeypatch.setenv("SPECPERF_CACHE", str(vllm_build[0].parents[3]))
    pytester.makepyfile(test_arms=CASES)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess("--specperf-engine=vllm", "--specperf-engine-arms=none,2,4",
                                        f"--specperf-engine-args={shlex.join(['--max-num-seqs', '2'])}",
                                        "--specperf-ab-trials=2", f"--specperf-json={out}", "-p", "no:cacheprovider")
    print(res.stdout.str()[-2500:])  # the figures, for the record
    r = json.loads(out.read_text())["results"][0]
    t = r["arms"]
    assert t["names"] == ["none", "k2", "k4"] and t["deployed"] == "k2"
    assert t["tokens"] == {"none": 0, "k2": 2, "k4": 4}
    assert all(a["n"] == 2 and a["decode_tps"] > 0 for row in t["levels"] for a in row["arms"].values())
    # the row is the deployed arm's; vLLM's own per-request figures say how many tokens each step accepted
    for lv in r["levels"]:
        assert lv["accept_source"] is not None and 1.0 < lv["accept_len"] <= 3.0, lv
    assert "arms of test_arms.py::test_sweep" in res.stdout.str()
