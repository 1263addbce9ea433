"""Engine arms on a real llama-server: one option starts an engine per number of speculative tokens, the
servers' own counters say each drafts that many, and a small three-arm sweep gives the users x arms table."""

from __future__ import annotations

import json
import shlex

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.engine_threads import THREAD_ARGS

from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.run.target import engine_arm_args

CASES = """
import pytest

@pytest.mark.load_sweep(concurrency=[1, 2], tokens=16, ctx=64)
def test_sweep(specperf):
    pass
"""


def _counter(text: str, name: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


@pytest.mark.parametrize("k", [2, 4])
def test_an_engine_arm_drafts_its_number_of_tokens_by_the_servers_own_counters(llama_engine, k: int) -> None:
    binary, model = llama_engine
    preset, args = engine_arm_args("llamacpp", k, "ngram", THREAD_ARGS)
    with LlamaServer(model, preset=preset, binary=binary, ctx_size=1024, extra_args=args) as srv:
        body = {"prompt": "Once upon a time", "max_tokens": 24, "ignore_eos": True, "temperature": 0}
        httpx.post(f"{srv.url}/v1/completions", json=body, timeout=300).raise_for_status()
        text = httpx.get(f"{srv.url}/metrics", timeout=30).text
    drafts = _counter(text, "llamacpp:spec_decode_num_drafts_total")
    tokens = _counter(text, "llamacpp:spec_decode_num_draft_tokens_total")
    # K per step, fewer only on the last steps, where no draft may pass max_tokens
    assert drafts > 0 and k - 1 < tokens / drafts <= k, (tokens, drafts)


def test_three_engine_arms_sweep_on_llamacpp(pytester: pytest.Pytester, llama_engine, monkeypatch) -> None:
    monkeypatch.setenv("SPECPERF_LLAMA_SERVER", str(llama_engine[0]))  # pytester runs with its own HOME
    pytester.makepyfile(test_arms=CASES)
    out = pytester.path / "r.json"
    engine_args = shlex.join(["--parallel", "2", *THREAD_ARGS])
    res = pytester.runpytest_subprocess("--specperf-engine=llamacpp", "--specperf-engine-arms=none,2,4",
                                        f"--specperf-engine-args={engine_args}", "--specperf-ab-trials=2",
                                        f"--specperf-json={out}", "-p", "no:cacheprovider")
    print(res.stdout.str()[-2500:])  # the figures, for the record
    r = json.loads(out.read_text())["results"][0]
    t = r["arms"]
    assert t["names"] == ["none", "k2", "k4"] and t["baseline"] == "none"
    assert t["tokens"] == {"none": 0, "k2": 2, "k4": 4}
    assert [row["users"] for row in t["levels"]] == [1, 2]
    assert all(a["n"] == 2 and a["decode_tps"] > 0 for row in t["levels"] for a in row["arms"].values())
    assert set(t["schedule"]) == {"1", "2"} and set(t["num_speculative_tokens"].values()) <= {0, 2, 4}
    # the row is the baseline arm's: served by the engine without speculation, by llama.cpp's own timings
    assert all(lv["accept_len"] in (None, 1.0) for lv in r["levels"]), [lv["accept_len"] for lv in r["levels"]]
    assert "arms of test_arms.py::test_sweep" in res.stdout.str()
