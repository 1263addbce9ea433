"""Token accounting and acceptance per server dialect, over real HTTP, against the simulator's truth."""

from __future__ import annotations

import pytest

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.sim import SimServer

PROMPT = "Step 1: we add the two numbers. Therefore the sum is 12. Let's check: 5 + 7 = 12, so it holds. " * 4
SOURCES = {"vllm": "continuous_usage", "sglang": "continuous_usage", "llamacpp": "timings_per_token"}


@pytest.fixture(scope="module", params=["vllm", "sglang", "llamacpp"])
def dialect_sim(request: pytest.FixtureRequest, speed: float):
    with SimServer("healthy", speed=speed, overrides={"dialect": request.param, "reasoning_tokens": 40}) as sim:
        yield request.param, sim


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_counts_are_exact_and_sum_to_usage(dialect_sim, api: str, request: pytest.FixtureRequest) -> None:
    dialect, sim = dialect_sim
    c = Client(sim.url)
    request.addfinalizer(c.close)
    assert c.detect().kind == dialect
    trace = c.stream(PROMPT, 300, api=api)
    assert trace.exact and trace.count_source == SOURCES[dialect]
    assert sum(ch.tokens for ch in trace.chunks) == trace.completion_tokens == 300
    truth = sim.truth(trace.response_id)
    assert trace.prompt_tokens == truth["prompt_tokens"]
    per_chunk = trace.completion_tokens / len(trace.chunks)
    if dialect == "llamacpp":
        assert per_chunk == pytest.approx(1.0, abs=0.05)  # one event per token, bursts per step
    else:
        assert len(trace.chunks) == len(truth["steps"])  # one chunk per step, reasoning chunks included


def test_prompt_tokens_hit_ctx(dialect_sim, runner_for) -> None:
    _, sim = dialect_sim
    runner = runner_for(sim.url)
    for ctx in (64, 1000, 3000):
        p = runner.prompt("prose", ctx, 7)
        assert abs(runner.client.count_tokens(p.text) - ctx) <= max(1, ctx // 100)


def test_acceptance_matches_truth(dialect_sim, runner_for) -> None:
    dialect, sim = dialect_sim
    runner = runner_for(sim.url)
    r = runner.sustained(SustainedSpec(tokens=600, ctx=300, content="code"), f"acc-{dialect}")
    truth = sim.truth(r.streams[0].response_id)
    steps = [s for s in truth["steps"] if s.get("phase") == "decode" and s["drafted"] > 0]
    true_len = 1 + sum(s["accepted"] for s in steps) / len(steps)
    acc = r.acceptance
    assert acc is not None and not acc.contaminated
    # SGLang's counters have no drafted tokens, so its per-request sglext counts are used instead.
    assert acc.source == ("response" if dialect == "sglang" else "metrics") and acc.exact
    assert acc.mean_len == pytest.approx(true_len, rel=0.02)
    true_rate = sum(s["accepted"] for s in steps) / sum(s["drafted"] for s in steps)
    assert acc.rate == pytest.approx(true_rate, rel=0.02)
    true_pos = [sum(s["accepted"] > k for s in steps) / len(steps) for k in range(len(acc.per_position))]
    assert acc.per_position and acc.per_position == pytest.approx(true_pos, abs=0.02)
