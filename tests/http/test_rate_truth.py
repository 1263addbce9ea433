"""Open-loop rate and capacity cases against what the batching simulator knows it did."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.result_parts import RateRequest
from pytest_specperf.cases.results import Probe
from pytest_specperf.run.capacity import WARMUP
from pytest_specperf.run.context import case_seed
from pytest_specperf.run.rate import schedule
from pytest_specperf.sim import SimServer, load_profile
from pytest_specperf.sim.batch import Arrival, simulate


@pytest.mark.parametrize("rps", [0.5, 8.0])
def test_arrival_schedules_have_the_asked_rate(rps: float) -> None:
    gaps = np.diff(schedule(rps, 3000, "poisson", seed=7))
    assert gaps.mean() == pytest.approx(1 / rps, rel=0.03)
    # exponential gaps: a Poisson process, not a jittered clock (coefficient of variation 1)
    assert stats.kstest(gaps, "expon", args=(0, 1 / rps)).pvalue > 0.01
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.08)
    # a short run keeps its rate: 50 requests stay within a few per cent of it across seeds
    short = [49 / schedule(rps, 50, "poisson", seed=s)[-1] for s in range(200)]
    assert np.mean(short) == pytest.approx(rps, rel=0.02) and np.std(short) / rps < 0.06
    assert schedule(rps, 50, "poisson", seed=1) == schedule(rps, 50, "poisson", seed=1)
    assert schedule(rps, 50, "poisson", seed=1) != schedule(rps, 50, "poisson", seed=2)
    assert np.diff(schedule(rps, 20, "constant", seed=1)) == pytest.approx([1 / rps] * 19)


def _truth_figures(sim: SimServer, per_request: list[RateRequest],
                   slo: dict[str, float]) -> tuple[float, float, list[float]]:
    """Attainment, goodput and each request's tpot (ms) from the simulator's own records of the same requests."""
    truths = [sim.truth(p.response_id) for p in per_request]
    met, tpots = 0, []
    for t in truths:
        steps = t["steps"]
        tpot_ms = 1000 * (steps[-1]["t_s"] - steps[0]["t_s"]) / (t["completion_tokens"] - steps[0]["tokens"])
        tpots.append(tpot_ms)
        met += tpot_ms <= slo["tpot_ms"] and t["total_s"] <= slo["e2e_s"]
    first = min(t["arrival_monotonic"] for t in truths)
    duration = max(t["arrival_monotonic"] + t["total_s"] for t in truths) - first
    return met / len(truths), met / duration, tpots


def test_rate_case_matches_the_simulators_truth(runner_for: Any) -> None:
    # tpot is the bound that decides here: the server's and the client's tpot of a request agree to the
    # microsecond, while a latency from arrival also holds the client's own lateness (a few ms on a busy host)
    speed = 2.5  # a 10 ms hiccup of a busy host moves a 95-token tpot by well under 2% at this speed
    slo = {"tpot_ms": 12.0 / speed, "e2e_s": 30.0}
    with SimServer("batching", speed=speed, overrides={"jitter": 0.0}) as sim:
        runner = runner_for(sim.url)
        # 50 requests (15 s of arrivals): the per-request check below judges each of them, so a hundred added
        # only time; the attainment may still differ by the same two requests near the bound
        spec = build_spec("rate", {"rps": 1.3 * speed, "requests": 50, "tokens": 96, "ctx": 300, "slo": slo})
        r = runner.run(spec, "rate::truth")
        truth_attainment, truth_goodput, truth_tpot = _truth_figures(sim, r.per_request, slo)
        arrivals = np.array([sim.truth(p.response_id)["arrival_monotonic"] for p in r.per_request])
    assert r.refused == r.failed == 0 and r.completion_tokens == 96
    # a load where some requests meet the slo and some do not, so the comparison says something
    assert 0.1 < truth_attainment < 0.97, truth_attainment
    # each request clear of the bound (by the server's own write times) is judged as the server's truth says;
    # one within 5 % of it may read either way through the wire
    clear = [(p.met, v <= slo["tpot_ms"], p.tpot_ms, v) for p, v in zip(r.per_request, truth_tpot, strict=True)
             if abs(v / slo["tpot_ms"] - 1) > 0.05]
    assert len(clear) >= len(r.per_request) // 2 and all(seen == true for seen, true, *_ in clear), \
        [c for c in clear if c[0] != c[1]]
    assert abs(r.attainment - truth_attainment) <= 2 / 50 + 1e-9  # two requests of 50
    # goodput is attainment over the span: the two points above move it by up to 3% (beside CPU hogs, 2.6% seen),
    # so the span itself is what is compared here
    assert r.goodput_rps / r.attainment == pytest.approx(truth_goodput / truth_attainment, rel=0.02)
    # the server saw the arrivals the schedule asked for (open loop, on time)
    at = np.array([p.at_s for p in r.per_request])
    error = np.abs((arrivals - arrivals[0]) - (at - at[0]))
    assert np.percentile(error, 90) < 0.02 and error.max() < 0.2, error  # a busy host may hold one back
    assert r.sent_rps == pytest.approx((len(at) - 1) / (at[-1] - at[0]), rel=0.02)
    assert r.tpot_p50_ms <= r.tpot_p90_ms <= r.tpot_p99_ms and r.e2e_p50_s <= r.e2e_p90_s


def test_latency_counts_from_the_scheduled_arrival(runner_for: Any) -> None:
    # One slot and twice the rate it can serve: requests queue at the server. An open-loop client
    # keeps sending on schedule, and each request's wait for a slot is part of its ttft.
    speed = 5.0
    with SimServer("batching", speed=speed, overrides={"jitter": 0.0, "max_batch": 1}) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("rate", {"rps": 8.0 * speed, "requests": 24, "tokens": 32, "ctx": 100,
                                   "arrivals": "constant", "slo": {"ttft_s": 1.0}})
        r = runner.run(spec, "rate::queue")
        truths = [sim.truth(p.response_id) for p in r.per_request]
    queued = [t["queue_s"] for t in truths]
    assert queued[-1] > 10 * max(queued[0], 1e-3)  # the last request waited long for its slot
    # Sent on time although earlier responses were still pending: a client that waited for them would be as
    # late as the server's queue (0.64 s for the last request here). Its lateness is the host's wake-up
    # noise: 2 ms on an idle machine, 78 ms seen with two CPU hogs beside the suite.
    assert r.late_p99_s < 0.2 * queued[-1], (r.late_p99_s, queued[-1])
    # Never less than what the server says it took, and from the scheduled arrival: the server's time plus how
    # late the client sent (and the wire). Judged on the middle request: the server stamps a token after writing
    # it, so a stall there beside CPU hogs can put one request's stamp after the client read the token.
    seen = np.array([p.ttft_s for p in r.per_request])
    server = np.array([t["ttft_s"] for t in truths])
    late = np.array([p.late_s for p in r.per_request])
    assert np.median(seen - server) >= -0.002, seen - server
    # The wire (and the client's read) is what is left: small for the middle request. Its tail is the host's
    # wake-up noise (p90 0.15 s seen in CI, three xdist workers on 2 cores), so only the median is judged.
    wire = np.abs(seen - late - server)
    assert np.median(wire) < 0.02, wire
    ttft = [p.ttft_s for p in r.per_request]
    assert ttft[-1] > 5 * ttft[0] and r.ttft_p90_s > 3 * min(ttft)


def test_refused_requests_miss_the_slo_and_are_counted(runner_for: Any) -> None:
    with SimServer("healthy", speed=20, overrides={"faults": "status=429*3"}) as sim:
        runner = runner_for(sim.url)
        runner.warm_up()  # its retries spend the refusals; start the case's requests with them fresh
        sim.reset()
        spec = build_spec("rate", {"rps": 20, "requests": 12, "tokens": 32, "ctx": 100,
                                   "slo": {"e2e_s": 30.0}, "min_attainment": 0.95})
        r = runner.run(spec, "rate::refused")
    assert r.refused == 3 and r.attainment == pytest.approx(9 / 12)
    assert r.verdict == "failed"
    assert "SLO attainment 0.75 < min_attainment 0.95" in r.reason and "3 refused (HTTP 429/503)" in r.reason


def test_failure_names_the_bound_missed_most_and_the_slower_steps(runner_for: Any) -> None:
    # Slow and long enough (decode spans near 1 s) that a busy machine's scheduling noise, tens of ms,
    # is small beside them: at speed 10 and 64 tokens it was the size of the spans.
    speed, tokens = 2.0, 128
    rps, tpot_ms = 3.0 * speed, 12.0 / speed
    # The load is chosen by the profile's own answer for this schedule, far from the floor: about
    # 15% of requests meet the bound where 90% must, while one request alone meets it easily.
    profile = load_profile("batching")
    times = schedule(rps, 40, "poisson", case_seed("rate::cause"))
    answer = simulate(profile, [Arrival(t * speed, 200, tokens, seed=i) for i, t in enumerate(times)])
    alone_answer = simulate(profile, [Arrival(0.0, 200, tokens, seed=0)])[0]
    assert np.mean([_tpot(x) / speed <= tpot_ms for x in answer]) < 0.3 and _tpot(alone_answer) / speed < 0.75 * tpot_ms
    with SimServer("batching", speed=speed, overrides={"jitter": 0.0}) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("rate", {"rps": rps, "requests": 40, "tokens": tokens, "ctx": 200,
                                   "slo": {"tpot_ms": tpot_ms, "ttft_s": 10.0}, "min_attainment": 0.9})
        r = runner.run(spec, "rate::cause")
        truths = [sim.truth(p.response_id) for p in r.per_request]
        alone = [sim.truth(rid) for rid in (r.reference.response_ids or [] if r.reference else [])]
    # The verdict is judged against what the server did in this run (its own write times), not the
    # schedule it meant to keep: on a busy machine its late wake-ups let steps catch up in bursts.
    true_tpot = [_tpot(t) for t in truths]
    clear = [(p.met, v <= tpot_ms, p.tpot_ms, v) for p, v in zip(r.per_request, true_tpot, strict=True)
             if abs(v / tpot_ms - 1) > 0.15]  # requests near the bound may read either way through the wire
    assert all(seen == true for seen, true, *_ in clear), [c for c in clear if c[0] != c[1]]
    true_attainment = np.mean([v <= tpot_ms for v in true_tpot])
    if true_attainment > 0.95:
        assert r.verdict == "passed" and r.reference is None
        return
    assert true_attainment > 0.85 or r.verdict == "failed", (true_attainment, r.attainment)
    if r.verdict == "passed":
        return  # the server's own times put this run at the floor: either verdict is right
    assert "tpot_ms missed most" in r.reason and "ttft_s" not in r.reason.split("missed most")[0]
    # both step times it reports are the server's: per request, decode time over its steps
    assert len(alone) == 2 and r.reference is not None
    assert {st["batch"] for t in alone for st in t["steps"]} == {1}  # the lowest rate: one request at a time
    assert r.step_ms == pytest.approx(_step_ms(truths), rel=0.05, abs=0.05)
    assert r.reference.step_ms == pytest.approx(_step_ms(alone), rel=0.05, abs=0.05)
    # the cause it names is the one the server's steps show: batching keeps acceptance, so tokens per
    # step never fall; the step time rose whenever the server's own steps say so
    assert "accepted tokens/step fell" not in r.reason
    rose = _step_ms(truths) / _step_ms(alone)
    if rose > 1.2:
        assert "step time rose" in r.reason
    elif rose < 1.0:
        assert "step time rose" not in r.reason and "time is lost queueing" in r.reason


def _tpot(rec: dict) -> float:
    """A truth record's decode time per token after the first, in ms (its real write times)."""
    return 1000 * (rec["steps"][-1]["t_s"] - rec["steps"][0]["t_s"]) / (sum(s["tokens"] for s in rec["steps"]) - 1)


def _step_ms(recs: list[dict]) -> float:
    """The median request's decode time over its steps, from the server's write times, in ms."""
    return float(np.median([1000 * (t["steps"][-1]["t_s"] - t["steps"][0]["t_s"]) / (len(t["steps"]) - 1)
                            for t in recs]))


def _profile_capacity(profile: Any, speed: float, slo_ms: float, target: float, tokens: int, ctx: int,
                      probe_s: float, min_requests: int) -> float:
    """The rate (at speed 1) above which the profile's own schedule misses the target: bisection on simulate."""

    def attainment(rate: float) -> float:
        n = max(min_requests, math.ceil(rate * speed * probe_s))
        times = schedule(rate, n, "constant", 0)
        recs = simulate(profile, [Arrival(t, ctx, tokens, seed=i) for i, t in enumerate(times)])[int(WARMUP * n):]
        ok = [1000 * (x["steps"][-1]["t_s"] - x["steps"][0]["t_s"]) / (tokens - 1) <= slo_ms for x in recs]
        return sum(ok) / len(ok)

    lo, hi = 0.5, 20.0
    assert attainment(lo) >= target > attainment(hi)
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if attainment(mid) >= target else (lo, mid)
    return lo


def _probe_truths(sim: SimServer, probes: list[Probe], tokens: int) -> list[list[dict]]:
    """Each probe's counted requests as the simulator recorded them: probes run one after another, so the case's
    requests in arrival order are, probe after probe, ``requests`` each; the warm-up tenth is left out."""
    recs = sorted((r for r in sim.requests() if r["max_tokens"] == tokens), key=lambda r: r["arrival_monotonic"])
    assert len(recs) == sum(pr.requests for pr in probes)
    out, i = [], 0
    for pr in probes:
        n = pr.requests
        out.append([sim.truth(r["id"]) for r in recs[i:i + n][int(WARMUP * n):]])
        i += n
    return out


def _pace(recs: list[dict]) -> float:
    """The median decode step's real time over the time the profile gave it: 1.0 when the server kept its pace."""
    ratios = [(b["t_s"] - a["t_s"]) / b["step_ms"] * 1000 for t in recs
              for a, b in itertools.pairwise(t["steps"]) if b["step_ms"] > 0]
    return float(np.median(ratios))


def test_capacity_lands_on_the_servers_own_answer(runner_for: Any) -> None:
    # The batching twin without speculation: per-token time grows smoothly with the batch, so a
    # tpot bound is crossed well below saturation, where the answer does not hinge on one burst.
    # 3 s probes, started at 3 req/s (at speed 1) near the answer: five probes in about 16 s of arrivals; the
    # profile's own answer for 3 s probes is within 0.5 % of that for 5 s ones (3.93 and 3.91 req/s)
    speed, tokens, ctx, probe_s, slo_ms = 3.0, 64, 200, 3.0, 25.0
    profile = load_profile("batching", {"jitter": 0.0, "speculation": False})
    with SimServer(profile, speed=speed) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("capacity", {"slo": {"tpot_ms": slo_ms / speed}, "target": 0.9, "tokens": tokens, "ctx": ctx,
                                       "arrivals": "constant", "start_rps": 3 * speed, "probe_s": probe_s,
                                       "budget_s": 240, "min_rps": 1.0})
        r = runner.run(spec, "capacity::truth")
        truths = _probe_truths(sim, r.probes, tokens)
    # Every probe's attainment is the share of its requests whose decode, by the server's own write times, met
    # the bound. The client reads each chunk a moment after it was written, which moves a request's tpot by a
    # few per cent on a busy machine, so a request within 5 % of the bound may fall either way.
    bound = slo_ms / speed
    for pr, recs in zip(r.probes, truths, strict=True):
        surely = sum(_tpot(t) <= 0.95 * bound for t in recs) / len(recs)
        maybe = sum(_tpot(t) <= 1.05 * bound for t in recs) / len(recs)
        assert surely - 1e-9 <= pr.attainment <= maybe + 1e-9, (pr.rps, surely, pr.attainment, maybe)
    assert [p.passed for p in r.probes] == [p.attainment >= 0.9 for p in r.probes]
    # the answer is the fastest passing probe, under the slowest failing one by at most the precision
    lo, hi = r.bracket
    assert lo == r.max_rps == max(p.rps for p in r.probes if p.passed)
    assert hi == min(p.rps for p in r.probes if not p.passed) and hi / lo - 1 <= 0.10 + 1e-9
    assert r.verdict == "passed" and "precision" in r.stop
    # Where the server kept its profile's pace, the rate is the profile's own answer. A busy machine can slow the
    # simulator itself (with two CPU hogs beside the suite, 2.6 against 3.9 req/s), and then only the recorded
    # truth above holds.
    # Each probe's own pace: a median over all probes' steps let one slowed probe near the answer through (2.0
    # against 3.9 req/s beside four busy jobs, with the pooled median within 5%).
    pace = max(_pace(recs) for recs in truths)
    if pace <= 1.05:
        truth = _profile_capacity(profile, speed, slo_ms, 0.9, tokens, ctx, probe_s, 32)
        assert r.max_rps / speed == pytest.approx(truth, rel=0.10), (r.max_rps / speed, truth, r.probes)


def test_a_late_send_adds_its_lateness_to_every_latency() -> None:
    # Scheduled at 1.0 s, sent at 1.3 s (the client fell behind): the user waited from 1.0 s on.
    from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
    from pytest_specperf.endpoint.sse import Chunk, Trace
    from pytest_specperf.run.rate import request_record

    chunks = [Chunk(0.2, 1), Chunk(0.3, 4), Chunk(0.4, 5)]
    trace = Trace(chunks=chunks, total_s=0.45, usage={"completion_tokens": 10}, finish_reason="length",
                  response_id="x", count_source="continuous_usage", exact=True)
    rec = request_record(StreamOutcome(StreamRequest(prompt="p", max_tokens=10, at_s=1.0), trace, None, 1.3, 0.0),
                         {"ttft_s": 0.4, "e2e_s": 1.0}, 10, "vllm")
    assert rec.ttft_s == pytest.approx(0.5) and rec.e2e_s == pytest.approx(0.75)
    assert rec.tpot_ms == pytest.approx(1000 * 0.2 / 9) and rec.tokens_per_chunk == pytest.approx(4.5)
    assert rec.met is False  # 0.5 s to the first token although the server took 0.2 s


def test_a_goodput_floor_missed_with_every_request_on_time_blames_the_offered_rate() -> None:
    from pytest_specperf.cases.results import RateResult
    from pytest_specperf.run.rate import rate_problems

    r = RateResult(kind="rate", endpoint="", model="", server="vllm", ctx=100, prompt_tokens=100, rps=2.0,
                   requests=10, slo={"e2e_s": 1.0}, met=10, missed={"e2e_s": 0}, attainment=1.0, achieved_rps=2.0,
                   duration_s=5.5, goodput_rps=10 / 5.5)
    [problem] = rate_problems(r, build_spec("rate", {"rps": 2.0, "requests": 10, "slo": {"e2e_s": 1.0},
                                                     "min_goodput": 2.0}))
    assert problem.startswith("goodput 1.82 req/s < min_goodput 2 at 2.00 req/s (10 requests, asked 2)")
    assert "every request met the slo: goodput is capped by the offered 2 req/s" in problem
    assert "missed most" not in problem
