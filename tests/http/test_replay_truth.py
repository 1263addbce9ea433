"""The replay case against the simulator's truth: the shipped excerpts sent at their own times, each request's
lengths exact as the server counted them, its arrival where the schedule put it (the server's own stamp, not
the client's), and the cached tokens the trace's shared blocks imply."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.prompts.traces import BLOCK_TOKENS
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer

#: The arrival error the issue allows (s): the server's stamp against the client's send.
ARRIVAL_S = 0.005


@pytest.fixture(scope="module")
def cache_sim() -> Iterator[SimServer]:
    """A fast simulator that reports cached prompt tokens (vLLM's --enable-prompt-tokens-details)."""
    with SimServer("healthy", speed=50, overrides={"cache_report": True}) as sim:
        yield sim


def _replay(sim: SimServer, nodeid: str, **kw: object) -> ReplayResult:
    client = Client(sim.url, timeout=60)
    try:
        client.detect()
        result = Runner(client).run(build_spec("replay", kw), nodeid)
    finally:
        client.close()
    assert isinstance(result, ReplayResult)
    return result


def _arrival_errors(sim: SimServer, r: ReplayResult) -> tuple[np.ndarray, np.ndarray]:
    """Per request: the server's arrival stamp minus the schedule, and minus the client's own send."""
    assert r.origin_s is not None
    sched, sent = [], []
    for p in r.per_request:
        truth = sim.truth(p.response_id)
        sched.append(truth["received_monotonic"] - (r.origin_s + p.scheduled_s))
        sent.append(truth["received_monotonic"] - (r.origin_s + p.sent_s))
    return np.array(sched), np.array(sent)


def test_mooncake_lengths_prefixes_and_arrivals(cache_sim: SimServer) -> None:
    r = _replay(cache_sim, "replay::mooncake", trace="builtin:mooncake-conversation", speed=10, duration_s=10)
    assert r.requests == 38 and r.not_sent == 0 and r.verdict == "passed"
    # every request's lengths as the server counted them are the trace row's
    for p in r.per_request:
        truth = cache_sim.truth(p.response_id)
        assert (truth["prompt_tokens"], truth["completion_tokens"]) == (p.input_length, p.output_length), p.row
    assert r.length_mismatches == 0
    # equal leading hash_ids became equal prefix text: the server's cache served what the trace implies,
    # within one block per request
    for p in r.per_request:
        assert abs(cache_sim.truth(p.response_id)["cached_tokens"] - p.reusable_tokens) <= BLOCK_TOKENS, p.row
    assert r.reusable_share is not None and r.reusable_share > 0.02
    assert r.cached_share == pytest.approx(r.reusable_share, abs=0.01)
    # the server's arrival stamp is the request's real arrival, though its loop was busy with 38 long prompts
    _stamp_is_true(cache_sim, r)
    assert r.prompts_build_s is not None and r.client_cpu_share is not None


def test_each_run_gets_a_fresh_salt(cache_sim: SimServer) -> None:
    # The same window twice: the second run finds nothing of the first's in the cache (a fresh salt per run),
    # only its own shared blocks, so its cached tokens are the trace's theory again.
    kw = {"trace": "builtin:mooncake-conversation", "speed": 20, "duration_s": 3}
    first = _replay(cache_sim, "replay::salt", **kw)
    second = _replay(cache_sim, "replay::salt", **kw)
    for p in second.per_request:
        assert abs(cache_sim.truth(p.response_id)["cached_tokens"] - p.reusable_tokens) <= BLOCK_TOKENS, p.row
    assert second.cached_share == pytest.approx(first.cached_share, abs=0.01)
    assert second.ttft_cache == ""


@pytest.mark.parametrize(("speed", "window_s", "rows"), [(1, 10, 13), (10, 40, 89)])
def test_azure_arrivals_against_the_servers_stamp(cache_sim: SimServer, speed: float, window_s: float | None,
                                                  rows: int) -> None:
    # No hash_ids: each row a prompt of its own, of its exact length; 10 s of trace at speed 1, 40 s at 10.
    r = _replay(cache_sim, f"replay::azure{speed}", trace="builtin:azure-conv-2023", speed=speed,
                duration_s=window_s)
    assert r.requests == rows and r.length_mismatches == 0
    for p in r.per_request:
        assert cache_sim.truth(p.response_id)["prompt_tokens"] == p.input_length
    _stamp_is_true(cache_sim, r)


def _stamp_is_true(sim: SimServer, r: ReplayResult) -> None:
    """The server's arrival stamps follow the client's sends: never before one, the median request within
    ARRIVAL_S of it (the client's ``sent_s`` is when it began to connect, so a busy client's own wait
    between connecting and writing shows in the tail, which is why the median is judged)."""
    vs_schedule, vs_sent = _arrival_errors(sim, r)
    assert float(vs_sent.min()) >= -0.001
    assert float(np.median(vs_sent)) <= ARRIVAL_S
    assert float(np.median(vs_schedule)) <= float(np.median([p.late_s for p in r.per_request])) + ARRIVAL_S
