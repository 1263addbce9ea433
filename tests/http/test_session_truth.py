"""The ``session`` kind over HTTP against the simulator's truth: cached tokens per turn, the conversation
sent whole, TTFT falling with cached tokens, the eviction knob, and the cache-hit floor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import SessionResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.prompts.files import load_prompts
from pytest_specperf.run.floors import JudgeSettings
from pytest_specperf.run.runner import Runner
from pytest_specperf.run.session import judge_session, user_turns
from pytest_specperf.sim import SimServer

SPEED = 10.0
# prefill dominates a first token: 1200 prompt tokens at 3000 tok/s is 400 ms (40 ms at speed 10)
CACHE = {"prefix_cache_tokens": 40000, "prefill_tokens_per_s": 3000.0, "jitter": 0.0, "cache_report": True}


def _run(sim: SimServer, nodeid: str, **kw: Any) -> SessionResult:
    with Client(sim.url, timeout=30) as client:
        result = Runner(client).run(build_spec("session", kw), nodeid)
    assert isinstance(result, SessionResult)
    return result


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=SPEED, in_process=True, overrides={**CACHE, "dialect": "vllm"}) as s:
        yield s


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_each_turn_sends_the_conversation_and_its_cached_tokens_are_the_servers(sim: SimServer, api: str) -> None:
    r = _run(sim, f"t::conv_{api}", turns=3, tokens=24, users=2, ctx=200, turn_ctx=30, api=api)
    assert r.verdict == "passed" and r.requests == 6
    truths = {row.response_id: sim.truth(row.response_id) for row in r.per_request}
    for row in r.per_request:
        t = truths[row.response_id]
        assert row.cached_tokens == t["cached_tokens"]
        assert row.prompt_tokens == t["prompt_tokens"]
    by = {(row.user, row.turn): truths[row.response_id] for row in r.per_request}
    for user in (0, 1):
        for turn in (2, 3):
            prev, now = by[(user, turn - 1)], by[(user, turn)]
            # the previous turn's prompt and its answer are this turn's cached prefix (framing aside)
            assert now["cached_tokens"] >= prev["prompt_tokens"] + prev["completion_tokens"] - 8
            assert now["prompt_tokens"] > prev["prompt_tokens"] + prev["completion_tokens"]
    later = [t for (u, turn), t in by.items() if turn > 1]
    assert r.cache_hit == pytest.approx(sum(t["cached_tokens"] for t in later) / sum(t["prompt_tokens"] for t in later))
    assert [p.prompt_tokens for p in r.per_turn] == sorted(p.prompt_tokens for p in r.per_turn)


def test_ttft_falls_with_cached_tokens() -> None:
    # 300 new tokens a turn: without a cache the third turn's prefill is 60% longer than the first's (64 against
    # 40 ms), well beyond a busy host's noise (with 30 a turn, 7 ms apart, the order flipped beside two CPU hogs)
    kw = {"turns": 3, "tokens": 64, "users": 1, "ctx": 1200, "turn_ctx": 300}
    with SimServer("healthy", speed=SPEED, in_process=True, overrides=CACHE) as warm:
        cached = _run(warm, "t::ttft", **kw)
        truths = [warm.truth(row.response_id) for row in cached.per_request]
    with SimServer("healthy", speed=SPEED, in_process=True, overrides={**CACHE, "prefix_cache_tokens": 0}) as cold:
        uncached = _run(cold, "t::ttft", **kw)
        truths += [cold.truth(row.response_id) for row in uncached.per_request]
    # Each turn's TTFT on the client's clock: after the server wrote its first token, long before its last. 10 ms
    # of slack (when the in-process server stamped its writes after them, the client's thread read one 2.7 ms
    # earlier beside two CPU hogs) is still a quarter of the 40 ms prefill a wrong origin would lose.
    for row, t in zip(cached.per_request + uncached.per_request, truths, strict=True):
        assert t["ttft_s"] - 0.01 <= row.ttft_s < t["total_s"], (row, t["ttft_s"], t["total_s"])
    # the cached share is the server's own: all but each later turn's new tokens (300 and the answer's template)
    later = [t for row, t in zip(cached.per_request, truths[:len(cached.per_request)], strict=True) if row.turn > 1]
    true_hit = sum(t["cached_tokens"] for t in later) / sum(t["prompt_tokens"] for t in later)
    assert uncached.cache_hit == 0.0 and cached.cache_hit == pytest.approx(true_hit) and true_hit > 0.75
    for turn in (1, 2):  # later turns: TTFT pays only for the new tokens with the cache, the whole prompt without
        assert cached.per_turn[turn].ttft_p50_s < 0.5 * uncached.per_turn[turn].ttft_p50_s
    # without a cache TTFT grows with the conversation; with one it does not
    assert uncached.per_turn[2].ttft_p50_s > uncached.per_turn[0].ttft_p50_s
    assert uncached.ttft_growth_ms_per_1k is not None and uncached.ttft_growth_ms_per_1k > 0


def test_a_cache_too_small_for_the_sessions_evicts_them() -> None:
    kw = {"turns": 3, "tokens": 16, "users": 3, "ctx": 400, "turn_ctx": 30}
    small = {**CACHE, "prefix_cache_tokens": 500, "prefix_cache_block": 16}
    with SimServer("healthy", speed=SPEED, in_process=True, overrides=small) as sim:
        r = _run(sim, "t::evict", **kw)
        truth = [sim.truth(row.response_id)["cached_tokens"] for row in r.per_request if row.turn > 1]
    assert r.cached_tokens == sum(truth)
    assert r.cache_hit is not None and r.cache_hit < 0.5  # three 400+ token conversations share 500 tokens of cache


def test_min_cache_hit_fails_below_its_floor_and_cannot_pass_unreported() -> None:
    kw = {"turns": 2, "tokens": 16, "ctx": 200, "turn_ctx": 30, "min_cache_hit": 0.5}
    with SimServer("healthy", speed=SPEED, in_process=True, overrides={**CACHE, "prefix_cache_tokens": 0}) as off:
        r = _run(off, "t::floor", **kw)
    assert r.verdict == "failed" and "cache hit 0.00 < min_cache_hit 0.5" in r.reason
    quiet = {**CACHE, "cache_report": False}  # vLLM without --enable-prompt-tokens-details says nothing
    with SimServer("healthy", speed=SPEED, in_process=True, overrides=quiet) as sim, \
            pytest.raises(MeasurementError, match=r"min_cache_hit cannot be judged.*--enable-prompt-tokens-details"):
        _run(sim, "t::floor", **kw)
    with SimServer("healthy", speed=SPEED, in_process=True, overrides=CACHE) as on:
        assert _run(on, "t::floor", **kw).verdict == "passed"


@pytest.mark.parametrize(("kw", "message"), [
    ({"turns": 0}, "turns must be an integer >= 1"),
    ({"think_s": -1}, "think_s must be a number of seconds >= 0"),
    ({"min_cache_hit": 1.5}, r"min_cache_hit must be a fraction in \(0, 1\]"),
    ({"turns": 1, "min_cache_hit": 0.5}, "min_cache_hit needs turns >= 2"),
    ({"repeat": 0}, "repeat must be an integer >= 1 or 'auto'"),
    ({"turn": 3}, "did you mean 'turns'"),
])
def test_bad_session_keywords_are_named(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_spec("session", kw)


def test_sessions_run_at_once_and_think_between_turns(sim: SimServer) -> None:
    think = 0.15
    r = _run(sim, "t::think", turns=3, tokens=64, users=3, ctx=150, turn_ctx=20, think_s=think)
    rows = {(row.user, row.turn): row for row in r.per_request}
    truths = {key: sim.truth(row.response_id) for key, row in rows.items()}
    # When the server wrote an answer's last token, from the request's arrival. Not ``total_s``: the server stamps
    # that after its final write, and on a busy host it can be descheduled in between while the client reads on.
    answered = {key: truth["steps"][-1]["t_s"] for key, truth in truths.items()}
    for user in range(3):
        for turn in (2, 3):
            prev = rows[(user, turn - 1)]
            # the next turn goes after the whole previous answer (the server's own write of it) and the think time
            assert rows[(user, turn)].sent_s >= prev.sent_s + answered[(user, turn - 1)] + think
    # the sessions are at once: every first turn was sent before any session's first answer ended
    first_ends = min(rows[(u, 1)].sent_s + answered[(u, 1)] for u in range(3))
    assert max(rows[(u, 1)].sent_s for u in range(3)) < first_ends
    assert [t.sessions for t in r.per_turn] == [3, 3, 3]
    for t in r.per_turn:  # each turn's percentiles are over that turn's rows across the sessions
        ttfts = [row.ttft_s for row in r.per_request if row.turn == t.turn]
        assert (t.ttft_p50_s, t.ttft_p90_s) == pytest.approx(
            (float(np.percentile(ttfts, 50)), float(np.percentile(ttfts, 90))), rel=1e-9)
    # acceptance as in other load cases, from the server's counters: the healthy profile's prose, about 3
    assert r.acceptance is not None and r.acceptance.mean_len == pytest.approx(3.0, abs=0.4)
    # aggregate throughput: every turn's tokens over the case's span, think time included
    span = max(row.sent_s + truths[key]["total_s"] for key, row in rows.items())
    assert r.total_tps == pytest.approx(9 * 64 / span, rel=0.1)


def test_user_turns_come_from_a_prompt_file(sim: SimServer) -> None:
    records = load_prompts("builtin:specbench-mini").records
    spec = build_spec("session", {"turns": 2, "users": 2, "prompts": "builtin:specbench-mini"})
    with Client(sim.url, timeout=30) as client:
        turns = user_turns(Runner(client).context, spec, 0)  # type: ignore[arg-type]
    assert turns == [list(records[0].user_turns[:2]), list(records[1].user_turns[:2])]
    assert len(records[0].user_turns) >= 2  # multi-turn records: their own second turn is the session's
    r = _run(sim, "t::file", turns=2, tokens=16, users=2, prompts="builtin:specbench-mini")
    assert r.verdict == "passed" and r.prompts == "builtin:specbench-mini" and r.cache_hit is not None



def test_reasoning_is_not_sent_back_in_the_history() -> None:
    """A later turn repeats the previous answer, not its reasoning: by the server's count, each turn's prompt
    grows by the previous answer's content tokens plus the new message, the same with or without reasoning."""
    growth = {}
    for reasoning in (0, 16):
        overrides = {**CACHE, "dialect": "vllm", "reasoning_tokens": reasoning}
        with SimServer("healthy", speed=SPEED, in_process=True, overrides=overrides) as sim:
            r = _run(sim, f"t::reasoning{reasoning}", turns=3, tokens=24, users=1, ctx=200, turn_ctx=30, api="chat")
            truths = [sim.truth(row.response_id) for row in sorted(r.per_request, key=lambda row: row.turn)]
        assert [t["reasoning_tokens"] for t in truths] == [reasoning] * 3
        growth[reasoning] = [now["prompt_tokens"] - prev["prompt_tokens"] - prev["content_tokens"]
                             for prev, now in pairwise(truths)]
    assert growth[16] == growth[0], growth  # 16 more a turn if the reasoning went back


def test_a_file_of_single_prompts_makes_conversations_from_later_records(tmp_path: Any) -> None:
    (tmp_path / "single.jsonl").write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(3)))
    spec = build_spec("session", {"turns": 3, "users": 2, "prompts": "single.jsonl"}, base=tmp_path)
    # session u opens with record u, then takes the next records' prompts in file order, wrapping around
    assert user_turns(None, spec, 0) == [["p0", "p1", "p2"], ["p1", "p2", "p0"]]  # type: ignore[arg-type]


def test_a_client_behind_its_schedule_does_not_excuse_a_missed_cache_floor() -> None:
    spec = build_spec("session", {"turns": 2, "min_cache_hit": 0.5, "max_ttft_s": 0.001})
    r = SessionResult(kind="session", endpoint="http://x", model="m", server="vllm", ctx=256, prompt_tokens=256,
                      turns=2, requests=2, cache_hit=0.1, cached_tokens=30, ttft_p90_s=1.0,
                      client_behind="the client fell behind its schedule")
    judge_session(r, spec, JudgeSettings())  # type: ignore[arg-type]
    # the timed floor is excused (a warning), the counted one is not
    assert r.verdict == "failed" and r.reason.startswith("cache hit 0.10 < min_cache_hit 0.5")
    assert "ttft" not in r.reason and any("ttft p90 turn" in w for w in r.warnings)


def test_a_prompt_file_path_is_read_from_the_case_files_folder_and_sampled(tmp_path: Any) -> None:
    records = [{"question_id": i, "category": c, "turns": [f"first {i}", f"second {i}"]}
               for i, c in enumerate(["a", "b", "a"])]
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = build_spec("session", {"turns": 2, "users": 2, "prompts": "chats.jsonl", "categories": ["a"]},
                      base=tmp_path)
    assert spec.prompts == str(tmp_path / "chats.jsonl")
    turns = user_turns(None, spec, 0)  # type: ignore[arg-type]  # a file needs no endpoint
    assert turns == [["first 0", "second 0"], ["first 2", "second 2"]]
    with pytest.raises(ConfigError, match="ctx= with prompts="):
        build_spec("session", {"prompts": "chats.jsonl", "ctx": 100}, base=tmp_path)


def test_a_conversation_too_long_for_the_context_blames_its_turns(sim: SimServer) -> None:
    # 256 + 999 * (200 + 64) = 263992 prompt tokens: the turns fill the 262144-token context, not ctx=256
    with pytest.raises(MeasurementError, match=r"^a 1000-turn conversation's last prompt of 263992 tokens "
                       r"\(ctx 256 and the 999 turns and answers before it\) \+ 64 generated "
                       r"tokens need 264056 tokens of context, .* with 262144 .*; lower turns, turn_ctx, ctx or "
                       r"tokens, or start the server with a longer context$"):
        _run(sim, "turns", turns=1000, turn_ctx=200)
