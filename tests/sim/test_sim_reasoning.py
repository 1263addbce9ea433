"""The simulator's reasoning phase: what each dialect streams, the phase's acceptance and step cost, and the truth."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.sim_helpers import stream

from pytest_specperf.sim import ProfileError, SimServer, classify, load_profile
from pytest_specperf.sim.textgen import prompt_text

PROSE = prompt_text("prose", 120, seed=3)
R = 40  # reasoning tokens
N = 120  # completion tokens
# prose accepts 3 tokens per step, the reasoning phase (as repetitive text) 6: min-variance makes every
# step exact, and zero jitter makes every step time exact.
PHASED = {"reasoning_tokens": R, "reasoning_kind": "repetitive", "reasoning_step_ms": 12.0, "step_ms": 10.0,
          "accept_dist": "min-variance", "jitter": 0.0}
CASES = {"vllm": {"dialect": "vllm"}, "vllm-old": {"dialect": "vllm", "reasoning_key": "reasoning_content"},
         "sglang": {"dialect": "sglang"}, "llamacpp": {"dialect": "llamacpp"}}
FIELD = {"vllm": "reasoning", "vllm-old": "reasoning_content", "sglang": "reasoning_content",
         "llamacpp": "reasoning_content"}
BODY: dict[str, Any] = {"messages": [{"role": "user", "content": PROSE}], "max_tokens": N, "ignore_eos": True,
                        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                        "timings_per_token": True}


assert classify(PROSE) == "prose"


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimServer]]:
    servers = {name: SimServer("healthy", speed=20, in_process=True, overrides={**PHASED, **over})
               for name, over in CASES.items()}
    try:
        for s in servers.values():
            s.start()
        yield servers
    finally:
        for s in servers.values():
            s.stop()


def _count(ev: dict[str, Any], prev: int) -> int:
    """Cumulative completion tokens after this event (continuous usage or llama.cpp's timings)."""
    if ev.get("timings"):
        return int(ev["timings"]["predicted_n"])
    usage = ev.get("usage")
    return int(usage["completion_tokens"]) if usage else prev


@pytest.mark.parametrize("case", list(CASES))
def test_reasoning_goes_out_first_in_the_dialects_field_and_truth_says_so(sims: dict[str, SimServer],
                                                                          case: str) -> None:
    sim = sims[case]
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        s = stream(c, "/v1/chat/completions", BODY)
    truth = sim.truth(s.id)
    assert truth["reasoning_tokens"] == R and truth["content_tokens"] == N - R
    assert sum(st["reasoning_tokens"] for st in truth["steps"]) == R
    # the first answer token goes out in the first step that passes R tokens
    cum = 0
    for st in truth["steps"]:
        cum += st["tokens"]
        if cum > R:
            assert truth["ttft_content_s"] == st["t_s"]
            break
    # over the wire: reasoning text only in the dialect's field, before any content; its tokens are R
    seen_content = False
    reasoning_tokens = prev = 0
    for ev in s.events:
        delta = ev["choices"][0].get("delta", {}) if ev.get("choices") else {}
        now = _count(ev, prev)
        other = {"reasoning", "reasoning_content"} - {FIELD[case]}
        assert not other & set(delta), delta
        if delta.get(FIELD[case]):
            assert not seen_content, "reasoning after the answer began"
            if not delta.get("content"):
                reasoning_tokens += now - prev
        if delta.get("content"):
            seen_content = True
        prev = now
    usage = s.usage()
    assert usage is not None
    if case == "llamacpp":  # one event per token: never a mixed event
        assert reasoning_tokens == R
    else:  # the boundary step's chunk carries both; the server counts reasoning tokens (vLLM, SGLang)
        assert reasoning_tokens < R <= reasoning_tokens + 6
        assert usage["completion_tokens_details"] == {"reasoning_tokens": R}
    assert seen_content


def test_the_first_answer_token_when_reasoning_ends_on_a_step_edge() -> None:
    # 37 = the prefill's token + 6 steps of 6: the reasoning ends exactly at a step's end
    with SimServer("healthy", speed=50, in_process=True, overrides={**PHASED, "reasoning_tokens": 37}) as sim, \
            httpx.Client(base_url=sim.url, timeout=30) as c:
        s = stream(c, "/v1/chat/completions", BODY)
        truth = sim.truth(s.id)
    steps = truth["steps"]
    edge = next(i for i, st in enumerate(steps) if st["tokens"] > st["reasoning_tokens"])
    assert sum(st["tokens"] for st in steps[:edge]) == 37 and steps[edge]["reasoning_tokens"] == 0
    assert truth["ttft_content_s"] == steps[edge]["t_s"]
    # on the wire: the chunks before it carry reasoning only, its chunk content only
    chunks = [ev["choices"][0]["delta"] for ev in s.events if ev.get("choices") and ev["choices"][0]["delta"]]
    chunks = [d for d in chunks if d.get("reasoning") or d.get("content")]
    assert all(d.get("reasoning") and not d.get("content") for d in chunks[:edge])
    assert chunks[edge].get("content") and not chunks[edge].get("reasoning")


def test_each_phase_has_its_own_acceptance_and_step_time(sims: dict[str, SimServer]) -> None:
    sim = sims["vllm"]
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        s = stream(c, "/v1/chat/completions", BODY)
    truth = sim.truth(s.id)
    prof = load_profile("healthy", PHASED)
    generated = 0
    phases: dict[str, list[dict[str, Any]]] = {"reasoning": [], "content": []}
    for st in truth["steps"]:
        if st["phase"] == "decode" and generated + st["tokens"] < N:  # the last step may draft fewer
            phases["reasoning" if generated < R else "content"].append(st)
        generated += st["tokens"]
    assert phases["reasoning"] and phases["content"]
    assert {st["tokens"] for st in phases["reasoning"]} == {prof.accept_len["repetitive"]}
    assert {st["tokens"] for st in phases["content"]} == {prof.accept_len["prose"]}
    for name, extra in (("reasoning", prof.reasoning_step_ms), ("content", 0.0)):
        for st in phases[name]:
            want = (prof.step_ms + extra + prof.step_ms_per_1k_ctx * st["ctx"] / 1000) / sim.speed
            assert st["step_ms"] == pytest.approx(want, rel=1e-9), (name, st)


def test_seed_collapse_lands_on_the_reasoning_phase() -> None:
    # a prose prompt on chat: reasoning accepts as reasoning text (5, then 2.9 after 400 tokens), the
    # answer after 1200 tokens accepts as prose again (5)
    seed = load_profile("seed")
    with SimServer("seed", speed=200, in_process=True) as sim, httpx.Client(base_url=sim.url, timeout=60) as c:
        body = {"messages": [{"role": "user", "content": PROSE}], "max_tokens": 1500, "ignore_eos": True}
        rid = c.post("/v1/chat/completions", json=body).json()["id"]
        truth = sim.truth(rid)
        rid = c.post("/v1/completions", json={"prompt": PROSE, "max_tokens": 50, "ignore_eos": True}).json()["id"]
        plain = sim.truth(rid)
    assert truth["reasoning_tokens"] == seed.reasoning_tokens == 1200
    spans: dict[str, list[int]] = {"early": [], "collapsed": [], "answer": []}
    generated = 0
    for st in truth["steps"]:
        if st["phase"] == "decode" and generated + st["tokens"] < 1500:
            where = "answer" if generated >= 1200 else "collapsed" if generated >= 400 else "early"
            spans[where].append(st["tokens"])
        generated += st["tokens"]
    mean = {k: sum(v) / len(v) for k, v in spans.items()}
    assert mean["early"] == pytest.approx(5.0, abs=0.05)
    assert mean["collapsed"] == pytest.approx(2.9, abs=0.1)
    assert mean["answer"] == pytest.approx(5.0, abs=0.05)
    # completions carry no reasoning phase: nothing changes
    assert plain["reasoning_tokens"] == 0 and plain["content_tokens"] == 50
    assert plain["ttft_content_s"] == plain["ttft_s"]


def test_a_profile_without_reasoning_streams_as_before() -> None:
    with SimServer("healthy", speed=50, in_process=True) as sim, httpx.Client(base_url=sim.url, timeout=30) as c:
        s = stream(c, "/v1/chat/completions", BODY)
        truth = sim.truth(s.id)
    assert truth["reasoning_tokens"] == 0 and truth["content_tokens"] == N
    assert truth["ttft_content_s"] == truth["ttft_s"]
    assert all(not ({"reasoning", "reasoning_content"} & set(ev["choices"][0].get("delta", {})))
               for ev in s.events if ev.get("choices"))
    usage = s.usage()
    assert usage is not None and "completion_tokens_details" not in usage


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("reasoning_kind", "thinking", "reasoning_kind"),
    ("reasoning_key", "thoughts", "reasoning_key"),
    ("reasoning_step_ms", -1, "reasoning_step_ms"),
])
def test_bad_reasoning_keys_are_named(key: str, value: Any, needle: str) -> None:
    with pytest.raises(ProfileError, match=needle) as info:
        load_profile("healthy", {key: value})
    assert "\n" not in str(info.value)
