"""A production trace replayed open-loop (the ``replay`` case), and how faithfully it was sent.

Every row of the window is built into a prompt of its exact ``input_length`` before the first send
(``prompts/traces.py``: rows whose ``hash_ids`` share leading blocks share that prefix text), then sent at
its own time (the trace's time from the window's first row, over ``speed``) with its output forced to
``output_length``. Within a run every request shares one fresh prefix-cache salt (or, where the server takes
none, one fresh tag at the start of every prompt), so the server's prefix cache serves what the trace's
production cache could, while a later run finds nothing of this one's (prompts/cold.py).

The figures are the ``rate`` case's (``run/rate.py``: latency from each scheduled send, attainment, goodput,
the client's lateness and its verdict rule), plus what a replay adds: per request its row, the trace's
lengths beside the server's counts and the cached tokens the trace's blocks allow beside those the server
reported; per case the trace's reusable share beside the server's cached share, requests not sent, length
mismatches, the client's CPU share and TTFT and decode per input-length bucket, with floors per bucket.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, ClassVar

import numpy as np

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.replay import ReplaySpec, bucket_bound
from pytest_specperf.cases.result_parts import LengthBucket, ReplayRequest
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.endpoint.concurrent import StreamRequest
from pytest_specperf.errors import MeasurementError
from pytest_specperf.prompts import cold, traces
from pytest_specperf.run import lateness, rate, workers
from pytest_specperf.run.context import CaseContext, Until, case_seed
from pytest_specperf.run.floors import JudgeSettings, settle, ttft_from_cache

#: Cached tokens past the trace's reusable ones, per request, that still count as this run's own (one block of a
#: server's cache, a tag's digits): beyond it a request found another run's prompts in the cache.
CACHE_SLACK = traces.BLOCK_TOKENS


def replay_case(context: CaseContext, spec: ReplaySpec, nodeid: str) -> ReplayResult:
    """Build every prompt, send the window open-loop, and gather the rate figures and the replay's own."""
    trace = spec.load()
    rows = spec.rows()
    limit = (context.client.info or context.client.detect()).max_context
    sent_rows = [r for r in rows if limit is None or r.input_length + r.output_length <= limit]
    if not sent_rows:
        raise MeasurementError(f"replay {spec.trace}: every row of the window needs more context than the server's "
                               f"{limit} tokens; replay another window or start the server with a longer context")
    times = spec.schedule()
    at = {r.row: t for r, t in zip(rows, times, strict=True)}
    api = spec.api
    # One salt (or one tag) for the whole run: requests share the prefixes the trace gives them, nothing older.
    tag = cold.head(cold.new_tag()) if context.tags_prompts() else ""
    salt = context.salt()
    seed = case_seed(nodeid)
    built = time.perf_counter()
    prompts = traces.build_trace_prompts(sent_rows, lambda text: context.client.count_tokens(text, api=api),
                                         kind=spec.content, head=tag, salt=seed)
    build_s = time.perf_counter() - built
    reqs = [StreamRequest(prompt=p, max_tokens=r.output_length, api=api, seed=seed + i, temperature=spec.temperature,
                          at_s=at[r.row], salt=salt) for i, (r, p) in enumerate(zip(sent_rows, prompts, strict=True))]
    client = context.client
    retries, client.retries = client.retries, 0  # a refusal is an answer under load: count it, do not retry
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        sent = context.senders.streams(client, reqs)  # with workers, its rows dealt over them by arrival
        outcomes = sent.outcomes
    finally:
        client.retries = retries
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    slo = dict(spec.slo) if spec.slo else None
    reusable = dict(zip((r.row for r in sent_rows), traces.reusable_tokens(sent_rows), strict=True))
    records = [_record(rate.request_record(o, slo, 0, client.kind), r, reusable[r.row])
               for o, r in zip(outcomes, sent_rows, strict=True)]
    figures = rate.summarize(list(records), slo)
    figures["completion_tokens"] = int(np.median([r.output_length for r in sent_rows]))
    # The schedule's span: the window asked (the rows may bunch at its start), else its rows' own, over speed.
    span = (spec.duration_s / spec.speed) if spec.duration_s is not None else times[-1]
    prompt_tokens = [p.prompt_tokens for p in records if p.prompt_tokens is not None]
    res: ReplayResult = context.new_result(
        ReplayResult, spec, int(np.median([r.input_length for r in sent_rows])),
        int(np.median(prompt_tokens)) if prompt_tokens else None, nodeid,
        rps=len(rows) / span if span > 0 else math.nan, arrivals="trace", requests=len(records),
        tokens=figures["completion_tokens"], slo=slo, per_request=records,
        **{k: v for k, v in figures.items() if k != "completion_tokens"},
        trace=spec.trace or "", format=trace.format, timestamp_unit=trace.unit, speed=spec.speed,
        start_s=spec.start_s, window_s=spec.duration_s, skipped=trace.skipped, not_sent=len(rows) - len(sent_rows),
        reusable_share=traces.reusable_share(sent_rows),
        client_cpu_share=(cpu / wall if wall > 0 else None) if sent.workers is None else max(
            w.cpu_share for w in sent.workers),  # with workers, the busiest one's
        prompts_build_s=build_s, origin_s=outcomes[0].origin if outcomes else None)
    res.length_mismatches = sum(1 for p in records if p.status == 200 and (
        p.prompt_tokens != p.input_length or p.output_tokens != p.output_length))
    res.buckets = buckets(records)
    if res.not_sent:
        res.notes.append(f"{res.not_sent} rows of the window were not sent: each needs more than the server's "
                         f"{limit} tokens of context")
    lateness.attach(res, [p.late_s for p in records], lateness.open_loop_bound(slo, span),
                    starved_s=[p.starved_s for p in records])
    if slo and res.client_behind:  # the rate case's rule: blamed only where sending on time could change the verdict
        met = sum(1 for p in records if lateness.met_on_time(p, slo))
        on_time = rate.floor_problems_of(met / len(records), met / res.duration_s if res.duration_s > 0 else 0.0, spec)
        lateness.weigh(res, bool(floor_problems(res, spec)), bool(on_time))
    workers.attach(res, sent, lateness.open_loop_bound(slo, span))
    if not context.client.caps.step_chunks:
        res.step_ms = None  # chunks are not steps here: their spacing says nothing about step time
    return res


def _record(base: Any, row: traces.TraceRow, reusable: int) -> ReplayRequest:
    """The rate case's request record with the trace row's fields beside it."""
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return ReplayRequest(**fields, row=row.row, scheduled_s=base.at_s, input_length=row.input_length,
                         output_length=row.output_length, output_tokens=base.tokens, reusable_tokens=reusable,
                         bucket=traces.bucket_of(row.input_length))


def buckets(records: list[ReplayRequest]) -> dict[str, LengthBucket]:
    """TTFT p50/p90, median decode rate and attainment per input-length bucket (only the buckets that have rows)."""
    out: dict[str, LengthBucket] = {}
    for name, _ in traces.BUCKETS:
        mine = [r for r in records if r.bucket == name]
        if not mine:
            continue
        ok = [r for r in mine if r.status == 200]
        ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
        decode = [r.decode_tps for r in ok if r.decode_tps is not None and not math.isnan(r.decode_tps)]
        b = LengthBucket(requests=len(mine), answered=len(ok))
        if ttft:
            b.ttft_p50_s, b.ttft_p90_s = float(np.percentile(ttft, 50)), float(np.percentile(ttft, 90))
        b.decode_tps = float(np.median(decode)) if decode else None
        if mine[0].met is not None:
            b.attainment = sum(1 for r in mine if r.met) / len(mine)
        out[name] = b
    return out


# -- verdict ------------------------------------------------------------------------------------------


def floor_problems(r: ReplayResult, spec: ReplaySpec) -> list[str]:
    """The floors a replay misses: attainment and goodput (as ``rate``), then TTFT and decode per length bucket."""
    out = rate.floor_problems_of(r.attainment, r.goodput_rps, spec)
    for name, b in r.buckets.items():
        ceiling = bucket_bound(spec.max_ttft_p90_s, name)
        if ceiling is not None and (b.ttft_p90_s is None or b.ttft_p90_s > ceiling):
            got = "none answered" if b.ttft_p90_s is None else f"{b.ttft_p90_s:.3g} s"
            out.append(f"TTFT p90 of the {name} prompts {got} > max_ttft_p90_s {ceiling:g} ({b.requests} requests)")
        floor = bucket_bound(spec.min_decode_tps, name)
        if floor is not None and (b.decode_tps is None or b.decode_tps < floor):
            got = "none answered" if b.decode_tps is None else f"{b.decode_tps:.3g} tok/s"
            out.append(f"decode of the {name} prompts {got} < min_decode_tps {floor:g} ({b.requests} requests)")
    return out


def foreign_cache(r: ReplayResult) -> str:
    """'' unless requests came back with more cached tokens than the trace's own blocks explain (another run's
    prompts in the cache, or a server that ignored the salt): then the TTFT figures measure that cache."""
    hot = [p for p in r.per_request
           if p.cached_tokens is not None and p.cached_tokens > p.reusable_tokens + CACHE_SLACK]
    if not hot:
        return ""
    return (f"ttft inconclusive: {len(hot)} of {len(r.per_request)} requests came back with more cached tokens than "
            f"the trace's shared blocks explain (e.g. row {hot[0].row}: {hot[0].cached_tokens} cached, "
            f"{hot[0].reusable_tokens} reusable); another client sent the same prompts or the salt was dropped: "
            "measure on an endpoint no other client shares")


class Replay:
    """The ``replay`` kind."""

    name: ClassVar[str] = "replay"
    spec_type: ClassVar[type[CaseSpec]] = ReplaySpec

    def context_needed(self, spec: ReplaySpec) -> tuple[int, int]:
        """The shortest row's lengths: a longer row than the server holds is not sent (counted in ``not_sent``)."""
        rows = spec.rows()
        shortest = min(rows, key=lambda r: r.input_length + r.output_length)
        return shortest.input_length, shortest.output_length

    def measure(self, context: CaseContext, spec: ReplaySpec, nodeid: str, until: Until | None = None
                ) -> ReplayResult:
        """``replay_case`` (``until`` does not apply: one open-loop run)."""
        return replay_case(context, spec, nodeid)

    def judge(self, result: ReplayResult, spec: ReplaySpec, settings: JudgeSettings) -> None:
        """Its floors, with the rate case's cause of a miss; TTFT inconclusive when another run's prompts were
        cached (the runner's cold check counts the trace's own sharing, which is the point here, so it is
        replaced by the trace-aware one)."""
        result.ttft_cache = foreign_cache(result) if spec.prefix_cache == "cold" else ""
        problems = floor_problems(result, spec)
        if problems:
            why = rate.why_missed(result)
            problems = [f"{'; '.join(problems)} at {result.achieved_rps:.2f} req/s ({result.requests} requests, "
                        f"the trace asked {result.rps:.3g})" + (f": {why}" if why else "")]
        gated = bool(set(spec.slo or {}) & {"ttft_s", "ttft_content_s"}) or spec.max_ttft_p90_s is not None
        ttft_from_cache(result, gated, settings.inconclusive, problems)
        settle(result, spec, problems, settings.inconclusive)
