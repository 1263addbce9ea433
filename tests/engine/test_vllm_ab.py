"""A/B on a real batching engine: the same model and vLLM, speculation off (A) and on (B), 1, 2 and 4 users.

Both arms serve with --max-num-seqs 4. The arms alternate (A, B, A, B) so a slow spell of the shared machine
hits both. The claim checked is that the plugin's crossover comes out of real measurements with every level
judged; which way it falls on 2 busy CPU cores is reported, not asserted (docs/servers.md has the figures).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_specperf.cases.closed_loop import LoadSweepSpec
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare.crossover import crossover
from pytest_specperf.endpoint.client import Client
from pytest_specperf.engines.vllm import STARTUP_TIMEOUT_S, VllmServer
from pytest_specperf.run.runner import Runner

# The suite's 300 s per test would count this module's second server's start-up against its test.
VLLM_TIMEOUT_S = STARTUP_TIMEOUT_S + 600
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(VLLM_TIMEOUT_S)]

LEVELS = (1, 2, 4)
TRIALS = 2


@pytest.fixture(scope="module")
def no_speculation(vllm_build: object) -> Iterator[VllmServer]:
    with VllmServer(preset="none", max_num_seqs=4) as server:
        yield server


def test_load_sweep_ab_gives_a_crossover(vllm_ngram: VllmServer, no_speculation: VllmServer) -> None:
    spec = LoadSweepSpec(concurrency=LEVELS, tokens=64, ctx=64, content="repetitive")
    arms: dict[str, list[dict]] = {"a": [], "b": []}
    with Client(no_speculation.url, timeout=300) as a, Client(vllm_ngram.url, timeout=300) as b:
        runners = {"a": Runner(a, inconclusive="pass"), "b": Runner(b, inconclusive="pass")}
        for trial in range(TRIALS):
            for arm in ("a", "b"):
                arms[arm].append(runners[arm].run(spec, f"ab-{arm}-{trial}").as_dict())
    for result in arms["b"]:  # B speculates at every level (the plugin's figure, from vLLM's counters)
        assert all((lv["accept_len"] or 0) > 1.5 for lv in result["levels"]), result["levels"]
    for result in arms["a"]:  # A does not: no spec-decode counters, so at most chunk sizes of one token a step
        assert all(lv["accept_len"] is None or lv["accept_len"] < 1.1 for lv in result["levels"]), result["levels"]
    out = crossover([load_record(r) for r in arms["a"]], [load_record(r) for r in arms["b"]])
    print("vLLM A/B (A: no speculation, B: ngram), per level:",
          [(lv.users, round(lv.a_decode_tps, 1), round(lv.b_decode_tps, 1), round(lv.speedup, 2),
            lv.verdict) for lv in out.levels], "->", out.text)
    assert [lv.users for lv in out.levels] == list(LEVELS)
    # the samples are trials (each trial's median user), not streams: streams of one trial share batched steps
    assert all(lv.n_a == lv.n_b == TRIALS for lv in out.levels), out.levels
