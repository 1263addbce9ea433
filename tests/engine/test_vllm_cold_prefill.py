"""A cold prefill on a real vLLM with automatic prefix caching (on by default) unless a case asks for reuse, in
vLLM's own accounting (``usage.prompt_tokens_details.cached_tokens`` with --enable-prompt-tokens-details): each
request carries a fresh ``cache_salt``, so a repeated prompt is prefilled whole while its text stays the same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import CapacityResult, SessionResult, SustainedResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.engines.vllm import STARTUP_TIMEOUT_S, VllmServer
from pytest_specperf.run.acceptance import snapshot
from pytest_specperf.run.runner import Runner
from tests.support.gateway import SaltStrippingClient

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(STARTUP_TIMEOUT_S + 300)]
#: The largest KV block vLLM uses (16 on GPUs, 128 on the CPU backend): what a prefix hit may leave uncached.
BLOCK = 128


@pytest.fixture(scope="module")
def vllm_cached(vllm_build: object) -> Iterator[VllmServer]:
    """vLLM as shipped (prefix caching on) reporting cached prompt tokens."""
    with VllmServer(preset="none", extra_args=["--enable-prompt-tokens-details"]) as server:
        yield server


def test_repeats_runs_and_sessions_prefill_cold(vllm_cached: VllmServer) -> None:
    with Client(vllm_cached.url, timeout=300) as client:
        runner = Runner(client)
        runs = [runner.run(build_spec("sustained", {"tokens": 16, "ctx": 256, "repeat": 2}), "t::cold")
                for _ in range(2)]
        warm = runner.run(build_spec("sustained", {"tokens": 16, "ctx": 256, "repeat": 2, "prefix_cache": "warm"}),
                          "t::cold")
        sessions = [runner.run(build_spec("session", {"turns": 2, "tokens": 16, "ctx": 256, "turn_ctx": 24}), "t::s")
                    for _ in range(2)]
    for r in runs:
        assert isinstance(r, SustainedResult) and r.verdict == "passed", r.reason
        assert [s.cached_tokens for s in r.streams] == [0, 0] and r.cached_share == 0.0 and r.ttft_cache == ""
    # the same prompt text every run: the salt, not the text, kept the cache out
    assert [s.text_sha for s in runs[0].streams] == [s.text_sha for s in runs[1].streams]
    # asked for warm: vLLM serves the whole blocks of the prompt but its last token from its cache (blocks of 128
    # on this CPU build: 128 of 256 tokens)
    assert all(0 < (s.cached_tokens or 0) < (s.prompt_tokens or 0) for s in warm.streams), warm.streams
    assert all((s.prompt_tokens or 0) - (s.cached_tokens or 0) <= BLOCK for s in warm.streams), warm.streams
    assert warm.cached_share is not None and warm.cached_share >= 0.5 and warm.ttft_cache == ""
    for s in sessions:
        assert isinstance(s, SessionResult) and s.verdict == "passed", s.reason
        first, second = s.per_request
        assert first.cached_tokens == 0 and s.cached_share == 0.0
        assert second.cached_tokens >= first.prompt_tokens - BLOCK  # the session reuses its own turn



def _capacity(url: str, client_type: type[Client]) -> tuple[CapacityResult, dict[str, float]]:
    """A short capacity search with a TTFT bound every request meets, and how vLLM's own counters moved over it."""
    spec = build_spec("capacity", {"slo": {"ttft_s": 120.0}, "tokens": 8, "ctx": 256, "target": 0.9,
                                   "arrivals": "constant", "start_rps": 2.0, "probe_s": 2.0, "min_requests": 8,
                                   "budget_s": 12.0})
    with client_type(url, timeout=300) as client:
        runner = Runner(client)
        runner.warm_up()  # its one request is no part of the search
        before = snapshot(client.metrics_text() or "")
        r = runner.run(spec, "t::capacity")
        after = snapshot(client.metrics_text() or "")
    assert isinstance(r, CapacityResult) and r.probes, r.reason
    return r, {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}


def test_a_capacity_search_reads_its_cached_tokens_as_vllm_counts_them(vllm_cached: VllmServer) -> None:
    """Cold: every probe's prompt tokens are what vLLM counted, none cached. Through a gateway that drops the salt,
    the same search again is served from vLLM's cache (its own hit counter) and its TTFT bound is inconclusive."""
    cold, moved = _capacity(vllm_cached.url, Client)
    assert sum(p.prompt_tokens or 0 for p in cold.probes) == moved["vllm:prompt_tokens_total"] > 0
    assert all(p.cached_tokens == 0 for p in cold.probes) and moved["vllm:prefix_cache_hits_total"] == 0
    assert (cold.cached_share, cold.ttft_cache, cold.verdict) == (0.0, "", "passed"), cold.reason
    _capacity(vllm_cached.url, SaltStrippingClient)  # the same prompts, no salt: they enter the cache
    hot, moved = _capacity(vllm_cached.url, SaltStrippingClient)
    assert sum(p.cached_tokens or 0 for p in hot.probes) == moved["vllm:prefix_cache_hits_total"] > 0
    assert hot.ttft_cache.startswith(f"at {hot.probes[0].rps:.3g} req/s ttft inconclusive:"), hot.ttft_cache
    assert hot.verdict == "passed" and hot.ttft_cache in hot.warnings  # the default policy: warn
