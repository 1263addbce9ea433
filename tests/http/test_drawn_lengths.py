"""Lengths drawn from a distribution, against the simulator's truth: every request's prompt and output tokens as
the server counted them are the ones drawn for it, the draws span the distribution, and the same node id sends the
same lengths again (reruns, A/B arms and history runs get the same requests). Gamma arrivals on a capacity search
are judged by the server's own arrival stamps."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import CapacityResult, RateResult, SustainedResult
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=20) as s:
        yield s


def _truth(sim: SimServer, response_id: str | None) -> tuple[int, int]:
    assert response_id is not None
    t = sim.truth(response_id)
    return int(t["prompt_tokens"]), int(t["completion_tokens"])


def test_a_rate_cases_requests_send_their_drawn_lengths(sim: SimServer, runner_for: object) -> None:
    runner: Runner = runner_for(sim.url)  # type: ignore[operator]
    kw = {"rps": 8, "requests": 24, "tokens": "uniform(20, 60)", "ctx": "normal(300, 80, min=100, max=500)"}
    r = runner.run(build_spec("rate", kw), "drawn::rate")
    assert isinstance(r, RateResult) and r.verdict == "passed" and r.drawn == {"tokens": kw["tokens"], "ctx": kw["ctx"]}
    sent = [_truth(sim, p.response_id) for p in r.per_request]
    assert sent == [(p.drawn_ctx, p.drawn_tokens) for p in r.per_request]  # each as drawn, as the server counted
    ctxs, toks = [c for c, _ in sent], [t for _, t in sent]
    assert min(ctxs) >= 100 and max(ctxs) <= 500 and len(set(ctxs)) >= 18  # a spread, not one length
    assert min(toks) >= 20 and max(toks) <= 60 and len(set(toks)) >= 12
    assert r.ctx == int(np.median(ctxs)) and r.tokens == int(np.median(toks))
    # the same node id sends the same lengths in the same order; another node id others
    again = runner.run(build_spec("rate", kw), "drawn::rate")
    assert isinstance(again, RateResult)
    assert [_truth(sim, p.response_id) for p in again.per_request] == sent
    other = runner.run(build_spec("rate", kw), "drawn::other")
    assert isinstance(other, RateResult)
    assert [_truth(sim, p.response_id) for p in other.per_request] != sent


def test_a_load_cases_streams_send_their_drawn_lengths(sim: SimServer, runner_for: object) -> None:
    runner: Runner = runner_for(sim.url)  # type: ignore[operator]
    kw = {"concurrency": 4, "requests": 12, "tokens": "mix(0.5 * uniform(30, 40), 0.5 * uniform(80, 90))",
          "ctx": "lognormal(200, 0.5, min=50, max=600)"}
    r = runner.run(build_spec("sustained", kw), "drawn::load")
    assert isinstance(r, SustainedResult) and r.verdict != "error"
    streams = r.streams + r.warmup_drain_streams
    assert len(streams) == 12
    sent = sorted(_truth(sim, s.response_id) for s in streams)
    assert sent == sorted((s.drawn_ctx, s.drawn_tokens) for s in streams)
    toks = [t for _, t in sent]
    assert all(30 <= t <= 40 or 80 <= t <= 90 for t in toks) and {t < 60 for t in toks} == {True, False}
    assert all(50 <= c <= 600 for c, _ in sent) and len({c for c, _ in sent}) >= 9


def test_a_capacity_search_probes_with_gamma_bursts(sim: SimServer, runner_for: object) -> None:
    # The server's arrival stamps of a probe: gamma gaps of burstiness 0.25 spread far more (CV 2) than Poisson's (1).
    runner: Runner = runner_for(sim.url)  # type: ignore[operator]
    cvs = {}
    for arrivals, extra in (("gamma", {"burstiness": 0.25}), ("poisson", {})):
        sim.reset(truth=True)
        spec = build_spec("capacity", {"slo": {"ttft_s": 30}, "arrivals": arrivals, "start_rps": 16, "probe_s": 2.5,
                                       "min_requests": 40, "budget_s": 8, "tokens": 8, "ctx": 64,
                                       "precision": 0.9, **extra})
        r = runner.run(spec, "drawn::capacity")
        assert isinstance(r, CapacityResult) and r.probes
        probe = [t for t in sim.requests() if t["prompt_tokens"] == 64]  # not the warm-up's 32 tokens
        stamps = sorted(t["received_monotonic"] for t in probe)[:r.probes[0].requests]
        gaps = np.diff(stamps)
        cvs[arrivals] = float(gaps.std() / gaps.mean())
    assert cvs["gamma"] > 1.5 > 1.25 > cvs["poisson"], cvs
