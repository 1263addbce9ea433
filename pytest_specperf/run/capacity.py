"""The ``capacity`` case: the highest request rate whose SLO attainment stays at or above a target.

Method: bracketing, then bisection on the rate.

- Bracketing: probe ``start_rps``; while every probe passed, double the rate; while every probe
  failed, halve it. Two neighbours, one passing and one failing, bracket the capacity within a
  factor of 2 after log2(capacity / start_rps) probes.
- Bisection: probe the geometric middle of the bracket and keep the half the answer falls in,
  until the top is within ``precision`` of the bottom (2 -> 1.41 -> 1.19 -> 1.09: four probes for
  10%). Rates are bisected on a log scale because the precision asked for is relative.
- Each probe is an open-loop rate run (``ratecase``) whose arrivals last ``probe_s`` seconds, with
  at least ``min_requests`` requests, so that the queue it builds is in its steady state for most
  of the probe; the first tenth of its requests (arriving at an idle server) is sent and measured
  but not counted in its attainment.
- Attainment falls as the rate rises (more load never makes requests faster), which is what makes
  bisection valid; a probe's noise can only move the answer within the final bracket.
- The search stops early when the next probe would not fit in ``budget_s``; the result then says so
  and gives the bracket it had. A first probe that cannot fit is a usage error at validation.
- While no probe has passed, a failing probe whose requests were each answered before the next was sent
  ends the search: the server held one request at a time, so no lower rate can meet the SLO.
- A probe the server refuses entirely (HTTP 429/503) is a failing probe (attainment 0), not an error.

The result: ``max_rps`` (the highest passing probe, 0 when none passed, and the case then fails "no
rate met the SLO"), ``bracket`` [highest passing, lowest failing] (either may be None), every probe's
figures, and why the search stopped.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import ClassVar

from pytest_specperf.cases import lengths
from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.open_loop import SLO_KEYS, CapacitySpec
from pytest_specperf.cases.result_parts import LowestRate, RateRequest
from pytest_specperf.cases.results import CapacityResult, Probe
from pytest_specperf.run import cached_share, categories, lateness, workers
from pytest_specperf.run.context import CaseContext, Until, case_seed
from pytest_specperf.run.floors import JudgeSettings, settle, ttft_from_cache
from pytest_specperf.run.rate import (
    category_figures,
    drawn_lengths,
    lowest_rate,
    mark_drawn,
    moved,
    request_record,
    run_requests,
    summarize,
    within,
)

#: Share of each probe's first requests not counted (they meet an idle server).
WARMUP = 0.10
#: Lowest rate bracketing goes down to before it gives up (requests per second).
FLOOR_RPS = 1e-3


def probe(context: CaseContext, spec: CapacitySpec, rps: float, seed: int, k: int) -> Probe:
    """One open-loop run at ``rps``: its attainment over the counted requests, and its figures."""
    n = spec.probe_requests(rps)
    recs = categories.records(spec)
    drawn = categories.draw(recs, n, seed + 1009 * k) if recs else None
    # drawn lengths: the same for every probe of the case (seeded by its node id's seed), so probes differ only in rate
    toks, ctxs = drawn_lengths(spec, n, f"capacity:{seed}")
    sent = run_requests(context, rps=rps, n=n, tokens=toks, ctx=ctxs, content=spec.content,
                        api=spec.api, temperature=spec.temperature, arrivals=spec.arrivals,
                        seed=seed + 1009 * k, variant=seed + 100_003 * (k + 1), drawn=drawn,
                        burstiness=spec.burstiness or 1.0)
    outcomes = sent.outcomes
    slo = dict(spec.slo)
    records = [request_record(o, slo, t, context.client.kind) for o, t in zip(outcomes, toks, strict=True)]
    mark_drawn(spec, records, toks, ctxs)
    cats = category_figures(records, outcomes, drawn, context.client.caps.step_chunks) if drawn else None
    fig = summarize(records, slo)  # a probe the server refused entirely is measured: it met nothing
    counted, attainment, passed = probe_verdict(records, spec.target)
    missed = {key: sum(1 for r in counted if r.status != 200 or not within(r, key, bound))
              for key, bound in slo.items()}
    on_time = sum(1 for r in counted if lateness.met_on_time(r, slo)) / len(counted)
    # the percentiles of ttft, tpot, e2e and ttft_content, and the client's lateness, by their names
    percentiles = {k: v for k, v in fig.items() if k.endswith(_PERCENTILE_ENDS)}
    p = Probe(rps=rps, requests=n, counted=len(counted), attainment=attainment, passed=passed,
              alone=served_alone(records), goodput_rps=fig["goodput_rps"], achieved_rps=fig["achieved_rps"],
              output_tps=fig["output_tps"], missed=missed, refused=fig["refused"], failed=fig["failed"],
              **{**percentiles, **lateness.probe_fields([r.late_s for r in records], slo, n / rps,
                                                        could_change=attainment < spec.target <= on_time)},
              decode_tps=fig["decode_tps"], categories=cats)
    # chunk spacing is a step time only where the server sends one chunk per engine step
    if context.client.caps.step_chunks:
        p.tokens_per_chunk, p.step_ms = fig["tokens_per_chunk"], fig["step_ms"]
    cached_share.probe_fields(p, records, context.cold_allowance(spec.api), context.prefix_cache)
    workers.attach(p, sent, lateness.open_loop_bound(slo, n / rps))  # a worker over capacity: this probe's doubt
    return p


_PERCENTILE_ENDS = ("_p50_s", "_p90_s", "_p99_s", "_p50_ms", "_p90_ms", "_p99_ms")


def probe_verdict(records: list[RateRequest], target: float) -> tuple[list[RateRequest], float, bool]:
    """(counted requests, their attainment, passed): a probe passes at an attainment equal to the target."""
    counted = counted_requests(records)
    attainment = sum(1 for r in counted if r.met) / len(counted)
    return counted, attainment, attainment >= target


def counted_requests(records: list[RateRequest]) -> list[RateRequest]:
    """A probe's requests after its warm-up tenth (by scheduled arrival)."""
    ordered = sorted(records, key=lambda r: r.at_s)
    return ordered[int(WARMUP * len(ordered)):]


def served_alone(records: list[RateRequest]) -> bool:
    """True when every request was answered before the next one was sent: the server held one at a time, so
    no lower rate can make a request faster."""
    ordered = sorted(records, key=lambda r: r.sent_s)
    return all(r.status == 200 for r in ordered) and all(
        a.end_s is not None and a.end_s <= b.sent_s for a, b in itertools.pairwise(ordered))


def _next_rate(rate: float, lo: float | None, hi: float | None, precision: float) -> tuple[float, str]:
    """(next probe's rate, "") or (rate, why the search ends): halve until a pass, double until a failure, then
    bisect on a log scale until the bracket is within ``precision``."""
    if lo is None:
        rate /= 2
        if rate < FLOOR_RPS:
            return rate, f"no rate down to {2 * rate:.3g} req/s met the target"
        return rate, ""
    if hi is None:
        return rate * 2, ""
    if hi / lo - 1 <= precision:
        return rate, f"bracket within precision {precision:g}"
    return math.sqrt(lo * hi), ""


def search(context: CaseContext, spec: CapacitySpec, nodeid: str) -> CapacityResult:
    """Bracket, then bisect, within the budget; see the module docstring."""
    seed = case_seed(nodeid)
    began = time.monotonic()
    lo: float | None = None
    hi: float | None = None
    probes: list[Probe] = []
    rate, stop = spec.start_rps, ""
    while True:
        elapsed = time.monotonic() - began
        expected = spec.probe_seconds(rate)
        if elapsed + expected > spec.budget_s:
            stop = (f"budget: a probe at {rate:.3g} req/s (~{expected:.0f} s) would not fit in "
                    f"budget_s={spec.budget_s:g}")
            break
        p = probe(context, spec, rate, seed, len(probes))
        probes.append(p)
        if p.passed:
            lo = rate if lo is None else max(lo, rate)
        else:
            hi = rate if hi is None else min(hi, rate)
        if lo is None and p.alone:
            stop = (f"at {rate:.3g} req/s each request was answered before the next was sent, and still "
                    "missed: no lower rate can meet the SLO")
            break
        rate, stop = _next_rate(rate, lo, hi, spec.precision)
        if stop:
            break
    best = next((p for p in probes if p.rps == lo), None)
    r: CapacityResult = context.new_result(
        CapacityResult, spec, spec.ctx, None, nodeid, slo=dict(spec.slo), target=spec.target, tokens=spec.tokens,
        arrivals=spec.arrivals, max_rps=lo if lo is not None else 0.0, bracket=[lo, hi], probes=probes, stop=stop,
        search_s=time.monotonic() - began, goodput_rps=best.goodput_rps if best else None,
        attainment=best.attainment if best else None, min_rps=spec.min_rps,
        decode_tps=best.decode_tps if best else None)
    r.drawn = lengths.described({"tokens": spec.tokens_dist, "ctx": spec.ctx_dist})
    if r.drawn:  # the typical request's lengths stand for the case
        r.tokens, r.ctx = lengths.typical(spec.tokens_dist, spec.tokens), lengths.typical(spec.ctx_dist, spec.ctx)
    if spec.prompts is not None:  # figures per category at the capacity found (its highest passing probe)
        r.prompts, r.categories = spec.prompts, best.categories if best else None
        r.content = categories.content_label(spec)
    lateness.attach_probes(r)
    r.workers = probes[-1].workers if probes else None  # who sent: the last probe's shares (each probe keeps its own)
    if hi is None and lo is not None:
        r.notes.append(f"no probe failed: the capacity is at least {lo:.3g} req/s ({stop})")
    if capacity_problems(r, spec) and context.client.caps.step_chunks:
        r.reference = lowest_rate(context, spec, seed)
    return r


def capacity_problems(r: CapacityResult, spec: CapacitySpec) -> list[str]:
    """No rate met the SLO, or the min_rps floor missed: with the bound missed most at the lowest failing rate
    and its cause."""
    lo, hi = r.bracket if r.bracket else (None, None)
    if r.probes and not any(p.passed for p in r.probes):
        # without a passing probe there is no capacity to show, whatever min_rps says
        text = (f"no rate met the SLO (lowest probed {min(p.rps for p in r.probes):.3g} req/s; attainment >= "
                f"{spec.target:g} of slo {r.slo}, {len(r.probes)} probes; {r.stop})")
    elif spec.min_rps is None or (r.max_rps is not None and r.max_rps >= spec.min_rps):
        return []
    else:
        text = (f"capacity {r.max_rps or 0:.3g} req/s < min_rps {spec.min_rps:g} (attainment >= {spec.target:g} "
                f"of slo {r.slo}; bracket {_rate(lo)} .. {_rate(hi)}, {len(r.probes)} probes)")
    failing = min((p for p in r.probes if not p.passed), key=lambda p: p.rps, default=None)
    if failing is not None:
        missed = failing.missed
        key = max(missed, key=lambda k: missed[k])
        unit = SLO_KEYS[key]
        p90 = getattr(failing, f"{key.rsplit('_', 1)[0]}_p90_{unit}", None)  # the percentile of the bound missed
        p90_text = "none answered" if p90 is None or math.isnan(p90) else f"p90 {p90:.3g} {unit}"
        text += (f"; at {failing.rps:.3g} req/s {key} missed most ({missed[key]} of "
                 f"{failing.counted}, {p90_text}, bound {r.slo[key] if r.slo else '?'})")
        if failing.refused:
            text += f", {failing.refused} refused (HTTP 429/503)"
        lowest = min(r.probes, key=lambda p: p.rps)
        answered = r.reference if r.reference is not None and r.reference.requests else None  # {}: none was
        ref = answered or (LowestRate(tokens_per_chunk=lowest.tokens_per_chunk, step_ms=lowest.step_ms)
                           if lowest is not failing else None)
        cause = moved(ref, failing.tokens_per_chunk or 0.0, failing.step_ms)
        if cause:
            text += f"; {cause}"
    return [text]


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


class Capacity:
    """The ``capacity`` kind."""

    name: ClassVar[str] = "capacity"
    spec_type: ClassVar[type[CaseSpec]] = CapacitySpec

    def context_needed(self, spec: CapacitySpec) -> tuple[int, int]:
        """ctx prompt tokens (the generated length is checked on each answer)."""
        return categories.ctx_needed(spec), 0

    def measure(self, context: CaseContext, spec: CapacitySpec, nodeid: str, until: Until | None = None
                ) -> CapacityResult:
        """``search`` (``until`` does not apply: the search decides its own probes)."""
        return search(context, spec, nodeid)

    def judge(self, result: CapacityResult, spec: CapacitySpec, settings: JudgeSettings) -> None:
        """No rate met the SLO, or the capacity under ``min_rps``: with the cause. Probes whose requests meant to be
        cold came back cached met a TTFT bound on the cache: that capacity is inconclusive, by the policy."""
        problems = capacity_problems(result, spec)
        ttft_from_cache(result, bool(set(spec.slo) & {"ttft_s", "ttft_content_s"}), settings.inconclusive, problems)
        settle(result, spec, problems, settings.inconclusive)
