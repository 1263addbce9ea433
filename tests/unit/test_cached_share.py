"""The prefix cache named where it decides a figure: a result's cached share, TTFT floors inconclusive when requests
meant to be cold came back cached, and comparisons whose sides differ in cached share (hand-built results)."""

from __future__ import annotations

from typing import Any

from support import judged_json

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.cases.result_parts import SessionRequest
from pytest_specperf.cases.results import SessionResult, StreamResult, SustainedResult
from pytest_specperf.compare import gates
from pytest_specperf.run import cached_share
from pytest_specperf.run.floors import JudgeSettings, judge_sustained


def _stream(ttft: float, prompt: int = 500, cached: int | None = 0) -> StreamResult:
    return StreamResult(prompt_tokens=prompt, completion_tokens=64, ttft_s=ttft, total_s=1.0, decode_tps=100.0,
                        client_tps=90.0, window_tokens=None, window_tps=[], early_tps=None, late_tps=None, drift=None,
                        trend_p=None, stalls=[], tokens_per_chunk=3.0, count_source="usage", counts_exact=True,
                        cached_tokens=cached)


def _sustained(streams: list[StreamResult]) -> SustainedResult:
    return SustainedResult(kind="sustained", endpoint="http://x", model="m", server="vllm", ctx=500, prompt_tokens=500,
                           nodeid="t::c", ttft_s=sorted(s.ttft_s for s in streams)[len(streams) // 2],
                           decode_tps=100.0, streams=streams, repeat=len(streams))


def test_cold_streams_carry_their_share_and_judge_ttft() -> None:
    r = _sustained([_stream(0.06), _stream(0.061, cached=0), _stream(0.059, cached=3)])
    cached_share.attach(r, allowance=5, mode="cold")
    assert r.cached_share == 3 / 1500 and r.ttft_cache == ""
    judge_sustained(r, SustainedSpec(tokens=64, max_ttft_s=0.05), JudgeSettings())
    assert r.verdict == "failed" and "ttft p50 0.060 s > max_ttft_s 0.05" in r.reason


def test_a_cold_request_that_came_back_cached_makes_ttft_inconclusive() -> None:
    def hot() -> SustainedResult:
        r = _sustained([_stream(0.06), _stream(0.002, cached=496), _stream(0.06)])
        cached_share.attach(r, allowance=5, mode="cold")
        return r

    r = hot()
    assert r.ttft_cache.startswith("ttft inconclusive: 1 of 3 requests meant to be cold came back from the "
                                   "server's prefix cache (up to 496 of 500 prompt tokens cached)")
    judge_sustained(r, SustainedSpec(tokens=64, max_ttft_s=0.05), JudgeSettings(inconclusive="warn"))
    assert r.verdict == "passed" and r.warnings == [r.ttft_cache]  # the floor failed, but on a cached TTFT
    r = hot()
    judge_sustained(r, SustainedSpec(tokens=64, max_ttft_s=0.05), JudgeSettings(inconclusive="fail"))
    assert r.verdict == "failed" and "prefix cache" in r.reason and "max_ttft_s" not in r.reason
    r = hot()
    judge_sustained(r, SustainedSpec(tokens=64), JudgeSettings())
    assert r.verdict == "passed" and r.ttft_cache in r.notes  # no TTFT floor: said, not judged
    # a tail ceiling alone is a TTFT floor asked for as much as max_ttft_s: a cached TTFT makes it inconclusive
    r = hot()
    judge_sustained(r, SustainedSpec(tokens=64, concurrency=3, max_ttft_p99_s=5), JudgeSettings(inconclusive="warn"))
    assert r.verdict == "passed" and r.warnings == [r.ttft_cache]
    # asked for a warm cache: cached is what was wanted
    r = _sustained([_stream(0.002, cached=496)] * 3)
    cached_share.attach(r, allowance=5, mode="warm")
    assert r.ttft_cache == "" and r.cached_share == 496 / 500 and r.prefix_cache == "warm"


def test_unreported_cache_is_no_share_and_no_verdict() -> None:
    r = _sustained([_stream(0.06, cached=None)] * 3)
    cached_share.attach(r, allowance=5, mode="cold")
    assert r.cached_share is None and r.ttft_cache == ""


def test_a_sessions_first_turns_are_the_cold_ones() -> None:
    rows = [SessionRequest(user=0, turn=1, sent_s=0.0, ttft_s=0.1, prompt_tokens=300, cached_tokens=0),
            SessionRequest(user=0, turn=2, sent_s=1.0, ttft_s=0.1, prompt_tokens=400, cached_tokens=320)]
    r = SessionResult(kind="session", endpoint="http://x", model="m", server="vllm", ctx=300, prompt_tokens=300,
                      per_request=rows)
    cached_share.attach(r, allowance=5, mode="cold")
    assert r.cached_share == 0.0 and r.ttft_cache == ""
    rows[0].cached_tokens = 288  # turn 1 of a replayed conversation, served from the cache
    cached_share.attach(r, allowance=5, mode="cold")
    assert r.cached_share == 288 / 300 and "1 of 1 requests meant to be cold" in r.ttft_cache


def _saved(ttfts: list[float], cached: int) -> dict[str, Any]:
    r = _sustained([_stream(t, cached=cached) for t in ttfts])
    cached_share.attach(r, allowance=5, mode="warm")  # the share alone: the saved run of an older version
    return r.as_dict()


def test_a_comparison_whose_sides_differ_in_cached_share_says_so() -> None:
    base = _saved([0.060, 0.061, 0.059, 0.062, 0.060], cached=1)
    cand = _saved([0.010, 0.011, 0.010, 0.012, 0.010], cached=496)
    judged_json.against_baseline(gates.Gate(), cand, [base])
    ttft = next(c for c in cand["comparisons"] if c["metric"] == "ttft_s")
    assert ttft["verdict"] == "inconclusive", ttft["reason"]
    assert "cached share of the prompt 0.00 (baseline) vs 0.99 (now): the prefix cache moved TTFT" in ttft["reason"]
    decode = next(c for c in cand["comparisons"] if c["metric"] == "decode_tps")
    assert decode["verdict"] == "passed" and "cached share of the prompt 0.00 (baseline) vs 0.99 (now)" in \
        decode["reason"]
    # the same shares on both sides: the TTFT change is the server's, judged as ever
    cand = _saved([0.010, 0.011, 0.010, 0.012, 0.010], cached=1)
    judged_json.against_baseline(gates.Gate(), cand, [base])
    ttft = next(c for c in cand["comparisons"] if c["metric"] == "ttft_s")
    assert ttft["verdict"] == "improved" and "cached share" not in ttft["reason"]
