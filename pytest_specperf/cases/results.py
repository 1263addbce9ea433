"""Result records, one per case kind; attribute names are the keys of ``--specperf-json`` (docs/measurement.md).

A result is measured, judged, compared and shown as one of these; ``json_form.to_dict`` turns it into the JSON
at the edge and ``saved_results.load_result`` turns JSON (a saved run, an xdist report) back into one. The records
inside a result (a stream's stalls, a level, a category, a comparison) are in ``result_parts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_specperf.cases.json_form import OMIT, to_dict
from pytest_specperf.cases.result_parts import (
    Acceptance,
    ArmsTable,
    Attribution,
    Burst,
    CaseComparison,
    CategoryFigures,
    Crossover,
    Goal,
    HistoryEntry,
    LengthBucket,
    LevelTrial,
    LowestRate,
    RateRequest,
    ReplayRequest,
    RowFigures,
    SessionRequest,
    Stall,
    SweepPoint,
    TurnFigures,
    WorkerShare,
)


@dataclass
class Result:
    """Fields every case has."""

    #: fields set after measuring: written last in the JSON, in the order they are set
    JSON_LAST: ClassVar[tuple[str, ...]] = ("ab", "comparisons", "arms", "history", "history_comparisons", "call")

    kind: str
    endpoint: str
    model: str
    server: str
    ctx: int
    prompt_tokens: int | None
    nodeid: str = ""
    verdict: str = "passed"  # passed | failed | error
    reason: str = ""
    content: str = "prose"
    temperature: float = 0.0  # sampling temperature of the case's requests
    started_at: float = 0.0  # wall-clock (epoch s) span of the case's requests: shows cases never overlap
    finished_at: float = 0.0
    sized_down: dict[str, Any] | None = None  # fields the runner capped for a small local engine
    server_version: str | None = None  # as the server tells it (vLLM /version, llama.cpp build_info, ...)
    min_tps: float | None = None  # the case's floor in tok/s, as judged (reports draw it)
    warnings: list[str] = field(default_factory=list)  # gates that could not decide (shown, not failed)
    notes: list[str] = field(default_factory=list)  # gates not judged, and why
    prefix_cache: str = "cold"  # the case's prefix_cache: "cold" (every request's prefill uncached) or "warm"
    # cached share of the prompt tokens of requests meant to be cold, where the server says (run/cached_share.py)
    cached_share: float | None = None
    ttft_cache: str = ""  # why TTFT is inconclusive: requests meant to be cold came back cached ("" = they did not)
    # {"tokens": ..., "ctx": ...}: the keywords given as a distribution, as written (cases/lengths.py); ctx and tokens
    # then hold the median request's lengths, and each request its own (drawn_ctx, drawn_tokens)
    drawn: dict[str, str] | None = field(default=None, metadata=OMIT)
    # Set after measuring, and only on some runs (left out of the JSON while None):
    # against a saved baseline, A, or the history
    comparisons: list[CaseComparison] | None = field(default=None, metadata=OMIT)
    ab: AbSummary | None = field(default=None, metadata=OMIT)  # A/B in one run: what A measured
    # N arms in one run: the users x arms table (compare/arms.py)
    arms: ArmsTable | None = field(default=None, metadata=OMIT)
    # the history gate's entry per metric (history/)
    history: list[HistoryEntry] | None = field(default=None, metadata=OMIT)
    # a short history's judgement (the baseline rule against its latest run) where ``comparisons`` are the named
    # baseline's (--specperf-compare), kept apart from them; without a named baseline it is ``comparisons``
    history_comparisons: list[CaseComparison] | None = field(default=None, metadata=OMIT)
    call: int | None = field(default=None, metadata=OMIT)  # the fixture's direct calls: which call of the test this was
    # the floors and ceilings the case was judged against, each with its figure (run/floors.goals_of)
    goals: list[Goal] | None = field(default=None, metadata=OMIT)
    # the worker processes that sent it (--specperf-workers, --specperf-hosts); None: the pytest process alone
    workers: list[WorkerShare] | None = field(default=None, metadata=OMIT)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (also what rides on reports to the xdist controller)."""
        return to_dict(self)


@dataclass
class StreamResult:
    """One streamed generation of a sustained case."""

    prompt_tokens: int | None
    completion_tokens: int
    ttft_s: float
    total_s: float
    decode_tps: float
    client_tps: float
    window_tokens: int | None
    window_tps: list[float]
    early_tps: float | None
    late_tps: float | None
    drift: float | None
    trend_p: float | None
    stalls: list[Stall]
    tokens_per_chunk: float
    count_source: str
    counts_exact: bool
    response_id: str | None = None
    window_tokens_per_chunk: list[float] = field(default_factory=list)
    window_chunks_per_s: list[float] = field(default_factory=list)
    # where the windows' steps come from: "chunks" (a chunk is a step) or "server" (vLLM per_step_accepted)
    window_steps_from: str | None = None
    server_timings: dict[str, Any] | None = None  # the server's own per-request accounting (llama.cpp `timings`)
    sent_s: float | None = None  # load cases: when this stream was sent, seconds after the case's first
    user: int | None = None  # load cases: the user (0 to N-1) that sent it; with refill, each sends several
    text_sha: str | None = None  # hash of prompt and generated text (runner.text_sha): equal ones pair trials
    category: str | None = None  # a prompt file's category of this stream's prompt
    prompt_id: str | None = None  # and the prompt's id in its file
    # Reasoning phase (None where the stream carried no reasoning): first answer token, tokens and rate per phase.
    ttft_content_s: float | None = None
    reasoning_tokens: int | None = None
    content_tokens: int | None = None
    reasoning_tps: float | None = None
    content_tps: float | None = None
    cached_tokens: int | None = None  # prompt tokens the server took from its prefix cache, where it says
    # many steps' tokens delivered at once (a catch-up after a late wake-up, a buffering proxy): named, never a speed
    bursts: list[Burst] = field(default_factory=list)
    # A/B and arms: the trial (0-based) of a stream in a combined result
    trial: int | None = field(default=None, metadata=OMIT)
    # Lengths drawn from a distribution (cases/lengths.py): the prompt tokens and output tokens this request asked for
    drawn_ctx: int | None = field(default=None, metadata=OMIT)
    drawn_tokens: int | None = field(default=None, metadata=OMIT)


@dataclass
class SustainedResult(Result):
    """A sustained case; top-level figures are medians over its streams when repeat > 1."""

    tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float = 0.0
    total_s: float = 0.0
    decode_tps: float = 0.0
    client_tps: float = 0.0
    window_tps: list[float] = field(default_factory=list)
    early_tps: float | None = None
    late_tps: float | None = None
    drift: float | None = None
    drift_p: float | None = None
    drift_gate: str = ""
    drift_failed: bool = False
    drift_verdict: str = "not judged"  # passed | failed | inconclusive | not judged
    max_drift: float | None = None
    stalls: int = 0
    stall_s: float = 0.0
    bursts: int = 0  # deliveries of many steps' tokens at once, over every stream (stream_figures)
    tokens_per_chunk: float = 0.0
    counts_exact: bool = True
    count_source: str = ""
    acceptance: Acceptance | None = None
    attribution: Attribution | None = None
    window_accept_len: list[float] = field(default_factory=list)  # tokens per step per window (step chunks)
    window_step_ms: list[float] = field(default_factory=list)  # step time per window (step chunks)
    burst_tps: float | None = None
    burst_gap: float | None = None
    repeat: int = 1
    streams: list[StreamResult] = field(default_factory=list)
    # Load cases (concurrency > 1): decode_tps is then the median user's.
    concurrency: int = 1
    ramp_s: float = 0.0
    decode_p10_tps: float | None = None  # the 10th-percentile user's decode: what min_tps gates under load
    total_tps: float | None = None  # aggregate output tok/s over the window in which every stream decoded
    min_total_tps: float | None = None  # the aggregate floor the case was judged against (reports show it)
    common_window_s: float | None = None  # that window's length (with refill: the steady window's)
    # Closed loop with refill (requests > concurrency): each user sends its next request when its last ended.
    requests: int | None = None  # requests sent (load cases)
    warmup_s: float | None = None  # first send -> the steady window (not every user decoding yet)
    drain_s: float | None = None  # the steady window's end -> the last token (fewer than N in flight)
    warmup_requests: int | None = None  # requests left out of the judged figures as warm-up
    drain_requests: int | None = None  # and as drain
    warmup_drain_streams: list[StreamResult] = field(default_factory=list)  # those requests' streams
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    # load cases: the 99th-percentile request's TTFT (the tail users wait); added later, so left out while None
    ttft_p99_s: float | None = field(default=None, metadata=OMIT)
    step_ms: float | None = None  # median engine step time (servers that send one chunk per step)
    late_p50_s: float | None = None  # the client's send lateness, its bound and verdict (lateness.py)
    late_p99_s: float | None = None
    late_bound_s: float | None = None
    client_behind: str = ""
    prompts: str | None = None  # the prompt file the case ran over (cases with prompts=)
    categories: dict[str, CategoryFigures] | None = None  # figures per category (run/categories.py)
    # Reasoning phase: medians over streams that had one (all None where none did; stream_figures.phases).
    ttft_content_s: float | None = None  # first answer token
    reasoning_tokens: int | None = None
    content_tokens: int | None = None
    reasoning_tps: float | None = None
    content_tps: float | None = None
    reasoning_accept_len: float | None = None  # tokens per step in each phase (servers sending a chunk per step)
    content_accept_len: float | None = None
    slower_phase: str | None = None  # "reasoning" or "answer": the phase that decoded slower (None: one phase)
    # A/B and arms of a load case (concurrency > 1): each trial's figures
    trials: list[LevelTrial] | None = field(default=None, metadata=OMIT)


@dataclass
class LoadLevel:
    """One concurrency level of a load sweep: the load fields of the sustained result measured there."""

    concurrency: int = 1
    prompt_tokens: float | None = None
    completion_tokens: float = 0
    decode_tps: float = 0.0  # the median user's
    decode_p10_tps: float | None = None
    total_tps: float | None = None
    common_window_s: float | None = None
    ttft_s: float = 0.0
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = field(default=None, metadata=OMIT)
    step_ms: float | None = None
    drift: float | None = None
    drift_verdict: str = "not judged"
    drift_gate: str = ""
    early_tps: float | None = None
    late_tps: float | None = None
    stalls: int = 0
    stall_s: float = 0.0
    tokens_per_chunk: float = 0.0
    verdict: str = "passed"
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    streams: list[StreamResult] = field(default_factory=list)
    late_p50_s: float | None = None
    late_p99_s: float | None = None
    late_bound_s: float | None = None
    client_behind: str = ""
    requests: int | None = None
    warmup_s: float | None = None
    drain_s: float | None = None
    warmup_requests: int | None = None
    drain_requests: int | None = None
    warmup_drain_streams: list[StreamResult] = field(default_factory=list)
    ttft_content_s: float | None = None
    reasoning_tokens: int | None = None
    content_tokens: int | None = None
    reasoning_tps: float | None = None
    content_tps: float | None = None
    reasoning_accept_len: float | None = None
    content_accept_len: float | None = None
    slower_phase: str | None = None
    accept_len: float | None = None  # mean accepted length at this level
    accept_source: str | None = None
    categories: dict[str, CategoryFigures] | None = None  # a prompt file's figures per category at this level
    kind: str = "sustained"  # compared like a sustained case: per-stream decode, aggregate per level
    cached_share: float | None = None  # as the result's (run/cached_share.py), per level
    ttft_cache: str = ""
    # A/B and arms: each trial's figures at this level
    trials: list[LevelTrial] | None = field(default=None, metadata=OMIT)
    workers: list[WorkerShare] | None = field(default=None, metadata=OMIT)  # who sent this level (as Result's)
    # the floors and ceilings this level was judged against, each with its figure (run/floors.goals_of): a sweep's
    # floors are per level, so the case's own ``goals`` stay None
    goals: list[Goal] | None = field(default=None, metadata=OMIT)


@dataclass
class AbSummary:
    """A/B in one run, on B's result: what A measured (its aggregated figures, and per trial)."""

    trials: int
    a_endpoint: str
    b_endpoint: str
    a: dict[str, Any] = field(default_factory=dict)  # A's figures aggregated over trials, by B's key names
    a_decode_tps: list[float] = field(default_factory=list)
    b_decode_tps: list[float] = field(default_factory=list)
    a_levels: list[LoadLevel] | None = field(default=None, metadata=OMIT)  # load sweeps: A's levels, every trial


@dataclass
class Probe:
    """One rate of a capacity search: its figures and whether it met the target."""

    rps: float
    requests: int
    counted: int
    attainment: float | None
    passed: bool
    alone: bool = False  # every request was served alone (no overlap): what the lowest rate must show
    goodput_rps: float | None = None
    achieved_rps: float | None = None
    output_tps: float | None = None
    missed: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    failed: int = 0
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_content_p50_s: float | None = None
    ttft_content_p90_s: float | None = None
    ttft_content_p99_s: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p50_s: float | None = None
    e2e_p90_s: float | None = None
    e2e_p99_s: float | None = None
    late_p50_s: float | None = None
    late_p99_s: float | None = None
    late_bound_s: float | None = None
    client_behind: str = ""
    # why the client's lateness could (not) change this probe's verdict
    late_note: str | None = field(default=None, metadata=OMIT)
    decode_tps: float | None = None
    categories: dict[str, CategoryFigures] | None = None
    workers: list[WorkerShare] | None = field(default=None, metadata=OMIT)  # who sent this probe (as Result's)
    tokens_per_chunk: float | None = None
    step_ms: float | None = None
    # prompt and cached tokens over the probe's answered requests, where the server reports cached tokens
    prompt_tokens: int | None = field(default=None, metadata=OMIT)
    cached_tokens: int | None = field(default=None, metadata=OMIT)
    # why this probe's TTFT is inconclusive: requests meant to be cold came back cached (run/cached_share.py)
    ttft_cache: str | None = field(default=None, metadata=OMIT)


@dataclass
class LoadSweepResult(Result):
    """A sustained load at each concurrency level; ``levels`` hold each level's load fields and streams."""

    tokens: int = 0
    concurrency: list[int] = field(default_factory=list)
    levels: list[LoadLevel] = field(default_factory=list)
    knee: int | None = None  # first level past which aggregate tok/s grows < 10% per doubling
    decode_tps: float = 0.0  # per-user median decode at the highest level
    total_tps: float | None = None  # the highest aggregate over levels
    min_total_tps: Any = None  # the asked aggregate floor: one number, or {users: floor}
    min_speedup: float | None = None  # A/B only: asked floor on B / A per-user decode
    crossover: Crossover | None = None  # A/B only: per-level speedups and the first level B is slower
    prompts: str | None = None  # the prompt file the case ran over (cases with prompts=)
    categories: dict[str, CategoryFigures] | None = None  # figures per category at the highest level
    repeat: int | None = field(default=None, metadata=OMIT)  # A/B and arms: trials combined into this result

    def json_extras(self) -> dict[str, Any]:
        """Which level the case's ``categories`` are from (``categories_users``): each level has its own in
        ``levels``, and a reader of the case's must not have to guess which one it repeats."""
        if self.categories is None or not self.levels:
            return {}
        last = self.levels[-1]
        return {"categories_users": last["concurrency"] if isinstance(last, dict) else last.concurrency}


@dataclass
class TwoPointResult(Result):
    """A two-point decode measurement (median over repeats)."""

    short: int = 8
    long: int = 264
    t_short_s: float = 0.0
    t_long_s: float = 0.0
    decode_tps: float = 0.0
    repeat: int = 1
    samples_tps: list[float] = field(default_factory=list)
    # The same rate per repeat on the server's own clock (llama.cpp ``timings``); empty where the server has none.
    server_samples_tps: list[float] = field(default_factory=list)


@dataclass
class SweepResult(Result):
    """Two-point decode at several context lengths."""

    points: list[SweepPoint] = field(default_factory=list)
    decode_tps: float = 0.0  # the lowest point's rate: the one a floor is about
    repeat: int | None = field(default=None, metadata=OMIT)  # A/B and arms: trials combined into this result


@dataclass
class RateResult(Result):
    """A rate case; latency figures are over answered requests, attainment and goodput over all."""

    rps: float = 0.0  # asked
    arrivals: str = "poisson"
    requests: int = 0
    tokens: int = 0
    slo: dict[str, float] | None = None
    achieved_rps: float = 0.0  # answered requests per second of duration_s (vLLM's request throughput)
    sent_rps: float = 0.0  # requests over the span of their actual sends: how the client kept the schedule
    duration_s: float = 0.0  # first scheduled arrival -> last response
    output_tps: float = 0.0
    completion_tokens: int = 0  # per request, as asked and checked
    decode_tps: float = 0.0  # median request's
    ttft_s: float = 0.0  # median request's (from its scheduled arrival)
    tpot_ms: float = 0.0
    e2e_s: float = 0.0
    ttft_p50_s: float = 0.0
    ttft_p90_s: float = 0.0
    ttft_p99_s: float = 0.0
    tpot_p50_ms: float = 0.0
    tpot_p90_ms: float = 0.0
    tpot_p99_ms: float = 0.0
    e2e_p50_s: float = 0.0
    e2e_p90_s: float = 0.0
    e2e_p99_s: float = 0.0
    ttft_content_s: float = 0.0  # first answer token (after any reasoning), from the scheduled arrival
    ttft_content_p50_s: float = 0.0
    ttft_content_p90_s: float = 0.0
    ttft_content_p99_s: float = 0.0
    reasoning_tokens: int | None = None  # per answered request, median (None: no reasoning phase)
    content_tokens: int | None = None  # answer tokens per answered request, median (None: no reasoning phase)
    tokens_per_chunk: float = 0.0
    attainment: float | None = None  # share of requests meeting every bound of the slo
    goodput_rps: float | None = None  # requests meeting the slo per second of the case
    met: int = 0
    missed: dict[str, int] = field(default_factory=dict)  # bound -> requests missing it
    refused: int = 0  # HTTP 429/503
    failed: int = 0  # other per-request errors
    late_p99_s: float = 0.0  # how far behind schedule the client sent (p99)
    late_p50_s: float | None = None  # (p50); the bound and the verdict it gives: lateness.py
    late_bound_s: float | None = None
    client_behind: str = ""
    step_ms: float | None = None  # median request's decode step time (servers that send one chunk per step)
    reference: LowestRate | None = None  # the lowest rate, when a failure needed a cause
    per_request: list[RateRequest] = field(default_factory=list)
    prompts: str | None = None  # the prompt file the case ran over (cases with prompts=)
    categories: dict[str, CategoryFigures] | None = None  # figures per category (run/categories.py)
    repeat: int | None = field(default=None, metadata=OMIT)  # A/B and arms: trials combined into this result
    trials: list[LevelTrial] | None = field(default=None, metadata=OMIT)  # repeat=N: each trial's compared figures


@dataclass
class CapacityResult(Result):
    """A capacity search."""

    slo: dict[str, float] | None = None
    target: float = 0.95
    tokens: int = 0
    arrivals: str = "poisson"
    max_rps: float | None = None  # highest passing probe; 0.0 when none passed
    bracket: list[float | None] = field(default_factory=list)  # [highest passing, lowest failing]
    probes: list[Probe] = field(default_factory=list)
    stop: str = ""  # why the search ended
    search_s: float = 0.0
    goodput_rps: float | None = None  # at max_rps
    attainment: float | None = None  # at max_rps
    min_rps: float | None = None
    reference: LowestRate | None = None  # the lowest rate, when a failure needed a cause
    decode_tps: float | None = None  # median request's decode at max_rps
    late_p50_s: float | None = None  # the client's send lateness over the probes (lateness.py)
    late_p99_s: float | None = None
    late_bound_s: float | None = None
    client_behind: str = ""
    prompts: str | None = None  # the prompt file the case ran over (cases with prompts=)
    categories: dict[str, CategoryFigures] | None = None  # figures per category at max_rps
    repeat: int | None = field(default=None, metadata=OMIT)  # A/B and arms: trials combined into this result


@dataclass
class SessionResult(Result):
    """Multi-turn sessions: per-turn figures (``per_turn``, ``per_request``), the cache-hit share, load figures."""

    turns: int = 0
    users: int = 1
    tokens: int = 0  # generated per turn
    think_s: float = 0.0
    requests: int = 0  # turns answered, over every session
    ttft_s: float = 0.0  # median turn's
    ttft_p50_s: float = 0.0
    ttft_p90_s: float = 0.0
    ttft_p99_s: float = 0.0
    ttft_content_s: float | None = None  # p50 turn's first answer token (None: no reasoning phase)
    ttft_content_p90_s: float | None = None
    ttft_growth_ms_per_1k: float | None = None  # least-squares slope of TTFT over prompt tokens, per 1000
    decode_tps: float = 0.0  # median turn's
    decode_p10_tps: float = 0.0
    total_tps: float = 0.0  # output tokens of every turn over the case's span (think time included)
    prompt_tokens_last: int | None = None  # median last turn's prompt: how long the conversation grew
    cached_tokens: int | None = None  # over later turns; None where the server does not say
    cache_hit: float | None = None  # cached share of later turns' prompt tokens (the first has nothing to reuse)
    min_cache_hit: float | None = None
    reasoning_tokens: int | None = None  # per turn, median (None: no reasoning phase)
    content_tokens: int | None = None
    drift: float | None = None  # the drift gate over turns long enough for windows
    drift_p: float | None = None
    drift_gate: str = ""
    drift_failed: bool = False
    drift_verdict: str = "not judged"
    early_tps: float | None = None
    late_tps: float | None = None
    max_drift: float | None = None
    acceptance: Acceptance | None = None
    attribution: Attribution | None = None
    late_p50_s: float | None = None  # the client's send lateness (lateness.py)
    late_p99_s: float | None = None
    late_bound_s: float | None = None
    client_behind: str = ""
    prompts: str | None = None  # the prompt file the user turns came from
    per_turn: list[TurnFigures] = field(default_factory=list)  # turn -> TTFT p50/p90, prompt, cached, decode
    per_request: list[SessionRequest] = field(default_factory=list)  # every turn of every session
    repeat: int | None = field(default=None, metadata=OMIT)  # A/B and arms: trials combined into this result
    trials: list[LevelTrial] | None = field(default=None, metadata=OMIT)  # repeat=N: each trial's compared figures


@dataclass
class ReplayResult(RateResult):
    """A replayed trace: a rate case's figures over the trace's own arrivals and lengths, and how faithfully it went
    out (per request: scheduled, sent, late, lengths, cached tokens)."""

    trace: str = ""  # the file (or builtin:NAME)
    format: str = ""  # the format it was read as
    timestamp_unit: str = ""  # the unit its timestamps were read in
    speed: float = 1.0  # 2 = twice as fast as the trace
    start_s: float = 0.0  # the window, in the trace's seconds
    window_s: float | None = None  # the window's length asked (None: to the trace's end)
    skipped: int = 0  # rows of the file not replayed: failed requests (BurstGPT's 0 response tokens)
    not_sent: int = 0  # rows of the window not sent: longer than the server's context
    length_mismatches: int = 0  # answered requests whose server-counted prompt or output length differs from the trace
    reusable_share: float | None = None  # the trace's own: blocks seen before (a leading run) over all blocks
    client_cpu_share: float | None = None  # the client process's CPU seconds over the replay's wall seconds
    prompts_build_s: float | None = None  # building every prompt, before the first send
    # The client's clock (time.perf_counter, CLOCK_MONOTONIC on Linux) at the schedule's origin: a server on the
    # same host puts its own arrival stamps against origin_s + scheduled_s.
    origin_s: float | None = None
    buckets: dict[str, LengthBucket] = field(default_factory=dict)  # figures per input-length bucket
    per_request: list[ReplayRequest] = field(default_factory=list)  # type: ignore[assignment]
    # Where this record is one trial of several (``compare.samples.per_trial``): that trial's answered rows, which
    # ``per_request`` (the last trial's) is not. Never saved: a saved row keeps each trial's in ``trials``.
    row_figures: list[RowFigures] | None = field(default=None, metadata=OMIT)


@dataclass
class ErrorRecord:
    """A case that could not be measured: what it asked and why it could not run, no figures (``verdict`` "error").

    It stands beside the kinds' records: measuring makes one (``run.registry.error_record``), a saved run's JSON with
    ``verdict`` "error" loads into one (``saved_results.load_record``), and it is judged (skipped against a baseline),
    shown and written like them. ``kind`` may be a kind this version has no record of."""

    #: fields set after measuring: written last in the JSON
    JSON_LAST: ClassVar[tuple[str, ...]] = ("comparisons", "call")

    nodeid: str
    kind: str
    ctx: int | None = None  # the largest context the case asked for
    content: str | None = None
    verdict: str = "error"
    reason: str = ""
    # what the case asked, where its kind has it (an errored load case or session still says how many users)
    tokens: int | None = field(default=None, metadata=OMIT)
    short: int | None = field(default=None, metadata=OMIT)
    long: int | None = field(default=None, metadata=OMIT)
    concurrency: int | list[int] | None = field(default=None, metadata=OMIT)
    users: int | None = field(default=None, metadata=OMIT)
    turns: int | None = field(default=None, metadata=OMIT)
    call: int | None = field(default=None, metadata=OMIT)  # the fixture's direct calls: which call of the test
    # against a saved baseline: "skipped" (`specperf compare` judges an errored case too)
    comparisons: list[CaseComparison] | None = field(default=None, metadata=OMIT)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data, as a result's."""
        return to_dict(self)


#: What a case leaves: its kind's record, or the error record of a case that could not be measured.
Recorded = Result | ErrorRecord


def is_error(result: Recorded) -> bool:
    """Whether ``result`` says its case could not be measured: the one test on a record (``saved_results``'s
    ``is_error_record`` is its twin on JSON, used only where JSON becomes a record)."""
    return result.verdict == "error"
