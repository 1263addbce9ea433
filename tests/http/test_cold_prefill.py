"""The prefix cache decides no figure silently: on a simulator that caches prefixes as vLLM does (its default),
every request a case means to be cold comes back with nothing cached (the server's own truth), across trials,
repeats, users, runs and sessions, while the prompt keeps its exact server-counted length; ``prefix_cache="warm"``
asks for a cached prefill and gets one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import RateResult, SessionResult, SustainedResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts import cold
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer
from tests.support.gateway import SaltStrippingClient

# vLLM with --enable-prompt-tokens-details; prefill slow enough that a cached one shows in TTFT
CACHING = {"cache_report": True, "prefill_tokens_per_s": 2000.0, "jitter": 0.0}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=10, in_process=True, overrides=CACHING) as s:
        yield s


def _run(sim: SimServer, kind: str, nodeid: str, **kw: Any) -> Any:
    with Client(sim.url, timeout=30) as client:
        return Runner(client).run(build_spec(kind, kw), nodeid)


def test_the_default_profile_caches_prefixes_as_vllm() -> None:
    with SimServer("healthy", speed=10, in_process=True, overrides={"cache_report": True}) as s, \
            Client(s.url, timeout=30) as client:
        client.detect()
        client.cold = False  # a plain client: no cache_salt
        text = Runner(client).prompt("prose", 300, 1).text
        first, again = (client.stream(text, 4) for _ in range(2))
        t = s.truth(again.response_id)
    assert first.cached_tokens == 0
    # every whole block of 16 of the prompt but its last token, as vLLM's automatic prefix caching
    assert again.cached_tokens == t["cached_tokens"] == (t["prompt_tokens"] - 1) // 16 * 16 > 0


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp", "sglang"])
def test_repeats_and_runs_of_a_case_are_cold_at_their_exact_length(dialect: str) -> None:
    # vLLM: a cache_salt per request; llama.cpp: cache_prompt false; SGLang takes neither: a tag in the prompt
    with SimServer("healthy", speed=10, in_process=True, overrides={**CACHING, "dialect": dialect}) as sim:
        runs = [_run(sim, "sustained", "t::cold", tokens=40, ctx=500, repeat=3) for _ in range(2)]
        truths = [[sim.truth(s.response_id) for s in r.streams] for r in runs]
    for r, truth in zip(runs, truths, strict=True):
        assert isinstance(r, SustainedResult) and r.verdict == "passed", r.reason
        assert [t["prompt_tokens"] for t in truth] == [500, 500, 500]  # a tag is counted inside ctx
        if dialect == "sglang":
            # a token-by-token cache still holds what precedes the tag's digits (the BOS): nothing of the prompt
            assert max(t["cached_tokens"] for t in truth) < 5, truth
            assert [s.cached_tokens for s in r.streams] == [t["cached_tokens"] or None for t in truth]
        else:
            assert [t["cached_tokens"] for t in truth] == [0, 0, 0]  # the server's own record
            assert [s.cached_tokens for s in r.streams] == [0, 0, 0] and r.cached_share == 0.0
        assert r.ttft_cache == "" and r.prefix_cache == "cold"
    if dialect != "sglang":
        # the prompt text is unchanged, so a later run decodes the same text and its trials pair with the first's
        assert [s.text_sha for s in runs[0].streams] == [s.text_sha for s in runs[1].streams]


def test_users_and_arrivals_are_cold(sim: SimServer) -> None:
    load = _run(sim, "sustained", "t::users", tokens=40, ctx=400, concurrency=3)
    rate = _run(sim, "rate", "t::rate", rps=20, requests=4, tokens=24, ctx=400)
    assert isinstance(rate, RateResult)
    for rid in [s.response_id for s in load.streams] + [rec.response_id for rec in rate.per_request]:
        assert sim.truth(rid)["cached_tokens"] == 0
    assert load.cached_share == 0.0 and rate.cached_share == 0.0
    assert all(rec.cached_tokens == 0 and rec.prompt_tokens == 400 for rec in rate.per_request)


def test_a_prompt_files_prompts_are_cold_each_time_they_are_sent(sim: SimServer) -> None:
    # 3 streams of one category's file: the same record twice in a row would be a cached prefill without a tag
    for _ in range(2):
        r = _run(sim, "sustained", "t::file", tokens=24, prompts="builtin:specbench-mini", categories=["qa"],
                 repeat=3, sample=1)
        assert [sim.truth(s.response_id)["cached_tokens"] for s in r.streams] == [0, 0, 0]
        assert r.cached_share == 0.0


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_sessions_start_cold_in_every_trial_and_reuse_their_conversation(sim: SimServer, api: str) -> None:
    kw = {"turns": 3, "tokens": 16, "users": 2, "ctx": 300, "turn_ctx": 30, "api": api}
    for _ in range(2):  # a second trial replays the same conversations
        r: SessionResult = _run(sim, "session", f"t::sess_{api}", **kw)
        truth = {row.response_id: sim.truth(row.response_id) for row in r.per_request}
        firsts = [row for row in r.per_request if row.turn == 1]
        assert [truth[row.response_id]["cached_tokens"] for row in firsts] == [0, 0]
        assert r.per_turn[0].cached_tokens == 0 and r.cached_share == 0.0
        # later turns reuse their own conversation, as asked
        assert r.cache_hit is not None and r.cache_hit > 0.8


def test_warm_asks_for_a_cached_prefill_and_gets_it(sim: SimServer) -> None:
    r = _run(sim, "sustained", "t::warm", tokens=40, ctx=500, repeat=3, prefix_cache="warm")
    c = _run(sim, "sustained", "t::warm_cold", tokens=40, ctx=500, repeat=3)
    for s in r.streams:
        t = sim.truth(s.response_id)
        assert s.cached_tokens == t["cached_tokens"] == (t["prompt_tokens"] - 1) // 16 * 16
    assert r.cached_share is not None and r.cached_share > 0.95
    assert r.prefix_cache == "warm" and r.ttft_cache == "" and r.verdict == "passed"
    # a cached prefill is what a warm figure measures, on the server's clock
    warm_ttft = sorted(sim.truth(s.response_id)["ttft_s"] for s in r.streams)[1]
    cold_ttft = sorted(sim.truth(s.response_id)["ttft_s"] for s in c.streams)[1]
    assert warm_ttft < 0.5 * cold_ttft, (warm_ttft, cold_ttft)


def test_a_cold_prompt_keeps_its_length_whatever_its_tag() -> None:
    # SGLang takes no salt: there the prompt itself opens with a fresh tag
    with SimServer("healthy", speed=10, in_process=True, overrides={"dialect": "sglang"}) as s, \
            Client(s.url, timeout=30) as client:
        client.detect()
        runner = Runner(client)
        for api in ("completions", "chat"):
            sent = runner.context.prompts("code", 257, [3, 4, 3], api)
            assert len({p.text for p in sent}) == 3 and all(p.text.startswith(p.head) for p in sent)
            assert [client.count_tokens(p.text, api=api) for p in sent] == [257, 257, 257]
            assert {p.text[len(p.head):] for p in sent} >= {runner.prompt("code", 257, 3, api).text[
                len(cold.head(cold.FIXED_TAG)):]}
    # where the client keeps a request out of the cache (vLLM), the prompt is the corpus text alone
    with SimServer("healthy", speed=10, in_process=True) as s, Client(s.url, timeout=30) as client:
        client.detect()
        p = Runner(client).context.prompt("code", 257, 3)
        assert p.head == "" and not p.text.startswith(cold.FIXED_TAG) and client.count_tokens(p.text) == 257


def test_a_bad_prefix_cache_keyword_is_named() -> None:
    with pytest.raises(ConfigError, match=r"sustained\(\): prefix_cache must be 'cold' .* or 'warm'.*got 'hot'"):
        build_spec("sustained", {"prefix_cache": "hot"})



def test_each_load_level_says_where_its_ttft_came_from_the_cache(sim: SimServer) -> None:
    """A sweep run again resends its prompts; with the salt stripped the server serves them from cache. Each level,
    judged as it is measured, says that its TTFT measures the cache (its own note, not only the case's)."""
    spec = build_spec("load_sweep", {"concurrency": [1, 2], "tokens": 40, "ctx": 500})
    with SaltStrippingClient(sim.url, timeout=30) as client:
        runner = Runner(client)
        runner.run(spec, "t::sweep_cache")
        r = runner.run(spec, "t::sweep_cache")
    for lv in r.levels:
        truth = [sim.truth(s.response_id)["cached_tokens"] for s in lv.streams]
        assert min(truth) > 400  # the server's own count: every prompt came back cached
        assert lv.ttft_cache.startswith(f"ttft inconclusive: {lv.concurrency} of {lv.concurrency} requests")
        assert lv.ttft_cache in lv.notes


def test_a_fresh_salt_is_not_remembered_but_a_named_one_is() -> None:
    """llama.cpp: a request's own fresh salt is sent once (cache_prompt false); only a named salt's later
    requests may reuse its slot, so only named salts are kept (one per request would grow without bound)."""
    with SimServer("healthy", speed=10, in_process=True, overrides={"dialect": "llamacpp"}) as s, \
            Client(s.url, timeout=30) as client:
        client.detect()
        bodies = [client.body("hello", 4, "completions", False, 0, 0.0)[1] for _ in range(50)]
        assert all(b["cache_prompt"] is False for b in bodies) and client._salts == set()
        named = [client.body("hello", 4, "completions", False, 0, 0.0, salt="conversation-1")[1]["cache_prompt"]
                 for _ in range(2)]
    assert named == [False, True]
