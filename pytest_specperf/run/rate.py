"""Open-loop load: requests arriving at a rate, each judged on its latency SLO (the ``rate`` case).

Arrivals follow a schedule fixed before the first request goes out (a seeded Poisson process, or
evenly spaced with ``arrivals="constant"``); every request is sent at its scheduled time whatever
became of the earlier ones, and its latencies are counted from that scheduled time. A client that
falls behind (event-loop lag, a slow send) therefore adds its lag to the latency instead of
quietly sending later and hiding the queue (coordinated omission).

Per request: ``ttft_s`` (scheduled arrival -> first token), ``tpot_ms`` (vLLM's: (t_last_token -
t_first_token) / (output tokens - 1)), ``e2e_s`` (scheduled arrival -> end of the response),
``decode_tps`` (tokens after the first chunk / (t_last - t_first)) and ``tokens_per_chunk``. It meets
the SLO when it meets every bound given. A request the server refuses (HTTP 429 or 503) or that fails
misses the SLO (and every bound of it).

Per case, over one span (``duration_s``: first scheduled arrival -> last response): achieved rate
(answered requests per second), goodput (requests meeting the SLO per second, so never above the
achieved rate) and output tok/s; ``sent_rps`` (requests over the span of their actual sends);
p50/p90/p99 of each latency over the answered requests; attainment (share of all requests meeting
the SLO). A case the server refused entirely has attainment 0 and fails its floors (without a floor
it is an error: nothing was measured). When a floor fails and the server sends one chunk per
engine step, the case measures the lowest rate (one request at a time) and says whether accepted
tokens per step or step time moved between it and the loaded run.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import numpy as np

from pytest_specperf.cases import lengths
from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.open_loop import SLO_KEYS, RateSpec
from pytest_specperf.cases.replay import ReplaySpec
from pytest_specperf.cases.result_parts import CategoryFigures, LowestRate, RateRequest
from pytest_specperf.cases.results import RateResult
from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
from pytest_specperf.errors import MeasurementError
from pytest_specperf.prompts.files import PromptRecord
from pytest_specperf.run import categories, lateness, workers
from pytest_specperf.run.context import CaseContext, Until, case_seed
from pytest_specperf.run.floors import JudgeSettings, settle, ttft_from_cache
from pytest_specperf.run.stream_figures import check_length
from pytest_specperf.scale.senders import Sent

_REFUSED = re.compile(r"HTTP (429|503)\b")
PERCENTILES = (50, 90, 99)
#: Requests measured one at a time for "the lowest rate" when a failure needs a cause.
REFERENCE_REQUESTS = 2


def schedule(rps: float, n: int, arrivals: str, seed: int, burstiness: float = 1.0) -> list[float]:
    """Scheduled arrival times (s after the origin) of ``n`` requests at ``rps``; the first at 0.

    Poisson arrivals are drawn conditioned on their count: ``n`` points thrown uniformly over
    ``(n + 1) / rps`` seconds are the arrival times of a Poisson process of rate ``rps`` that has
    ``n`` arrivals there, so the gaps keep their exponential spread (bursts and lulls) while the
    run's average rate stays within a few per cent of ``rps`` instead of wandering by
    ``1 / sqrt(n)`` (+-14% over 50 requests) as free exponential gaps do.
    """
    if arrivals == "constant":
        return [i / rps for i in range(n)]
    if arrivals == "gamma":
        # vLLM's burstiness: gaps gamma-distributed with shape ``burstiness`` and mean 1 / rps, so their coefficient
        # of variation is 1 / sqrt(burstiness): 1 is Poisson, 0.25 bursts with a CV of 2, larger is steadier.
        gaps = np.random.default_rng(seed).gamma(burstiness, 1.0 / (rps * burstiness), max(0, n - 1))
        return [0.0, *np.cumsum(gaps).tolist()][:n]
    points = np.sort(np.random.default_rng(seed).uniform(0.0, (n + 1) / rps, n))
    out: list[float] = (points - points[0]).tolist()
    return out


def refused_status(error: MeasurementError | None) -> int | None:
    """429 or 503 when the error is the server refusing load, else None."""
    m = _REFUSED.search(str(error)) if error is not None else None
    return int(m.group(1)) if m else None


def request_record(o: StreamOutcome, slo: dict[str, float] | None, tokens: int, server: str) -> RateRequest:
    """One request's latencies from its scheduled arrival, and whether it met the slo."""
    rec = RateRequest(at_s=o.request.at_s, sent_s=o.sent_s, late_s=o.late_s, starved_s=o.starved_s)
    if o.trace is None:
        rec.status, rec.error, rec.met = refused_status(o.error), str(o.error), False
        return rec
    t = o.trace
    check_length(tokens, t.completion_tokens, t.finish_reason, server)
    first, last = t.chunks[0], t.chunks[-1]
    after_first = t.completion_tokens - first.tokens
    decode_s = last.t - first.t
    # vLLM's TPOT, (e2e - ttft) / (output tokens - 1), both ends at token chunks: a first chunk carrying several
    # tokens (speculation) lowers it against time per token after the first chunk, which decode_tps keeps.
    tpot_ms = 1000.0 * decode_s / (t.completion_tokens - 1) if t.completion_tokens > 1 else math.nan
    rec.status, rec.response_id, rec.tokens = 200, t.response_id, t.completion_tokens
    rec.ttft_s, rec.e2e_s, rec.tpot_ms = o.late_s + first.t, o.late_s + t.total_s, tpot_ms
    rec.decode_tps = after_first / decode_s if decode_s > 0 else math.nan
    rec.tokens_per_chunk = after_first / (len(t.chunks) - 1) if len(t.chunks) > 1 else float(first.tokens)
    rec.step_ms = 1000.0 * decode_s / (len(t.chunks) - 1) if len(t.chunks) > 1 else math.nan
    rec.end_s = o.sent_s + t.total_s
    # The first answer token, after any reasoning; without a reasoning phase the first token is the answer's.
    rec.ttft_content_s = o.late_s + (t.ttft_content_s if t.ttft_content_s is not None else first.t)
    rec.reasoning_tokens, rec.content_tokens = t.reasoning_tokens, t.content_tokens
    rec.prompt_tokens, rec.cached_tokens = t.prompt_tokens, t.cached_tokens
    rec.met = meets(rec, slo) if slo else None
    return rec


def meets(rec: RateRequest, slo: dict[str, float]) -> bool:
    """True when an answered request is within every bound the slo gives."""
    return rec.status == 200 and all(within(rec, key, bound) for key, bound in slo.items())


def within(rec: RateRequest, key: str, bound: float) -> bool:
    """Whether the request's figure ``key`` (an slo bound's name) is measured and within ``bound``."""
    v = getattr(rec, key, None)
    return v is not None and not math.isnan(v) and v <= bound


def run_requests(context: CaseContext, *, rps: float, n: int, tokens: int | list[int], ctx: int | list[int],
                 content: str, api: str, temperature: float, arrivals: str, seed: int, variant: int,
                 drawn: list[PromptRecord] | None = None, burstiness: float = 1.0) -> Sent:
    """Send ``n`` streams open-loop at ``rps`` (prompts built first, off the clock, or ``drawn`` from a prompt
    file), through the case's senders (its arrivals dealt over the workers); 429/503 are not retried.
    ``tokens`` and ``ctx``: every request's, or one per request."""
    times = schedule(rps, n, arrivals, seed, burstiness)
    toks = tokens if isinstance(tokens, list) else [tokens] * n
    ctxs = ctx if isinstance(ctx, list) else [ctx] * n
    reqs = []
    if drawn is not None:
        for i, (at, rec) in enumerate(zip(times, drawn, strict=True)):
            reqs.append(StreamRequest(prompt=rec.text, max_tokens=toks[i], api=api, seed=seed + i,
                                      temperature=temperature, at_s=at, messages=categories.messages(rec, api)))
    prompts = context.prompts_of(content, ctxs, [variant + i for i in range(n)], api) if drawn is None else []
    for i, (at, prompt) in enumerate(zip(times, prompts, strict=False)):
        reqs.append(StreamRequest(prompt=prompt.text, max_tokens=toks[i], api=api, seed=seed + i,
                                  temperature=temperature, at_s=at))
    client = context.client
    retries, client.retries = client.retries, 0  # a refusal is an answer under load: count it, do not retry
    try:
        return context.senders.streams(client, reqs)
    finally:
        client.retries = retries


def summarize(records: list[RateRequest], slo: dict[str, float] | None) -> dict[str, Any]:
    """Case figures from per-request records (see the module docstring), by the names a ``RateResult`` gives
    them: the keyword arguments of one (and the figures of a capacity probe)."""
    ok = [r for r in records if r.status == 200]
    if not ok and not all(r.status in (429, 503) for r in records):
        raise MeasurementError(_nothing_answered(records))  # refusals are an answer; other errors are not
    sent = [r.sent_s for r in records]
    # One span for every rate: the first scheduled arrival (the origin, 0) to the last response (or send).
    duration = max(r.end_s if r.end_s is not None else r.sent_s for r in records)
    out: dict[str, Any] = {
        "sent_rps": (len(sent) - 1) / (max(sent) - min(sent)) if max(sent) > min(sent) else math.nan,
        "achieved_rps": len(ok) / duration if duration > 0 else math.nan,
        "duration_s": duration,
        "output_tps": sum(r.tokens or 0 for r in ok) / duration if duration > 0 else math.nan,
        "refused": sum(1 for r in records if r.status in (429, 503)),
        "failed": sum(1 for r in records if r.status not in (200, 429, 503)),
        **lateness.figures(r.late_s for r in records),
        "completion_tokens": ok[0].tokens if ok else 0,
    }
    for key, unit in (("ttft", "s"), ("tpot", "ms"), ("e2e", "s"), ("ttft_content", "s")):
        values = [getattr(r, f"{key}_{unit}") for r in ok]
        out[f"{key}_{unit}"] = _pct(values, 50)
        for q in PERCENTILES:
            out[f"{key}_p{q}_{unit}"] = _pct(values, q)
    out["decode_tps"] = _pct([r.decode_tps for r in ok], 50)
    # Reasoning and answer tokens per request (medians), where any answered request reasoned.
    reasoned = any(r.reasoning_tokens for r in ok)
    out["reasoning_tokens"] = round(float(np.median([r.reasoning_tokens or 0 for r in ok]))) if reasoned else None
    out["content_tokens"] = round(float(np.median([r.content_tokens or 0 for r in ok]))) if reasoned else None
    out["tokens_per_chunk"] = _pct([r.tokens_per_chunk for r in ok], 50)
    out["step_ms"] = _pct([r.step_ms for r in ok], 50)
    if slo:
        met = sum(1 for r in records if r.met)
        out.update(met=met, attainment=met / len(records), goodput_rps=met / duration if duration > 0 else math.nan,
                   missed={k: sum(1 for r in records if r.status != 200 or not within(r, k, b))
                           for k, b in slo.items()})
    return out


def _pct(values: list[float | None], q: float) -> float:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.percentile(finite, q)) if finite else math.nan


def _nothing_answered(records: list[RateRequest]) -> str:
    refused = sum(1 for r in records if r.status in (429, 503))
    if refused == len(records):
        return (f"the server refused all {refused} requests (HTTP 429/503): it takes no load at this rate; "
                "lower rps or check the server's admission limits")
    first = next(r.error for r in records if r.status not in (429, 503))
    return f"no request of the rate case was answered; the first error: {first}"


def rate_case(context: CaseContext, spec: RateSpec, nodeid: str) -> RateResult:
    """Measure a rate case: the open-loop run, its figures, and the lowest rate when a floor fails."""
    seed = case_seed(nodeid)
    recs = categories.records(spec)
    drawn = categories.draw(recs, spec.requests, seed) if recs else None
    toks, ctxs = drawn_lengths(spec, spec.requests, nodeid)
    sent = run_requests(context, rps=spec.rps, n=spec.requests, tokens=toks, ctx=ctxs,
                        content=spec.content, api=spec.api, temperature=spec.temperature, arrivals=spec.arrivals,
                        seed=seed, variant=seed, drawn=drawn, burstiness=spec.burstiness or 1.0)
    outcomes = sent.outcomes
    slo = dict(spec.slo) if spec.slo else None
    kind = context.client.kind
    records = [request_record(o, slo, t, kind) for o, t in zip(outcomes, toks, strict=True)]
    mark_drawn(spec, records, toks, ctxs)
    cats = category_figures(records, outcomes, drawn, context.client.caps.step_chunks) if drawn else None
    figures = summarize(records, slo)
    prompt_tokens = next((o.trace.prompt_tokens for o in outcomes if o.trace is not None), None)
    r: RateResult = context.new_result(RateResult, spec, spec.ctx, prompt_tokens, nodeid, rps=spec.rps,
                                       arrivals=spec.arrivals, requests=spec.requests, tokens=spec.tokens, slo=slo,
                                       per_request=records, **figures)
    if not any(p.status == 200 for p in records) and not floor_problems(r, spec):
        raise MeasurementError(_nothing_answered(records))  # no floor fails on it: nothing was measured
    if cats is not None:
        r.prompts, r.categories, r.content = spec.prompts, cats, categories.content_label(spec)
        counted = [p.prompt_tokens for p in records if p.prompt_tokens is not None]
        if counted:
            r.ctx = r.prompt_tokens = int(np.median(counted))
    r.drawn = lengths.described({"tokens": spec.tokens_dist, "ctx": spec.ctx_dist})
    if r.drawn:  # the median request's lengths stand for the case
        r.tokens = r.completion_tokens = int(np.median(toks))
        r.ctx = int(np.median(ctxs))
        counted = [p.prompt_tokens for p in records if p.prompt_tokens is not None]
        r.prompt_tokens = int(np.median(counted)) if counted else None
    bound = lateness.open_loop_bound(slo, spec.requests / spec.rps)
    lateness.attach(r, [p.late_s for p in records], bound, starved_s=[p.starved_s for p in records])
    if slo and r.client_behind:  # blamed only where sending on time could change the verdict
        met = sum(1 for p in records if lateness.met_on_time(p, slo))
        on_time = floor_problems_of(met / len(records), met / r.duration_s if r.duration_s > 0 else 0.0, spec)
        lateness.weigh(r, bool(floor_problems(r, spec)), bool(on_time))
    workers.attach(r, sent, bound)
    if not context.client.caps.step_chunks:
        r.step_ms = None  # chunks are not steps here: their spacing says nothing about step time
    if floor_problems(r, spec) and context.client.caps.step_chunks:
        r.reference = lowest_rate(context, spec, seed)
    return r


def category_figures(records: list[RateRequest], outcomes: list[StreamOutcome], drawn: list[PromptRecord],
                     step_chunks: bool) -> dict[str, CategoryFigures]:
    """Per-category figures over a rate run's answered requests (``categories.figures``), with each category's
    SLO attainment over all its requests; each request's record gets its category, prompt id and prompt tokens."""
    samples = []
    for rec, o, prompt in zip(records, outcomes, drawn, strict=True):
        rec.category, rec.prompt_id = prompt.category, prompt.id
        if o.trace is not None:
            rec.prompt_tokens = o.trace.prompt_tokens
            decode = rec.decode_tps if rec.decode_tps is not None else math.nan  # set on every answered request
            ttft = rec.ttft_s if rec.ttft_s is not None else math.nan
            samples.append(categories.Sample(prompt.category, prompt.id, decode, ttft, None, o.trace.prompt_tokens,
                                             o.trace))
    out = categories.figures(samples, step_chunks)
    for cat in dict.fromkeys(p.category for p in drawn):
        mine = [r for r in records if r.category == cat]
        f = out.setdefault(cat, CategoryFigures(n=0, n_prompts=0))
        f.requests = len(mine)
        if mine and mine[0].met is not None:
            f.attainment = sum(1 for r in mine if r.met) / len(mine)
    return out


def drawn_lengths(spec: Any, n: int, nodeid: str) -> tuple[list[int], list[int]]:
    """Each of ``n`` requests' output and prompt lengths: the case's, or drawn for the node id (cases/lengths.py)."""
    return (lengths.per_request(spec.tokens_dist, spec.tokens, n, nodeid),
            lengths.per_request(spec.ctx_dist, spec.ctx, n, nodeid))


def mark_drawn(spec: Any, records: list[RateRequest], toks: list[int], ctxs: list[int]) -> None:
    """Each record's drawn lengths, where the case draws them (its JSON keeps what each request asked for)."""
    if spec.tokens_dist is None and spec.ctx_dist is None:
        return
    for rec, t, c in zip(records, toks, ctxs, strict=True):
        rec.drawn_tokens, rec.drawn_ctx = t, None if spec.prompts is not None else c


def lowest_rate(context: CaseContext, spec: Any, seed: int) -> LowestRate:
    """Tokens per step and step time with one request at a time: what load is measured against."""
    recs = []
    file_recs = categories.records(spec)
    for i in range(REFERENCE_REQUESTS):
        # at the case's typical lengths (the median of a drawn length), not its longest
        tokens, ctx = (lengths.typical(spec.tokens_dist, spec.tokens), lengths.typical(spec.ctx_dist, spec.ctx))
        outcomes = run_requests(context, rps=1.0, n=1, tokens=tokens, ctx=ctx, content=spec.content,
                                api=spec.api, temperature=spec.temperature, arrivals="constant", seed=seed + 7919 + i,
                                variant=seed + 7919 + i,
                                drawn=categories.draw(file_recs, 1, seed + 7919 + i) if file_recs else None)
        recs.append(request_record(outcomes.outcomes[0], None, tokens, context.client.kind))
    ok = [r for r in recs if r.status == 200]
    if not ok:
        return LowestRate()  # none answered: nothing to measure load against
    return LowestRate(tokens_per_chunk=_pct([r.tokens_per_chunk for r in ok], 50),
                      step_ms=_pct([r.step_ms for r in ok], 50), tpot_ms=_pct([r.tpot_ms for r in ok], 50),
                      requests=len(ok), response_ids=[r.response_id for r in ok])


# -- verdict ------------------------------------------------------------------------------------------


def floor_problems(r: RateResult, spec: RateSpec) -> list[str]:
    """The floors a rate result misses, as short clauses (no cause yet)."""
    return floor_problems_of(r.attainment, r.goodput_rps, spec)


def floor_problems_of(attainment: float | None, goodput: float | None, spec: RateSpec | ReplaySpec) -> list[str]:
    """``floor_problems`` over an attainment and a goodput (of ``summarize``, or had every request been on time); a
    replay's floors are the same two."""
    out = []
    if spec.min_attainment is not None and attainment is not None and attainment < spec.min_attainment:
        out.append(f"SLO attainment {attainment:.2f} < min_attainment {spec.min_attainment:g}")
    if spec.min_goodput is not None and goodput is not None and goodput < spec.min_goodput:
        out.append(f"goodput {goodput:.2f} req/s < min_goodput {spec.min_goodput:g}")
    return out


def rate_problems(r: RateResult, spec: RateSpec) -> list[str]:
    """Every failed floor in one line: at what load, the bound missed most, refusals, and the cause."""
    floors = floor_problems(r, spec)
    if not floors:
        return []
    where = f"at {r.achieved_rps:.2f} req/s ({r.requests} requests, asked {r.rps:g})"
    return [f"{'; '.join(floors)} {where}: {why_missed(r)}"]


def why_missed(r: RateResult) -> str:
    """'tpot_ms missed most (40 of 64, p90 81 ms > 50); 3 refused (HTTP 429/503); vs the lowest rate ...'."""
    parts = []
    if r.slo and r.missed and max(r.missed.values()) > 0:
        key = max(r.missed, key=lambda k: r.missed[k])
        unit = SLO_KEYS[key]
        p90 = getattr(r, f"{key.rsplit('_', 1)[0]}_p90_{unit}")
        p90_text = "none answered" if math.isnan(p90) else f"p90 {p90:.3g} {unit}"
        parts.append(f"{key} missed most ({r.missed[key]} of {r.requests}, {p90_text}, bound {r.slo[key]:g})")
    elif r.slo:
        parts.append(f"every request met the slo: goodput is capped by the offered {r.rps:.3g} req/s over "
                     f"{r.duration_s:.3g} s")
    if r.refused:
        parts.append(f"{r.refused} refused (HTTP 429/503)")
    if r.failed:
        parts.append(f"{r.failed} failed")
    parts.append(moved(r.reference, r.tokens_per_chunk, r.step_ms))
    return "; ".join(p for p in parts if p)


def moved(reference: LowestRate | None, tokens_per_step: float, step_ms: float | None) -> str:
    """Which of accepted tokens per step and step time moved against the lowest rate (10% or more)."""
    # the lowest rate's figures (``lowest_rate``): none where none of its requests was answered
    if reference is None or step_ms is None or not reference.step_ms or reference.tokens_per_chunk is None:
        return ""
    a0, b0 = reference.tokens_per_chunk, reference.step_ms
    changes = []
    if tokens_per_step < 0.9 * a0:
        changes.append(f"accepted tokens/step fell {a0:.2f} -> {tokens_per_step:.2f}")
    if step_ms > 1.1 * b0:
        changes.append(f"step time rose {b0:.1f} -> {step_ms:.1f} ms")
    if not changes:
        return (f"vs the lowest rate neither moved (tokens/step {a0:.2f} -> {tokens_per_step:.2f}, step "
                f"{b0:.1f} -> {step_ms:.1f} ms): the time is lost queueing")
    return "vs the lowest rate " + " and ".join(changes)


class Rate:
    """The ``rate`` kind."""

    name: ClassVar[str] = "rate"
    spec_type: ClassVar[type[CaseSpec]] = RateSpec

    def context_needed(self, spec: RateSpec) -> tuple[int, int]:
        """ctx prompt tokens (the generated length is checked on each answer)."""
        return categories.ctx_needed(spec), 0

    def measure(self, context: CaseContext, spec: RateSpec, nodeid: str, until: Until | None = None) -> RateResult:
        """``rate_case`` (``until`` does not apply: one open-loop run)."""
        return rate_case(context, spec, nodeid)

    def judge(self, result: RateResult, spec: RateSpec, settings: JudgeSettings) -> None:
        """Its attainment and goodput floors, with the cause of a miss."""
        problems = rate_problems(result, spec)
        ttft_from_cache(result, bool(set(spec.slo or {}) & {"ttft_s", "ttft_content_s"}), settings.inconclusive,
                        problems)
        settle(result, spec, problems, settings.inconclusive)
