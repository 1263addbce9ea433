"""Reasoning phases and cached prompt tokens as the client parses them, against the simulator's truth over HTTP."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.server_kinds import CAPABILITIES
from pytest_specperf.endpoint.sse import TraceBuilder
from pytest_specperf.errors import MeasurementError
from pytest_specperf.run import stream_figures as measure
from pytest_specperf.sim import SimServer, start_all
from pytest_specperf.sim.textgen import prompt_text

R, N = 60, 200
SPEED = 2.0  # steps of 5-10 ms: a client's read jitter (~1 ms) stays small against the phases' spans
# the reasoning phase accepts 6 tokens a step (the answer, prose, about 3) and each of its steps costs 4x an
# answer step, so the reasoning decodes at about half the answer's rate and a mix-up shows
PHASED = {"reasoning_tokens": R, "reasoning_kind": "repetitive", "reasoning_step_ms": 30.0, "step_ms": 10.0,
          "prefix_cache_tokens": 20000, "prefix_cache_block": 1, "cache_report": True}
CASES = {"vllm": {"dialect": "vllm"}, "vllm-old": {"dialect": "vllm", "reasoning_key": "reasoning_content"},
         "sglang": {"dialect": "sglang"}, "llamacpp": {"dialect": "llamacpp"}}
PROMPT = prompt_text("prose", 150, seed=21)


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimServer]]:
    servers = {name: SimServer("healthy", speed=SPEED, overrides={**PHASED, **over}) for name, over in CASES.items()}
    start_all(servers.values())
    try:
        yield servers
    finally:
        for s in servers.values():
            s.stop()


def _truth_phase_tps(truth: dict[str, Any], phase: str) -> float:
    """A phase's decode rate from the server's own step times: its tokens after its first step over their span."""
    t, k = [], []
    for st in truth["steps"]:
        n = st["reasoning_tokens"] if phase == "reasoning" else st["tokens"] - st["reasoning_tokens"]
        if n:
            t.append(st["t_s"])
            k.append(n)
    return float((sum(k) - k[0]) / (t[-1] - t[0]))


@pytest.mark.parametrize("case", list(CASES))
def test_phases_match_truth(sims: dict[str, SimServer], case: str) -> None:
    sim = sims[case]
    with Client(sim.url, timeout=30) as client:
        client.detect()
        traces = [client.stream(PROMPT, N, api="chat", seed=i) for i in range(3)]
    truths = [sim.truth(tr.response_id) for tr in traces]
    for tr, truth in zip(traces, truths, strict=True):
        assert tr.exact
        assert (tr.reasoning_tokens, tr.content_tokens) == (truth["reasoning_tokens"], truth["content_tokens"])
        assert (tr.reasoning_tokens, tr.content_tokens) == (R, N - R)
        assert tr.ttft_s == tr.chunks[0].t
        # the first answer token arrives with the chunk that completes the server's first answer step (however
        # the server splits a step that ends the reasoning and starts the answer)
        first_step = next(i for i, st in enumerate(truth["steps"]) if st["tokens"] > st["reasoning_tokens"])
        through = sum(st["tokens"] for st in truth["steps"][:first_step + 1])
        sent = np.cumsum([c.tokens for c in tr.chunks])
        assert tr.ttft_content_s == tr.chunks[int(np.argmax(sent >= through))].t
        # and the gap to it is the server's, within a tenth (a late wake-up on a busy machine is a few ms of ~150)
        gap, server_gap = (tr.ttft_content_s or 0) - tr.ttft_s, truth["ttft_content_s"] - truth["ttft_s"]
        assert abs(gap / server_gap - 1) < 0.1, (gap, server_gap)
    assert min(truth["ttft_content_s"] - truth["ttft_s"] for truth in truths) > 0.03  # the gap is no rounding
    for phase in ("reasoning", "content"):
        errors = [measure.phase_decode_tps(tr)[phase] / _truth_phase_tps(truth, phase) - 1  # type: ignore[operator]
                  for tr, truth in zip(traces, truths, strict=True)]
        assert abs(statistics.median(errors)) < 0.03, (phase, errors)
    rates = measure.phase_decode_tps(traces[0])
    assert rates["content"] > 1.5 * rates["reasoning"]  # type: ignore[operator]


@pytest.mark.parametrize("case", ["vllm", "sglang", "llamacpp"])
def test_cached_tokens_match_truth(sims: dict[str, SimServer], case: str) -> None:
    sim = sims[case]
    prompt = prompt_text("prose", 400, seed=33)
    with Client(sim.url, timeout=30) as client:
        client.detect()
        client.cold = False  # the same prompt twice may reuse the cache: no cache salt, cache_prompt as default
        cold, warm = (client.stream(prompt, 16, api="chat") for _ in range(2))
    t_cold, t_warm = sim.truth(cold.response_id), sim.truth(warm.response_id)
    # a cold prompt shares only the chat template's head with earlier requests; the same prompt again, all of it
    assert t_cold["cached_tokens"] < 10 and t_warm["cached_tokens"] == t_warm["prompt_tokens"] - 1
    assert warm.cached_tokens == t_warm["cached_tokens"]
    assert cold.cached_tokens == t_cold["cached_tokens"] or (case == "sglang" and t_cold["cached_tokens"] == 0
                                                             and cold.cached_tokens is None)


def test_without_reasoning_the_answer_is_the_whole_stream() -> None:
    with SimServer("healthy", speed=SPEED, in_process=True) as sim, Client(sim.url, timeout=30) as client:
        client.detect()
        tr = client.stream(PROMPT, 120, api="chat")
        truth = sim.truth(tr.response_id)
    assert tr.reasoning_tokens == 0 and tr.content_tokens == truth["completion_tokens"] == 120
    assert tr.ttft_content_s == tr.ttft_s
    rates = measure.phase_decode_tps(tr)
    assert rates["reasoning"] is None
    t = np.array([c.t for c in tr.chunks])
    k = np.array([c.tokens for c in tr.chunks])
    assert rates["content"] == pytest.approx((k.sum() - k[0]) / (t[-1] - t[0]))
    assert tr.cached_tokens is None  # vLLM without prompt-token details says nothing


def _feed(events: list[dict[str, Any]], caps: str = "vllm") -> Any:
    builder = TraceBuilder(CAPABILITIES[caps], MeasurementError)
    for i, ev in enumerate(events):
        builder.feed(0.01 * i, json.dumps(ev))
    builder.feed(1.0, "[DONE]")
    return builder.finish(1.0, 0.0, lambda chunks: None)


def _chunk(delta: dict[str, Any], cum: int, **usage: Any) -> dict[str, Any]:
    return {"id": "x", "choices": [{"index": 0, "delta": delta}],
            "usage": {"prompt_tokens": 5, "completion_tokens": cum, **usage}}


def test_a_chunk_holding_both_phases_is_split_by_the_servers_reasoning_count() -> None:
    # 4 reasoning tokens then a chunk of 3 tokens: 2 of reasoning ("ab", "c" by characters would say 2 of 3
    # too, so the text is skewed to make the character split say 1) then the answer
    events = [_chunk({"reasoning": "r1r2"}, 4), _chunk({"reasoning": "x", "content": "long answer"}, 7),
              _chunk({"content": "more"}, 9)]
    final = {"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9,
                                                 "completion_tokens_details": {"reasoning_tokens": 6}}}
    tr = _feed([*events, final])
    assert [c.reasoning for c in tr.chunks] == [4, 2, 0]
    assert (tr.reasoning_tokens, tr.content_tokens) == (6, 3)
    assert tr.ttft_content_s == tr.chunks[1].t
    # without the server's count the mixed chunk is split by characters: 1 of 12 characters -> 0 tokens
    tr = _feed([*events, {**final, "usage": {"prompt_tokens": 5, "completion_tokens": 9}}])
    assert [c.reasoning for c in tr.chunks] == [4, 0, 0]


def test_tool_call_arguments_are_answer_tokens() -> None:
    call = {"tool_calls": [{"index": 0, "function": {"arguments": "{\"q\": 1}"}}]}
    tr = _feed([_chunk({"reasoning_content": "think"}, 2), _chunk(call, 5)])
    assert (tr.reasoning_tokens, tr.content_tokens) == (2, 3)
    assert tr.ttft_content_s == tr.chunks[1].t


def test_reasoning_text_in_an_event_without_tokens_is_not_the_next_events() -> None:
    # continuous usage says the middle event carried no token (a parser's held-back text): it is no chunk,
    # and its reasoning characters must not mark the answer chunk after it
    tr = _feed([_chunk({"reasoning": "abc"}, 2), _chunk({"reasoning": "</think>"}, 2), _chunk({"content": "hi"}, 4)])
    assert [c.reasoning for c in tr.chunks] == [2, 0]
    assert (tr.reasoning_tokens, tr.content_tokens) == (2, 2)


def test_reasoning_sent_under_both_names_is_counted_once() -> None:
    # some servers send ``reasoning`` as an alias beside ``reasoning_content`` in the same delta
    both = [_chunk({"reasoning_content": "abc", "reasoning": "abc"}, 3), _chunk({"content": "xy"}, 5)]
    tr = _feed(both)
    assert "".join(c.text for c in tr.chunks) == "abcxy"
    assert [c.reasoning for c in tr.chunks] == [3, 0]
    assert (tr.reasoning_tokens, tr.content_tokens) == (3, 2)
