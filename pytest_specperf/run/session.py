"""The ``session`` case: multi-turn conversations, each turn sent with the conversation so far.

``users`` sessions run at once (``endpoint.concurrent.run_sessions``); each turn waits for its whole
answer, then ``think_s``, then sends every earlier message (the model's own answers included) plus
a new user message: the agentic pattern when users > 1. Chat sends the messages; completions sends
their text joined, so both grow a shared prefix a prefix cache can reuse. Per turn the result gives
TTFT, decode, prompt tokens and the cached prompt tokens the server reports
(``usage.prompt_tokens_details.cached_tokens``, llama.cpp ``timings.cache_n``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.prompt_cases import prompt_set
from pytest_specperf.cases.result_parts import SessionRequest, TurnFigures
from pytest_specperf.cases.results import SessionResult, StreamResult
from pytest_specperf.cases.session import SessionSpec
from pytest_specperf.endpoint.concurrent import StreamOutcome
from pytest_specperf.endpoint.conversation import Conversation
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.prompts import cold
from pytest_specperf.run import acceptance, drift, lateness, stream_figures, workers
from pytest_specperf.run.context import CaseContext, Until, case_seed
from pytest_specperf.run.floors import TTFT_CEILINGS, JudgeSettings, settle, ttft_from_cache


def user_turns(context: CaseContext | None, spec: SessionSpec, seed: int) -> list[list[str]]:
    """Each session's user messages: generated text of ``ctx`` then ``turn_ctx`` tokens, or a prompt file's."""
    if spec.prompts is not None:
        turns = _from_file(spec)
        if context is not None and context.tags_prompts():  # each session opens with its own tag; later turns reuse it
            turns = [[cold.head(cold.new_tag()) + own[0], *own[1:]] for own in turns]
        return turns
    assert context is not None, "built prompts need the case's context"
    # The first turn is cold (salted or tagged, unless prefix_cache="warm"); later turns extend its conversation.
    firsts = context.prompts(spec.content, spec.ctx, [seed + u for u in range(spec.users)], spec.api)
    laters: list[str] = []
    if spec.turns > 1:
        # Distinct follow-ups per session and turn, so no two sessions share more than the case's framing.
        variants = [seed + 1000 + u * spec.turns + t for u in range(spec.users) for t in range(spec.turns - 1)]
        # Counted as plain text: a later message joins a conversation, its template is not its own.
        laters = [p.text for p in context.built_many(spec.content, spec.turn_ctx, variants, "completions")]
    per = spec.turns - 1
    return [[firsts[u].text, *laters[u * per:(u + 1) * per]] for u in range(spec.users)]


def _from_file(spec: SessionSpec) -> list[list[str]]:
    """User messages from a prompt file: record u % n for session u, its own later turns first, then later
    records' first turns (a file of single prompts still makes conversations)."""
    found = prompt_set(spec)
    assert found is not None
    records = found.records
    if not records:
        raise ConfigError(f"session(): prompts file {spec.prompts!r} has no prompts; give a file with some")
    def firsts(i: int) -> list[str]:
        rec = records[i % len(records)]
        return list(rec.user_turns) or [rec.text]

    out = []
    for u in range(spec.users):
        own, k = firsts(u), 1
        while len(own) < spec.turns:
            own.append(firsts(u + k)[0])
            k += 1
        out.append(own[:spec.turns])
    return out


def session(context: CaseContext, spec: SessionSpec, nodeid: str = "") -> SessionResult:
    """``users`` conversations of ``turns`` turns at once; per-turn figures, cache-hit share, drift, acceptance."""
    seed = case_seed(nodeid)
    conversations = [Conversation(msgs, seed + 100 * u, spec.turns, spec.api, spec.tokens, spec.temperature,
                                  context.salt()) for u, msgs in enumerate(user_turns(context, spec, seed))]
    before = context.scrape_metrics()
    sent = context.senders.sessions(context.client, conversations, float(spec.think_s))
    outcomes = sent.sessions
    after = context.scrape_metrics()
    for per_user in outcomes:
        for o in per_user:
            if o.error is not None:
                raise o.error
    rows: list[SessionRequest] = []
    streams, found, drifts = [], [], []
    for u, per_user in enumerate(outcomes):
        for turn, o in enumerate(per_user):
            assert o.trace is not None
            trace = o.trace
            stream_figures.check_length(spec.tokens, trace.completion_tokens, trace.finish_reason,
                                        context.client.kind)
            s, d = stream_figures.stream_result(trace, coalesce_s=context.coalesce_s())
            s.sent_s = o.sent_s
            streams.append(s)
            found.append(trace)
            if d is not None:
                drifts.append(d)
            rows.append(_row(u, turn, s, o))
    r = _result(context, spec, nodeid, rows, streams, found)
    bound = lateness.load_bound(s.total_s for s in streams)
    lateness.attach(r, [o.late_s for per_user in outcomes for o in per_user], bound)
    workers.attach(r, sent.flat(), bound)
    _drift(r, streams, drifts, context.judging.max_drift, context.timing_noise() if drifts else 0.0)
    r.acceptance, r.attribution = context.acceptance_of(streams, before, after, *acceptance.response_fields(found))
    return r


def _row(user: int, turn: int, s: StreamResult, o: StreamOutcome) -> SessionRequest:
    return SessionRequest(user=user, turn=turn + 1, sent_s=o.sent_s, ttft_s=s.ttft_s, ttft_content_s=s.ttft_content_s,
                          prompt_tokens=s.prompt_tokens, cached_tokens=s.cached_tokens,
                          completion_tokens=s.completion_tokens, reasoning_tokens=s.reasoning_tokens,
                          decode_tps=s.decode_tps, response_id=s.response_id)


def _result(context: CaseContext, spec: SessionSpec, nodeid: str, rows: list[SessionRequest],
            streams: list[StreamResult], found: list[Trace]) -> SessionResult:
    ttft = np.array([s.ttft_s for s in streams])
    decode = np.array([s.decode_tps for s in streams])
    start = min(t.t0 for t in found)
    end = max(t.t0 + t.total_s for t in found)
    r: SessionResult = context.new_result(
        SessionResult, spec, spec.ctx, rows[0].prompt_tokens, nodeid,
        turns=spec.turns, users=spec.users, tokens=spec.tokens, think_s=float(spec.think_s), requests=len(rows),
        ttft_s=float(np.median(ttft)), ttft_p50_s=float(np.percentile(ttft, 50)),
        ttft_p90_s=float(np.percentile(ttft, 90)), ttft_p99_s=float(np.percentile(ttft, 99)),
        decode_tps=float(np.median(decode)), decode_p10_tps=float(np.percentile(decode, 10)),
        total_tps=sum(s.completion_tokens for s in streams) / (end - start) if end > start else 0.0,
        min_cache_hit=spec.min_cache_hit, prompts=spec.prompts)
    contents = [s.ttft_content_s for s in streams if s.ttft_content_s is not None]
    if contents:
        r.ttft_content_s = float(np.percentile(contents, 50))
        r.ttft_content_p90_s = float(np.percentile(contents, 90))
    if any(s.reasoning_tokens for s in streams):  # turns cut off inside their reasoning count too
        r.reasoning_tokens = round(float(np.median([s.reasoning_tokens or 0 for s in streams])))
        # A turn without reasoning is all answer; one cut off inside its reasoning has no answer tokens.
        r.content_tokens = round(float(np.median([s.completion_tokens if s.content_tokens is None else s.content_tokens
                                                  for s in streams])))
    r.per_request = rows
    r.per_turn = per_turn(rows)
    r.prompt_tokens_last = r.per_turn[-1].prompt_tokens if r.per_turn else None
    r.ttft_growth_ms_per_1k = ttft_growth(rows)
    r.cached_tokens, r.cache_hit = cache_hit(rows)
    return r


def per_turn(rows: list[SessionRequest]) -> list[TurnFigures]:
    """Per turn over sessions: TTFT p50/p90, median prompt and cached tokens, cached share, median decode."""
    out = []
    for turn in sorted({row.turn for row in rows}):
        at = [row for row in rows if row.turn == turn]
        ttft = [row.ttft_s for row in at]
        prompt = [row.prompt_tokens for row in at if row.prompt_tokens is not None]
        cached = [row.cached_tokens for row in at if row.cached_tokens is not None]
        share = (sum(cached) / sum(prompt) if cached and prompt and len(cached) == len(prompt) and sum(prompt)
                 else None)
        out.append(TurnFigures(turn=turn, sessions=len(at), ttft_p50_s=float(np.percentile(ttft, 50)),
                               ttft_p90_s=float(np.percentile(ttft, 90)),
                               prompt_tokens=round(float(np.median(prompt))) if prompt else None,
                               cached_tokens=round(float(np.median(cached))) if cached else None,
                               cache_hit=share, decode_tps=float(np.median([row.decode_tps for row in at]))))
    return out


def cache_hit(rows: list[SessionRequest]) -> tuple[int | None, float | None]:
    """(cached prompt tokens, their share of prompt tokens) over turns after the first; (None, None) where the
    server does not say. The first turn is left out: its conversation is new, nothing of it could be reused."""
    later = [row for row in rows if row.turn > 1]
    if not later or any(row.cached_tokens is None or row.prompt_tokens is None for row in later):
        return None, None
    cached = sum(int(row.cached_tokens or 0) for row in later)
    prompt = sum(int(row.prompt_tokens or 0) for row in later)
    return cached, (cached / prompt if prompt else None)


def ttft_growth(rows: list[SessionRequest]) -> float | None:
    """Least-squares slope of TTFT (ms) over prompt tokens (per 1000): how TTFT grows with the conversation."""
    pts = [(row.prompt_tokens, row.ttft_s) for row in rows if row.prompt_tokens is not None]
    if len({p for p, _ in pts}) < 2:
        return None
    x = np.array([p for p, _ in pts], dtype=float)
    y = np.array([t for _, t in pts], dtype=float)
    return float(np.polyfit(x, y, 1)[0]) * 1000.0 * 1000.0


def _drift(r: SessionResult, streams: list[StreamResult], drifts: list[drift.Drift], max_drift: float,
           noise_s: float) -> None:
    """The drift gate over the turns long enough for windows (none, or windows too short to time against the
    client's timing ``noise_s``: not judged, said in notes)."""
    r.max_drift = max_drift
    if not drifts:
        r.drift_gate = (f"drift not judged: {r.tokens} tokens per turn are too few for windows; raise tokens "
                        "to judge drift within turns")
        return
    untimed = stream_figures.drift_span_problem([s for s in streams if s.window_tokens], drifts, noise_s)
    if untimed is not None:
        r.drift_gate = untimed
        return
    gate = drift.drift_gate(drifts, max_drift=max_drift)
    r.drift, r.drift_p, r.drift_gate, r.drift_failed = gate.drift, gate.p, gate.reason, gate.failed
    r.drift_verdict = gate.outcome
    r.early_tps = stream_figures.median([d.early_tps for d in drifts])
    r.late_tps = stream_figures.median([d.late_tps for d in drifts])


def judge_session(r: SessionResult, spec: SessionSpec, settings: JudgeSettings) -> None:
    """Cache-hit floor, TTFT ceilings (p90 turn; p99 turn), decode floor (p10 turn) and drift; undecided ones warn."""
    problems: list[str] = []
    counted: list[str] = []  # from the server's counts, not timed: a client behind its schedule cannot excuse them
    where = f"over {r.requests} turns of {r.users} session(s)"
    if spec.min_cache_hit is not None:
        if r.cache_hit is None:
            raise MeasurementError(f"min_cache_hit cannot be judged: {r.server} at {r.endpoint} does not report "
                                   "cached prompt tokens; start vLLM with --enable-prompt-tokens-details (SGLang: "
                                   "--enable-cache-report) or drop min_cache_hit")
        if r.cache_hit < spec.min_cache_hit:
            counted.append(f"cache hit {r.cache_hit:.2f} < min_cache_hit {spec.min_cache_hit:g}: {r.cached_tokens} "
                           f"of later turns' prompt tokens came from the prefix cache {where}")
    # max_ttft_s reads the p90 turn as max_ttft_p90_s does (docs/writing-cases.md); each line names its percentile
    for name, label, value in (("max_ttft_s", "ttft p90 turn", r.ttft_p90_s),
                               ("max_ttft_p90_s", "ttft p90 turn", r.ttft_p90_s),
                               ("max_ttft_p99_s", "ttft p99 turn", r.ttft_p99_s)):
        bound = getattr(spec, name)
        if bound is not None and value > bound:
            problems.append(f"{label} {value:.3f} s > {name} {bound:g} {where} (median turn {r.ttft_s:.3f} s; last "
                            f"turn's prompt {r.prompt_tokens_last} tokens)")
    content_p90 = r.ttft_content_p90_s if r.ttft_content_p90_s is not None else r.ttft_p90_s
    if spec.max_ttft_content_s is not None and content_p90 > spec.max_ttft_content_s:
        problems.append(f"first answer token p90 turn {content_p90:.3f} s > max_ttft_content_s "
                        f"{spec.max_ttft_content_s:g} {where}")
    if spec.min_tps is not None and r.decode_p10_tps < spec.min_tps:
        problems.append(f"p10 turn decode {r.decode_p10_tps:.1f} tok/s < min_tps {spec.min_tps:g} {where}")
    if r.drift_failed and r.drift is not None:
        problems.append(f"drift {r.drift:.2f} > {r.max_drift:g}: early {r.early_tps:.1f} tok/s -> late "
                        f"{r.late_tps:.1f} tok/s within turns {where}")
    elif r.drift_verdict == "inconclusive":
        text = f"{r.drift_gate}: early {r.early_tps:.1f} tok/s -> late {r.late_tps:.1f} tok/s within turns"
        if settings.inconclusive == "fail":
            problems.append(text)
        elif settings.inconclusive == "warn":
            r.warnings.append(text)
        else:
            r.notes.append(text)
    elif r.drift_verdict == "not judged":
        r.notes.append(r.drift_gate)
    ttft_from_cache(r, any(getattr(spec, k) is not None for k in TTFT_CEILINGS), settings.inconclusive, problems)
    settle(r, spec, problems, settings.inconclusive)
    if counted:
        r.verdict = "failed"
        r.reason = "; ".join([*counted, r.reason] if r.reason else counted)


class Session:
    """The ``session`` kind: multi-turn conversations, ``users`` at once."""

    name: ClassVar[str] = "session"
    spec_type: ClassVar[type[CaseSpec]] = SessionSpec

    def context_needed(self, spec: SessionSpec) -> tuple[int, int]:
        """The last turn's prompt: every user message and every answer before it (framing aside)."""
        return spec.ctx + (spec.turns - 1) * (spec.turn_ctx + spec.tokens), spec.tokens

    def measure(self, context: CaseContext, spec: SessionSpec, nodeid: str, until: Until | None = None
                ) -> SessionResult:
        """``session``."""
        return session(context, spec, nodeid)

    def judge(self, result: SessionResult, spec: SessionSpec, settings: JudgeSettings) -> None:
        """``judge_session``."""
        judge_session(result, spec, settings)
