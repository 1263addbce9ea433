"""The simulator's prefix cache: cached prompt tokens skip their prefill, each dialect reports them, LRU evicts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.sim_helpers import stream

from pytest_specperf.sim import ProfileError, SimServer, load_profile
from pytest_specperf.sim.textgen import prompt_text

SPEED = 10.0
# prefill dominates a first token: 1500 prompt tokens at 3000 tok/s is 500 ms (50 ms at speed 10)
CACHE = {"prefix_cache_tokens": 4000, "prefill_tokens_per_s": 3000.0, "jitter": 0.0, "cache_report": True}
CASES = {"vllm": {"dialect": "vllm", "prefix_cache_block": 16}, "sglang": {"dialect": "sglang"},
         "llamacpp": {"dialect": "llamacpp"}}


def _body(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"prompt": prompt, "max_tokens": 8, "ignore_eos": True, "stream_options": {"include_usage": True},
            **extra}


def _reported(dialect: str, s: Any) -> int | None:
    """What the server says it took from its cache, in its own fields."""
    last = s.events[-1]
    usage = s.usage()
    details = usage.get("prompt_tokens_details") if usage else None
    if dialect == "llamacpp":
        assert details == {"cached_tokens": last["timings"]["cache_n"]}
        assert last["timings"]["prompt_n"] + last["timings"]["cache_n"] == usage["prompt_tokens"]
        return int(last["timings"]["cache_n"])
    return None if details is None else int(details["cached_tokens"])


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimServer]]:
    servers = {name: SimServer("healthy", speed=SPEED, in_process=True, overrides={**CACHE, **over})
               for name, over in CASES.items()}
    try:
        for s in servers.values():
            s.start()
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.mark.parametrize("dialect", list(CASES))
def test_a_repeated_prompt_is_cached_reported_and_its_first_token_comes_sooner(sims: dict[str, SimServer],
                                                                             dialect: str) -> None:
    sim = sims[dialect]
    sim.reset(truth=True)
    httpx.post(f"{sim.url}/sim/reset", params={"cache": "1"}).raise_for_status()
    prof = load_profile("healthy", {**CACHE, **CASES[dialect]})
    prompt = prompt_text("prose", 1500, seed=11)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        cold, warm = (stream(c, "/v1/completions", _body(prompt)) for _ in range(2))
    t_cold, t_warm = sim.truth(cold.id), sim.truth(warm.id)
    block = prof.prefix_cache_block
    assert t_cold["cached_tokens"] == 0
    assert t_warm["cached_tokens"] == (1500 - 1) // block * block  # whole blocks, one token always computed
    reported = _reported(dialect, cold), _reported(dialect, warm)
    # SGLang leaves the details out when nothing was cached; vLLM and llama.cpp say 0
    assert reported == (None if dialect == "sglang" else 0, t_warm["cached_tokens"])
    # prefill costs the uncached tokens only (truth: the first step's time), and the client sees it
    for t in (t_cold, t_warm):
        want = 1000.0 * (1500 - t["cached_tokens"]) / prof.prefill_tokens_per_s / SPEED
        assert t["steps"][0]["step_ms"] == pytest.approx(want, rel=1e-9)
    # on the server's clock the cold prompt waited its 50 ms prefill and the warm one came sooner (not "in half the
    # time": beside CPU hogs the warm request's few ms can stretch by a stalled wake-up)
    assert t_cold["ttft_s"] >= t_cold["steps"][0]["step_ms"] / 1000 > 0.04
    assert t_warm["ttft_s"] < t_cold["ttft_s"]


def test_the_next_turn_of_a_conversation_reuses_the_previous_prompt_and_answer(sims: dict[str, SimServer]) -> None:
    sim = sims["sglang"]
    user = prompt_text("prose", 300, seed=5)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        first = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": user}],
                                                     "max_tokens": 30, "ignore_eos": True}).json()
        answer = first["choices"][0]["message"]["content"]
        turn2 = [{"role": "user", "content": user}, {"role": "assistant", "content": answer},
                 {"role": "user", "content": "And then what happened?"}]
        second = c.post("/v1/chat/completions", json={"messages": turn2, "max_tokens": 8}).json()
    t1, t2 = sim.truth(first["id"]), sim.truth(second["id"])
    assert t2["cached_tokens"] >= t1["prompt_tokens"] + t1["completion_tokens"] - 1
    assert t2["cached_tokens"] < t2["prompt_tokens"]
    assert second["usage"]["prompt_tokens_details"] == {"cached_tokens": t2["cached_tokens"]}


def test_least_recently_used_prompts_are_evicted() -> None:
    # room for two 1500-token prompts: A, B, C push A out; B (used after A) stays until C and A come back
    over = {**CACHE, "prefix_cache_tokens": 3200, "prefix_cache_block": 16}
    prompts = {name: prompt_text("prose", 1500, seed=seed) for name, seed in (("A", 1), ("B", 2), ("C", 3))}
    with SimServer("healthy", speed=SPEED, in_process=True, overrides=over) as sim, \
            httpx.Client(base_url=sim.url, timeout=30) as c:
        def cached(name: str) -> int:
            body = {"prompt": prompts[name], "max_tokens": 8, "ignore_eos": True}
            rid = c.post("/v1/completions", json=body).json()["id"]
            return int(sim.truth(rid)["cached_tokens"])
        seen = [cached(n) for n in ("A", "B", "A", "C", "B", "A")]
    full = 1499 // 16 * 16
    # A hit while held; C evicts B (least recent after A's reuse); B's return evicts A
    assert seen == [0, 0, full, 0, 0, 0]


def test_default_caches_as_vllm_and_reports_nothing_without_its_flag() -> None:
    prompt = prompt_text("prose", 400, seed=9)
    with SimServer("healthy", speed=50, in_process=True, overrides={"prefix_cache_tokens": 0}) as off, \
            httpx.Client(base_url=off.url, timeout=30) as c:
        ids = [stream(c, "/v1/completions", _body(prompt)).id for _ in range(2)]
        assert [off.truth(i)["cached_tokens"] for i in ids] == [0, 0]
    # the default: vLLM's automatic prefix caching, whole blocks of 16 of all but the last prompt token
    with SimServer("healthy", speed=50, in_process=True) as quiet, httpx.Client(base_url=quiet.url, timeout=30) as c:
        runs = [stream(c, "/v1/completions", _body(prompt)) for _ in range(2)]
        assert [quiet.truth(r.id)["cached_tokens"] for r in runs] == [0, 399 // 16 * 16]
        assert quiet.profile.prefix_cache_block == 16 and quiet.profile.prefix_cache_tokens == 262144
    usage = runs[1].usage()
    assert usage is not None and usage.get("prompt_tokens_details") is None  # vLLM, no flag
    # llama.cpp and SGLang match token by token, as they ship
    for dialect in ("llamacpp", "sglang"):
        assert load_profile("healthy", {"dialect": dialect}).prefix_cache_block == 1
    assert load_profile("healthy", {"dialect": "llamacpp", "prefix_cache_block": 16}).prefix_cache_block == 16


@pytest.mark.parametrize(("dialect", "field", "value"), [("vllm", "cache_salt", "s1"),
                                                        ("llamacpp", "cache_prompt", False)])
def test_a_request_keeps_its_prefill_out_of_the_cache_as_each_server_allows(dialect: str, field: str,
                                                                            value: Any) -> None:
    prompt = prompt_text("prose", 400, seed=10)
    with SimServer("healthy", speed=50, in_process=True, overrides={"dialect": dialect}) as sim, \
            httpx.Client(base_url=sim.url, timeout=30) as c:
        plain = stream(c, "/v1/completions", _body(prompt)).id
        kept_out = stream(c, "/v1/completions", {**_body(prompt), field: value}).id
        cached = [sim.truth(i)["cached_tokens"] for i in (plain, kept_out)]
        if dialect == "vllm":  # a salt shares blocks only with its own salt
            again = stream(c, "/v1/completions", {**_body(prompt), field: value}).id
            cached.append(sim.truth(again)["cached_tokens"])
            assert cached == [0, 0, 399 // 16 * 16]
        else:
            assert cached == [0, 0]


@pytest.mark.parametrize(("key", "value"), [("prefix_cache_tokens", -1), ("prefix_cache_block", 0),
                                            ("cache_report", "yes")])
def test_bad_cache_keys_are_named(key: str, value: Any) -> None:
    with pytest.raises(ProfileError, match=key) as info:
        load_profile("healthy", {key: value})
    assert "\n" not in str(info.value)
