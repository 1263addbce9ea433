"""Open-loop verdicts against the simulator's truth: the field's definitions, refusals, and capacity searches
that found nothing or were refused."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.result_parts import RateRequest
from pytest_specperf.cases.results import Probe
from pytest_specperf.errors import MeasurementError
from pytest_specperf.sim import SimServer
from pytest_specperf.sim.faults import HEADER


def _truths(sim: SimServer, per_request: list[RateRequest]) -> list[dict[str, Any]]:
    return [sim.truth(p.response_id) for p in per_request]


def test_goodput_never_exceeds_the_achieved_rate_over_the_same_span(runner_for: Any) -> None:
    # A light constant load: each response ends before the next request is due, so every request meets
    # the SLO, and a goodput over the case's span must equal (never exceed) the rate answered over it.
    speed = 10.0
    with SimServer("batching", speed=speed, overrides={"jitter": 0.0}) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("rate", {"rps": 2.0, "requests": 10, "tokens": 32, "ctx": 100, "arrivals": "constant",
                                   "slo": {"e2e_s": 100.0}})
        r = runner.run(spec, "rate::span")
        truths = _truths(sim, r.per_request)
    assert r.attainment == 1.0 and r.refused == r.failed == 0
    # the span starts at the first scheduled arrival: the server's first arrival less that send's lateness
    first = min(t["arrival_monotonic"] for t in truths) - r.per_request[0].late_s
    span = max(t["arrival_monotonic"] + t["total_s"] for t in truths) - first
    assert truths[-1]["total_s"] < 1 / spec.rps  # the case this is about: the last response ends within a gap
    assert r.achieved_rps == pytest.approx(len(truths) / span, rel=0.03)
    assert r.goodput_rps <= r.achieved_rps and r.goodput_rps == pytest.approx(r.met / span, rel=0.03)
    assert r.sent_rps == pytest.approx(spec.rps, rel=0.05)  # the client kept the schedule


def test_tpot_is_vllms_and_its_percentiles_take_the_right_ranks(runner_for: Any) -> None:
    # Speculation sends several tokens per chunk; the batch varies with Poisson arrivals, so requests'
    # tpot spread and a percentile read at the wrong rank (p90 as p0.9) lands far from the truth's.
    speed = 4.0  # steps of several ms: a busy host's hiccup of a few ms moves one request's tpot, not the ranks
    with SimServer("batching", speed=speed) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("rate", {"rps": 3 * speed, "requests": 48, "tokens": 64, "ctx": 200,
                                   "slo": {"e2e_s": 100.0}})
        r = runner.run(spec, "rate::tpot")
        truths = _truths(sim, r.per_request)
    # vLLM's (e2e - ttft) / (output tokens - 1), from the server's own step records
    true_tpot = [1000 * (t["steps"][-1]["t_s"] - t["steps"][0]["t_s"]) / (t["completion_tokens"] - 1) for t in truths]
    assert max(max(st["tokens"] for st in t["steps"]) for t in truths) > 1  # multi-token chunks
    ratios = [p.tpot_ms / want for p, want in zip(r.per_request, true_tpot, strict=True)]
    assert float(np.median(ratios)) == pytest.approx(1.0, abs=0.05), ratios
    assert np.percentile(true_tpot, 90) > 1.2 * np.percentile(true_tpot, 0.9)  # the ranks differ
    # the case's percentiles are those ranks of its requests (whose values the truth checked above: a
    # starved client may bunch some chunks, so single requests are not held to the server's figure)
    mine = [p.tpot_ms for p in r.per_request]
    for q in (50, 90, 99):
        assert getattr(r, f"tpot_p{q}_ms") == pytest.approx(float(np.percentile(mine, q)), rel=1e-9), q
    assert r.tpot_p90_ms > 1.1 * float(np.percentile(mine, 0.9))


def test_vllm_tpot_with_a_multi_token_first_chunk() -> None:
    # The first chunk carries 3 tokens (speculation's first step): vLLM divides by output tokens - 1,
    # not by the tokens after the first chunk, so the two figures are kept apart and named.
    from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
    from pytest_specperf.endpoint.sse import Chunk, Trace
    from pytest_specperf.run.rate import request_record

    trace = Trace(chunks=[Chunk(0.1, 3), Chunk(0.2, 4), Chunk(0.3, 3)], total_s=0.3, usage={"completion_tokens": 10},
                  finish_reason="length", response_id="x", count_source="continuous_usage", exact=True)
    rec = request_record(StreamOutcome(StreamRequest(prompt="p", max_tokens=10, at_s=0.0), trace, None, 0.0, 0.0),
                         {"tpot_ms": 25.0}, 10, "vllm")
    assert rec.tpot_ms == pytest.approx(1000 * 0.2 / 9)  # (e2e - ttft) / (10 - 1) = 22.2 ms: meets 25
    assert rec.decode_tps == pytest.approx(7 / 0.2)  # tokens after the first chunk over their time
    assert rec.met is True


def _refusing(runner: Any) -> Any:
    """The runner warmed up, then every request it sends refused by the simulator (HTTP 429)."""
    runner.warm_up()
    runner.client.http.headers[HEADER] = "status=429*1000000"
    return runner


def test_refusals_are_missed_and_a_refused_rate_case_fails_its_floor(runner_for: Any) -> None:
    with SimServer("healthy", speed=20, overrides={"faults": "status=429*3"}) as sim:
        runner = runner_for(sim.url)
        runner.warm_up()
        sim.reset()
        spec = build_spec("rate", {"rps": 20, "requests": 12, "tokens": 32, "ctx": 100,
                                   "slo": {"e2e_s": 30.0, "ttft_s": 30.0}})
        r = runner.run(spec, "rate::refused3")
        answered = len(_truths(sim, [p for p in r.per_request if p.status == 200]))
    # every bound counts each refusal as a miss: nothing the server refused met anything
    assert r.refused == 3 and answered == 9 and r.missed == {"e2e_s": 3, "ttft_s": 3}
    with SimServer("healthy", speed=20) as sim:
        runner = _refusing(runner_for(sim.url))
        spec = build_spec("rate", {"rps": 20, "requests": 10, "tokens": 32, "ctx": 100, "slo": {"e2e_s": 30.0},
                                   "min_attainment": 0.9})
        r = runner.run(spec, "rate::refused_all")
        served = [t for t in sim.requests() if t["stream"]]  # the warm-up's request is not streamed
    assert served == []  # the server's own account: it answered none of the case's
    # a server that refuses everything fails the floor; it is not an error that hides the refusal
    assert r.refused == 10 and r.attainment == 0.0 and r.goodput_rps == 0.0 and r.missed == {"e2e_s": 10}
    assert r.verdict == "failed" and "SLO attainment 0.00 < min_attainment 0.9" in r.reason
    assert "10 refused (HTTP 429/503)" in r.reason and "(10 of 10, none answered, bound 30)" in r.reason
    with pytest.raises(MeasurementError, match="refused all 10 requests"), SimServer("healthy", speed=20) as sim:
        # without a floor there is nothing to judge and nothing was measured: an error, as before
        _refusing(runner_for(sim.url)).run(build_spec("rate", {"rps": 20, "requests": 10, "tokens": 32, "ctx": 100}),
                                           "x")


def test_capacity_with_no_passing_rate_fails_and_says_the_lowest_probed(runner_for: Any) -> None:
    speed = 20.0
    with SimServer("batching", speed=speed) as sim:
        runner = runner_for(sim.url)
        # e2e, not tpot: a client held up beside busy neighbours reads a whole stream at once, and its tpot is then 0
        bound = 0.001
        spec = build_spec("capacity", {"slo": {"e2e_s": bound}, "tokens": 32, "ctx": 100, "start_rps": speed,
                                       "probe_s": 0.5, "min_requests": 8, "budget_s": 60})
        r = runner.run(spec, "capacity::impossible")
        served = sim.requests()
    lowest = min(p.rps for p in r.probes)
    assert r.verdict == "failed" and r.max_rps == 0.0 and r.bracket[0] is None
    assert r.reason.startswith(f"no rate met the SLO (lowest probed {lowest:.3g} req/s")
    # halving stopped where the server held one request at a time: no lower rate can help
    assert r.probes[-1].alone and "no lower rate can meet the SLO" in r.stop
    assert all(p.attainment == 0.0 and p.missed["e2e_s"] == p.counted for p in r.probes)
    # the server's own records: no request it served came near the bound (its whole time, some steps)
    assert min(t["total_s"] for t in served) > 3 * bound


def test_capacity_probes_the_server_refuses_fail_instead_of_erroring(runner_for: Any) -> None:
    with SimServer("healthy", speed=20) as sim:
        runner = _refusing(runner_for(sim.url))
        spec = build_spec("capacity", {"slo": {"e2e_s": 30.0}, "tokens": 32, "ctx": 100, "start_rps": 40,
                                       "probe_s": 1.0, "min_requests": 8, "budget_s": 10})
        r = runner.run(spec, "capacity::refused")
    assert len(r.probes) >= 2 and r.verdict == "failed" and r.reason.startswith("no rate met the SLO")
    for p in r.probes:
        assert p.refused == p.requests and p.attainment == 0.0 and not p.passed
        assert p.missed == {"e2e_s": p.counted}  # a refusal misses the SLO
    assert "budget" in r.stop and "refused (HTTP 429/503)" in r.reason


def _replay(probes: list[Probe]) -> tuple[float | None, float | None, int]:
    """Replay a search: once a pass and a failure bracket the answer, each probe must be the bracket's geometric
    middle, the bracket being the highest passing and the lowest failing rate so far. (lo, hi, bisection probes)."""
    lo = hi = None
    bisected = 0
    for p in probes:
        if lo is not None and hi is not None:
            assert p.rps == pytest.approx(math.sqrt(lo * hi), rel=1e-9), (lo, hi, probes)
            bisected += 1
        if p.passed:
            lo = p.rps if lo is None else max(lo, p.rps)
        else:
            hi = p.rps if hi is None else min(hi, p.rps)
    return lo, hi, bisected


def test_capacity_bisects_on_a_log_scale_between_the_closest_neighbours(runner_for: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The search's decisions alone: probes answer from a known capacity (7.3 req/s), so the sequence is exact.
    from pytest_specperf.run import capacity

    def probe(runner: Any, spec: Any, rps: float, seed: int, k: int) -> Probe:
        ok = rps <= 7.3
        return Probe(rps=rps, requests=8, counted=8, attainment=1.0 if ok else 0.5, passed=ok, alone=False,
                     goodput_rps=rps, decode_tps=100.0, missed={"e2e_s": 0 if ok else 4},
                     late_p50_s=0.0, late_p99_s=0.0, late_bound_s=1.0, client_behind="")  # sent on time

    monkeypatch.setattr(capacity, "probe", probe)
    with SimServer("healthy", speed=20) as sim:
        spec = build_spec("capacity", {"slo": {"e2e_s": 5.0}, "start_rps": 1.0, "precision": 0.05})
        r = capacity.search(runner_for(sim.url).context, spec, "capacity::decisions")
    lo, hi, bisected = _replay(r.probes)
    assert [p.rps for p in r.probes[:4]] == [1.0, 2.0, 4.0, 8.0]  # doubling until a failure
    # bisection on a log scale: 8/4 -> 1.41 -> 1.19 -> 1.09 -> 1.04, four probes for 5%
    assert bisected == 4 and r.bracket == [lo, hi] == [r.max_rps, hi] and lo <= 7.3 < hi and hi / lo <= 1.05
    assert "precision" in r.stop


def test_a_capacity_search_on_the_simulator_bisects_between_the_closest_neighbours(runner_for: Any) -> None:
    speed = 10.0
    with SimServer("batching", speed=speed, overrides={"speculation": False}) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("capacity", {"slo": {"tpot_ms": 19 / speed}, "target": 0.9, "tokens": 48, "ctx": 100,
                                       "arrivals": "constant", "start_rps": speed, "probe_s": 0.5,
                                       "min_requests": 12, "precision": 0.2, "budget_s": 90})
        r = runner.run(spec, "capacity::bisect")
    lo, hi, _ = _replay(r.probes)
    assert r.bracket == [lo, hi] and r.max_rps == (lo or 0.0)
    assert [p.passed for p in r.probes] == [p.attainment >= 0.9 for p in r.probes]


def test_a_ramp_so_long_the_users_never_decode_together_is_an_error(runner_for: Any) -> None:
    with SimServer("batching", speed=20) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("sustained", {"concurrency": 4, "ramp_s": 2.0, "tokens": 32, "ctx": 100,
                                        "min_total_tps": 50})
        with pytest.raises(MeasurementError, match="could not measure 4 users at once") as info:
            runner.run(spec, "load::ramp")
        starts = sorted((t["arrival_monotonic"] + t["ttft_s"], t["arrival_monotonic"] + t["total_s"])
                        for t in sim.requests())[-4:]
    # the server's records agree: the last user's first token came after the first user's last
    assert starts[-1][0] > min(end for _, end in starts)
    assert "min_total_tps 50 cannot be judged" in str(info.value) and "lower it" in str(info.value)
