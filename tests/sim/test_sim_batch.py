"""Continuous batching: concurrent requests share steps, a step costs what its batch verifies, and
speculation pays alone but loses under load (the ``batching`` profile's known crossover)."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.sim_helpers import concurrent_streams, user_decode_tps

from pytest_specperf.sim import SimServer, load_profile, start_all
from pytest_specperf.sim.batch import Arrival, simulate
from pytest_specperf.sim.model import decode_step_ms, plan
from pytest_specperf.sim.textgen import prompt_text

SPEED = 10.0  # batching's 20 ms step becomes 2 ms; a C=16 step ~25 ms
CTX, TOKENS = 1000, 256


def bodies(n: int, tokens: int = TOKENS, ctx: int = CTX) -> list[dict[str, Any]]:
    """n distinct prose prompts of ``ctx`` tokens, forced to ``tokens`` outputs."""
    return [{"prompt": prompt_text("prose", ctx, seed=i), "max_tokens": tokens, "ignore_eos": True, "seed": i}
            for i in range(n)]


@pytest.fixture(scope="module")
def twins() -> Iterator[dict[str, SimServer]]:
    """The batching profile with speculation on and its twin with it off (jitter off: exact step times)."""
    sims = {"spec": SimServer("batching", speed=SPEED, overrides={"jitter": 0.0}),
            "plain": SimServer("batching", speed=SPEED, overrides={"jitter": 0.0, "speculation": False})}
    start_all(sims.values())
    try:
        yield sims
    finally:
        for sim in sims.values():
            sim.stop()


def test_concurrent_requests_share_steps(twins: dict[str, SimServer]) -> None:
    sim = twins["spec"]
    ids = concurrent_streams(sim.url, bodies(6, tokens=200))
    truths = [sim.truth(rid) for rid in ids]
    groups: dict[int, list[tuple[dict, dict]]] = defaultdict(list)
    for truth in truths:
        assert truth["done"] and truth["completion_tokens"] == 200 and truth["speculation"] is True
        assert 0 <= truth["queue_s"] <= truth["ttft_s"] == truth["steps"][0]["t_s"]
        indices = [st["step"] for st in truth["steps"]]
        assert indices == sorted(set(indices))
        for st in truth["steps"]:
            groups[st["step"]].append((truth, st))
    assert max(len(g) for g in groups.values()) == 6  # all six decoded together at some point
    for members in groups.values():
        # the step's end on the model's clock: each request's arrival on it is behind_s before its real one
        ends = {round(t["arrival_monotonic"] - t["behind_s"] + st["intended_t_s"], 6) for t, st in members}
        assert len(ends) == 1  # one step, one end for everyone in it
        assert {st["batch"] for _, st in members} == {len(members)}
        # its length is the batch cost of exactly these members: decoders plus prefills
        decoders = [(st["ctx"], st["ctx"] - t["prompt_tokens"], st["drafted"]) for t, st in members
                    if st["phase"] == "decode"]
        prefill = sum(1000 * t["prompt_tokens"] / sim.profile.prefill_tokens_per_s for t, st in members
                      if st["phase"] == "prefill")
        for _, st in members:
            assert st["step_ms"] * SPEED == pytest.approx(decode_step_ms(sim.profile, decoders) + prefill)
            assert st["batch_tokens"] == sum(d + 1 for _, _, d in decoders)
    # a busy step verifies every member's drafts, so it is slower than a step alone
    busy = max(groups.values(), key=len)
    assert busy[0][1]["step_ms"] > 2 * sim.profile.step_ms / SPEED


@pytest.mark.parametrize("level", [1, 8, 16])
def test_speculation_pays_alone_and_loses_under_load(twins: dict[str, SimServer], level: int) -> None:
    per_user = {}
    for arm, sim in twins.items():
        truths = [sim.truth(rid) for rid in concurrent_streams(sim.url, bodies(level))]
        decode = [st for t in truths for st in t["steps"] if st["phase"] == "decode"]
        assert statistics.median(st["batch"] for st in decode) == level
        if arm == "plain":
            assert {(st["tokens"], st["drafted"]) for st in decode} == {(1, 0)}
        per_user[arm] = statistics.median(user_decode_tps(t, SPEED) for t in truths)
        # what the server did over HTTP is what the profile says for the same load
        answer = simulate(sim.profile, [Arrival(0.0, t["prompt_tokens"], TOKENS, seed=i) for i, t in enumerate(truths)])
        expected = statistics.median((TOKENS - 1) / (r["steps"][-1]["t_s"] - r["steps"][0]["t_s"]) for r in answer)
        assert per_user[arm] == pytest.approx(expected, rel=0.05), arm
    speedup = per_user["spec"] / per_user["plain"]
    if level == 1:
        assert speedup > 2.0, per_user  # profile: ~120 vs ~47 tok/s
    else:
        assert speedup < 0.9, per_user  # profile: ~0.81 at 8, ~0.68 at 16


def test_profile_crossover_between_four_and_eight() -> None:
    spec = load_profile("batching", {"jitter": 0.0})
    plain = load_profile(spec, {"speculation": False})

    def user_tps(profile: Any, level: int) -> float:
        recs = simulate(profile, [Arrival(0.0, CTX, TOKENS, seed=i) for i in range(level)])
        return statistics.median((TOKENS - 1) / (r["steps"][-1]["t_s"] - r["steps"][0]["t_s"]) for r in recs)

    ratio = {c: user_tps(spec, c) / user_tps(plain, c) for c in (1, 2, 4, 8, 16, 32)}
    assert all(ratio[c] > 1.2 for c in (1, 2, 4)), ratio
    assert all(ratio[c] < 0.9 for c in (8, 16, 32)), ratio
    # aggregate throughput: speculation's saturates early, the plain twin's keeps growing to 16
    agg = {c: c * user_tps(spec, c) for c in (2, 8)}
    assert agg[8] < 1.1 * agg[2]
    assert 16 * user_tps(plain, 16) > 1.5 * 4 * user_tps(plain, 4)


def test_max_batch_makes_later_requests_wait(twins: dict[str, SimServer]) -> None:
    with SimServer("batching", speed=SPEED, in_process=True, overrides={"jitter": 0.0, "max_batch": 2}) as sim:
        truths = sorted((sim.truth(rid) for rid in concurrent_streams(sim.url, bodies(4, tokens=60))),
                        key=lambda t: t["queue_s"])
    assert max(st["batch"] for t in truths for st in t["steps"]) == 2
    first, last = truths[:2], truths[2:]
    # the later two got a slot only once one of the first two had finished
    first_end = min(t["arrival_monotonic"] + t["steps"][-1]["intended_t_s"] for t in first)
    for t in last:
        start = t["arrival_monotonic"] + t["queue_s"]
        assert start >= first_end - 1e-6
        assert t["ttft_s"] > t["queue_s"] > 5 * max(f["queue_s"] for f in first)


def test_alone_the_batch_is_the_single_request_plan() -> None:
    prof = load_profile("seed")
    [rec] = simulate(prof, [Arrival(0.0, 700, 300, "reasoning", seed=3)])
    prefill, steps = plan(prof, 700, "reasoning", 300, seed=3)
    assert rec["ttft_s"] == pytest.approx(prefill / 1000) and rec["queue_s"] == 0
    assert [(s["tokens"], s["accepted"]) for s in rec["steps"][1:]] == [(s.tokens, s.accepted) for s in steps]
    assert [s["step_ms"] for s in rec["steps"][1:]] == pytest.approx([s.step_ms for s in steps])
    assert rec["total_s"] == pytest.approx((prefill + sum(s.step_ms for s in steps)) / 1000)


def test_plain_twin_shows_no_speculation_on_the_wire(twins: dict[str, SimServer]) -> None:
    metrics = httpx.get(twins["plain"].url + "/metrics").text
    assert "vllm:generation_tokens_total" in metrics and "spec_decode" not in metrics
    assert "vllm:spec_decode_num_drafts_total" in httpx.get(twins["spec"].url + "/metrics").text


CHUNKED = {"jitter": 0.0, "prefill_tokens_per_s": 10000.0, "prefill_chunk_tokens": 256}


def _prefill_ms_per_step(profile: Any, recs: list[dict[str, Any]]) -> dict[int, float]:
    """Per step (by index): its length less what its decoders cost, i.e. the prefill it carried (jitter off)."""
    members: dict[int, list[tuple[dict, dict]]] = defaultdict(list)
    for rec in recs:
        for st in rec["steps"]:
            members[st["step"]].append((rec, st))
    out = {}
    for index, m in members.items():
        decoders = [(st["ctx"], st["ctx"] - rec["prompt_tokens"], st["drafted"]) for rec, st in m
                    if st["phase"] == "decode"]
        out[index] = m[0][1]["step_ms"] - (decode_step_ms(profile, decoders) if decoders else 0.0)
    return out


def test_a_chunked_prefill_spreads_over_the_running_decodes() -> None:
    """vLLM's chunked prefill, llama.cpp's n_batch: a long prompt arriving into running decodes is prefilled a chunk
    per step, each step lengthened by its chunk only, instead of one step held up by the whole prompt."""
    chunked = load_profile("healthy", CHUNKED)
    whole = load_profile("healthy", {**CHUNKED, "prefill_chunk_tokens": None})
    arrivals = [Arrival(0.0, 200, 200, seed=1), Arrival(0.0, 200, 200, seed=2), Arrival(0.5, 2000, 50, seed=3)]
    for profile, chunks in ((chunked, [25.6] * 7 + [20.8]), (whole, [200.0])):
        recs = simulate(profile, arrivals)
        a, c = recs[0], recs[2]
        extra = _prefill_ms_per_step(profile, recs)
        # the running request's steps while the newcomer prefilled (its queue's end to its first token): each
        # lasted its decode plus one chunk (the last the 2000 - 7 * 256 = 208 tokens left), or, unchunked, one
        # step the whole 200 ms prefill; C's first token came at the end of the step of its last chunk
        t0, t1 = 0.5 + c["queue_s"], 0.5 + c["ttft_s"]
        during = [st for st in a["steps"] if t0 < st["t_s"] <= t1 + 1e-9]
        assert [round(extra[st["step"]], 6) for st in during] == pytest.approx(chunks), [extra[st["step"]]
                                                                                           for st in during]
        assert c["steps"][0]["step"] == during[-1]["step"]
        # and a running stream's longest pause between tokens is one decode plus one chunk, not the whole prompt
        gaps = [b["t_s"] - p["t_s"] for p, b in itertools.pairwise(a["steps"])]
        assert max(chunks) < 1000 * max(gaps) < max(chunks) + 3 * profile.step_ms, gaps


@pytest.mark.timeout(60)
@pytest.mark.parametrize("max_batch", [1, 2])
def test_a_prompt_part_way_through_its_chunks_keeps_one_slot_not_two(max_batch: int) -> None:
    """A partly prefilled prompt is waiting and holds a slot: counted once, it finishes even alone in a batch of one
    (counted twice, a batch of one had no room for it: empty steps forever)."""
    profile = load_profile("healthy", {**CHUNKED, "prefill_chunk_tokens": 64, "max_batch": max_batch})
    recs = simulate(profile, [Arrival(0.0, 1000, 10, seed=1), Arrival(0.0, 1000, 10, seed=2)])
    for rec in recs:
        assert rec["total_s"] is not None and len([s for s in rec["steps"] if s["phase"] == "decode"]) >= 1
    # 16 chunks of 64 tokens (1000 = 15 x 64 + 40) each, at 10,000 tok/s: the first prompt's 100 ms of prefill, and
    # with one slot the second waits for the whole of the first request
    assert recs[0]["ttft_s"] == pytest.approx(0.1, abs=0.02)
    if max_batch == 1:
        assert recs[1]["queue_s"] >= recs[0]["total_s"] - 1e-9
