"""Sessions on the real llama-server: the second turn reuses the first turn's prefix, in the server's own
accounting (``timings.cache_n``), and its first token comes sooner than a cold prompt's of the same length."""

from __future__ import annotations

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import SessionResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.run.runner import Runner


def test_the_second_turn_reuses_the_first_turns_prefix(ngram_server: LlamaServer) -> None:
    with Client(ngram_server.url, timeout=120) as client:
        runner = Runner(client)
        r = runner.run(build_spec("session", {"turns": 2, "tokens": 16, "ctx": 400, "turn_ctx": 24}), "t::engine_s")
        assert isinstance(r, SessionResult) and r.verdict == "passed", r.reason
        first, second = r.per_request
        # the server's own count: the whole first turn (prompt and answer) came from its cache
        assert second.cached_tokens >= first.prompt_tokens + first.completion_tokens - 16
        assert r.cache_hit is not None and r.cache_hit > 0.8
        # a cold prompt as long as the second turn's (a different text: nothing of it is cached)
        cold = client.stream(runner.prompt("prose", second.prompt_tokens, 4242, api="chat").text, 4, api="chat")
    assert abs((cold.prompt_tokens or 0) - second.prompt_tokens) <= 0.02 * second.prompt_tokens
    assert (cold.cached_tokens or 0) < 0.2 * second.prompt_tokens
    # seen: 0.5 s against 4.5 s for 650 tokens on 2 busy cores; prefill is most of a cold first token
    assert second.ttft_s < 0.5 * cold.ttft_s, (second.ttft_s, cold.ttft_s)
