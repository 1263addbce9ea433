"""What a trace takes from the server's own per-request accounting: vLLM's per-step counts only when they
place every decode step, and llama.cpp's cached prompt tokens from ``timings.cache_n`` alone."""

from __future__ import annotations

from typing import Any

from pytest_specperf.endpoint.sse import Chunk, Trace
from pytest_specperf.run.stream_figures import server_step_tokens


def _trace(tokens: int, *, usage: dict[str, Any] | None = None, timings: dict[str, Any] | None = None,
           per_step_accepted: list[int] | None = None) -> Trace:
    extras = {} if per_step_accepted is None else {
        "metrics": {"speculative_decoding": {"per_step_accepted": per_step_accepted}}}
    return Trace(chunks=[Chunk(0.1, 1), Chunk(0.2, tokens - 1)], total_s=0.3,
                 usage={"completion_tokens": tokens, **(usage or {})}, finish_reason="length", response_id="r",
                 count_source="continuous_usage", exact=True, timings=timings, extras=extras)


def test_per_step_counts_are_used_only_when_they_place_every_decode_token() -> None:
    # 1 prefill token, then steps of 4, 3 and 1 tokens (3, 2 and 0 drafts accepted)
    assert server_step_tokens(_trace(9, per_step_accepted=[3, 2, 0])) == [4, 3, 1]
    # vLLM lists only steps that drafted: a list short of the decode tokens cannot place the steps
    assert server_step_tokens(_trace(12, per_step_accepted=[3, 2, 0])) is None
    assert server_step_tokens(_trace(9)) is None


def test_llama_cpp_cached_tokens_come_from_its_timings() -> None:
    assert _trace(4, timings={"cache_n": 120, "prompt_n": 8}).cached_tokens == 120
    assert _trace(4, usage={"prompt_tokens_details": {"cached_tokens": 64}}).cached_tokens == 64
    assert _trace(4, timings={"prompt_n": 8}).cached_tokens is None
