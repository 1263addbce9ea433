"""A capacity search says when the prefix cache met its TTFT bound: each probe carries its requests' prompt and
cached tokens, which sum to the server's own record, and a search whose cold requests came back cached is
inconclusive on a TTFT bound (by ``--specperf-inconclusive``) instead of passing on the cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import CapacityResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer
from tests.support.gateway import SaltStrippingClient

# vLLM with --enable-prompt-tokens-details (it caches prefixes by default)
CACHING = {"cache_report": True, "prefill_tokens_per_s": 2000.0, "jitter": 0.0}
# bounds every request meets: the search doubles its rate until the budget, three short probes
CASE = {"tokens": 8, "ctx": 300, "target": 0.9, "arrivals": "constant", "start_rps": 20.0, "probe_s": 0.4,
        "min_requests": 8, "budget_s": 1.6}



@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=10, in_process=True, overrides=CACHING) as s:
        yield s


def _search(sim: SimServer, client_type: type[Client], slo: dict[str, float], nodeid: str,
            inconclusive: str = "warn") -> tuple[CapacityResult, list[dict[str, Any]]]:
    """The search, and the server's records of the generations it sent."""
    with client_type(sim.url, timeout=30) as client:
        runner = Runner(client, inconclusive=inconclusive)
        runner.warm_up()  # its one short request is no part of the search
        before = len(sim.requests())
        r = runner.run(build_spec("capacity", {**CASE, "slo": slo}), nodeid)
    assert isinstance(r, CapacityResult)
    return r, sim.requests()[before:]


def _server_sums(records: list[dict[str, Any]]) -> tuple[int, int]:
    return sum(t["prompt_tokens"] for t in records), sum(t["cached_tokens"] for t in records)


def test_cold_probes_say_nothing_was_cached(sim: SimServer) -> None:
    r, truth = _search(sim, Client, {"ttft_s": 30.0}, "t::capacity_cold")
    assert len(r.probes) >= 2 and all(p.passed for p in r.probes)
    assert (sum(p.prompt_tokens or 0 for p in r.probes), sum(p.cached_tokens or 0 for p in r.probes)) \
        == _server_sums(truth) == (300 * len(truth), 0)
    assert r.cached_share == 0.0 and r.ttft_cache == "" and r.verdict == "passed"


@pytest.mark.parametrize(("slo", "policy", "verdict", "where"), [
    ({"ttft_s": 30.0}, "warn", "passed", "warnings"),
    ({"ttft_s": 30.0}, "fail", "failed", "reason"),
    ({"tpot_ms": 1000.0}, "fail", "passed", "notes"),  # no TTFT bound: only said
])
def test_a_search_served_by_the_cache_is_inconclusive_on_ttft(sim: SimServer, slo: dict[str, float], policy: str,
                                                              verdict: str, where: str) -> None:
    nodeid = f"t::capacity_hot_{policy}_{len(slo)}_{next(iter(slo))}"
    _search(sim, SaltStrippingClient, slo, nodeid)  # the same prompts again, with no salt: the cache serves them
    r, truth = _search(sim, SaltStrippingClient, slo, nodeid, policy)
    prompt, cached = _server_sums(truth)
    # The server's own count: the second search's prompts came back cached, those of every probe the first search
    # also ran (its first above all). Not more than half of them: the searches stop on a time budget, and on a busy
    # host the second one ran a probe further than the first, whose prompts were new (6912 of 16801 cached).
    # (288 of each 300-token prompt: the cache holds whole 16-token blocks)
    assert cached > 0 and (r.probes[0].cached_tokens or 0) > 0.9 * (r.probes[0].prompt_tokens or 1)
    assert sum(p.cached_tokens or 0 for p in r.probes) == cached
    assert r.cached_share == pytest.approx(cached / prompt)
    assert r.ttft_cache.startswith(f"at {r.probes[0].rps:.3g} req/s ttft inconclusive:"), r.ttft_cache
    assert r.verdict == verdict
    shown = {"warnings": r.warnings, "notes": r.notes, "reason": [r.reason]}[where]
    assert any(r.ttft_cache in x for x in shown), (where, shown)
