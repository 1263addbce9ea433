"""A cold prefill on the real llama-server unless a case asks for reuse, in the server's own accounting
(``timings.cache_n``): llama-server keeps its slot's prompt by default, so without ``cache_prompt: false`` a
repeated prompt came back with all but its last token cached."""

from __future__ import annotations

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import SessionResult, SustainedResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.run.runner import Runner


def test_repeats_and_runs_prefill_cold_and_warm_reuses(ngram_server: LlamaServer) -> None:
    with Client(ngram_server.url, timeout=120) as client:
        runner = Runner(client)
        # repeat=2 with one variant's prompt twice would be a slot-cache hit; two runs replay the same prompts
        runs = [runner.run(build_spec("sustained", {"tokens": 16, "ctx": 300, "repeat": 2}), "t::cold")
                for _ in range(2)]
        warm = runner.run(build_spec("sustained", {"tokens": 16, "ctx": 300, "repeat": 2, "prefix_cache": "warm"}),
                          "t::cold")
    for r in runs:
        assert isinstance(r, SustainedResult) and r.verdict == "passed", r.reason
        # the server's own count of reused tokens: none, and every prompt token evaluated
        assert [s.server_timings["cache_n"] for s in r.streams if s.server_timings] == [0, 0]
        assert [s.cached_tokens for s in r.streams] == [0, 0] and r.cached_share == 0.0 and r.ttft_cache == ""
    # asked for warm: the slot's prompt is reused (all but the last token), and said to be
    assert all((s.cached_tokens or 0) >= (s.prompt_tokens or 0) - 2 for s in warm.streams), warm.streams
    assert warm.cached_share is not None and warm.cached_share > 0.9 and warm.ttft_cache == ""


def test_a_sessions_first_turn_is_cold_in_every_trial(ngram_server: LlamaServer) -> None:
    with Client(ngram_server.url, timeout=120) as client:
        runner = Runner(client)
        for _ in range(2):  # the second trial replays the same conversation
            r = runner.run(build_spec("session", {"turns": 2, "tokens": 16, "ctx": 300, "turn_ctx": 24}), "t::s")
            assert isinstance(r, SessionResult) and r.verdict == "passed", r.reason
            first, second = r.per_request
            assert first.cached_tokens == 0 and r.cached_share == 0.0
            # its later turn still reuses its own conversation
            assert second.cached_tokens >= first.prompt_tokens + first.completion_tokens - 16
