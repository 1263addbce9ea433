"""The records a result holds inside it: a stream's stalls, a level, a category, a request, a turn, a comparison.

Each is a plain dataclass whose attribute names are its JSON keys (``json_form.to_dict`` serialises them at the
edge; a field with ``metadata=OMIT`` is left out while None).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_specperf.cases.json_form import OMIT, to_dict


@dataclass
class Stall:
    """A gap in a stream far longer than its steps: where (token index) and how long."""

    at_token: int
    gap_s: float


@dataclass
class Burst:
    """Many steps' tokens delivered at once (a catch-up, a buffering proxy): named, never counted as speed."""

    at_token: int
    tokens: int
    span_s: float


@dataclass
class Goal:
    """One floor or ceiling a case was judged against (``min_tps=40``, ``max_ttft_s=2``) and the figure it read.

    ``figure`` is the result's attribute the bound judged (``ttft_p50_s``: a load case's ``max_ttft_s`` judges the
    median request), ``label`` its name in reports (``ttft p50``), ``value`` its value when judged, in ``unit``;
    ``floor`` is True for a lower bound. The margin (``margin``) is how far the figure is inside the bound.
    """

    keyword: str
    bound: float
    figure: str
    label: str
    unit: str
    floor: bool
    value: float | None = None

    def margin(self) -> float | None:
        """The figure's distance inside the bound, as a share of the bound (negative: outside it)."""
        if self.value is None or not self.bound:
            return None
        room = self.value - self.bound if self.floor else self.bound - self.value
        return room / self.bound


@dataclass
class AcceptanceSample:
    """Mean accepted length over one ``/metrics`` scrape interval, ``t_s`` after the case began."""

    t_s: float
    mean_len: float
    steps: int


@dataclass
class Acceptance:
    """Draft acceptance of one case; ``exact`` says whether the server counted it or it was inferred."""

    mean_len: float | None
    rate: float | None
    source: str  # metrics | response | chunks
    exact: bool
    steps: int | None = None
    drafted: int | None = None
    accepted: int | None = None
    per_position: list[float] = field(default_factory=list)
    contaminated: bool = False
    note: str = ""
    over_time: list[AcceptanceSample] | None = field(default=None, metadata=OMIT)


@dataclass
class Attribution:
    """What explains a late slowdown: acceptance and step time early vs late, and each one's share of it."""

    accept_early: float | None = None
    accept_late: float | None = None
    step_ms_early: float | None = None
    step_ms_late: float | None = None
    accept_share: float | None = None
    step_share: float | None = None
    # with a reasoning phase (early windows reasoning, late ones the answer): each phase's rate and the slower one
    reasoning_tps: float | None = field(default=None, metadata=OMIT)
    content_tps: float | None = field(default=None, metadata=OMIT)
    slower_phase: str | None = field(default=None, metadata=OMIT)


@dataclass
class CategoryFigures:
    """One prompt category's figures (``run/categories.py``); open-loop cases add requests and attainment."""

    n: int = 0
    n_prompts: int = 0
    decode_tps_p50: float | None = None
    decode_tps_p10: float | None = None
    ttft_p50_s: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    accept_source: str | None = None
    drafted: int | None = None
    accepted: int | None = None
    completion_tokens: int | None = None
    drift: float | None = None
    prompt_tokens_p50: float | None = None
    requests: int | None = field(default=None, metadata=OMIT)  # open loop: requests sent from this category
    attainment: float | None = field(default=None, metadata=OMIT)  # open loop: their share meeting the slo
    # the floor this category was judged on, where one was given per category
    min_tps: float | None = field(default=None, metadata=OMIT)
    min_accept_len: float | None = field(default=None, metadata=OMIT)
    # A/B: B's categories over its trials (compare/categories.py), each with its speedup over A and interval
    trials: int | None = field(default=None, metadata=OMIT)
    speedup: float | None = field(default=None, metadata=OMIT)
    speedup_interval: list[float] | None = field(default=None, metadata=OMIT)
    speedup_method: str | None = field(default=None, metadata=OMIT)
    speedup_n_a: int | None = field(default=None, metadata=OMIT)
    speedup_n_b: int | None = field(default=None, metadata=OMIT)
    a_decode_tps: float | None = field(default=None, metadata=OMIT)  # A's geometric mean over its trials
    speedup_family: int | None = field(default=None, metadata=OMIT)  # categories the interval is joint over


@dataclass
class RowFigures:
    """One answered trace row of a replay trial: the per-request figures its compared latencies are percentiles of,
    so two sides' figures can be taken over the same rows (``figures.over_shared_rows``)."""

    row: int
    ttft_s: float | None = None
    tpot_ms: float | None = None
    e2e_s: float | None = None
    decode_tps: float | None = None


@dataclass
class LevelTrial:
    """One trial's compared figures, where a case was measured several times (A/B, arms, ``repeat=`` of a case
    that sends at once): a load level's, or a rate case's or a session's (the open-loop figures only on those)."""

    decode_tps: float | None = None
    total_tps: float | None = None
    ttft_s: float | None = None
    # a rate case's gated figures (requests/s, share, s, ms, s), per trial
    goodput_rps: float | None = field(default=None, metadata=OMIT)
    attainment: float | None = field(default=None, metadata=OMIT)
    ttft_p90_s: float | None = field(default=None, metadata=OMIT)
    tpot_p90_ms: float | None = field(default=None, metadata=OMIT)
    e2e_p90_s: float | None = field(default=None, metadata=OMIT)
    rows: list[RowFigures] | None = field(default=None, metadata=OMIT)  # a replay trial's answered rows


@dataclass
class SweepPoint:
    """One context length of a context sweep."""

    ctx: int
    prompt_tokens: int | None
    t_short_s: float
    t_long_s: float
    decode_tps: float
    samples_tps: list[float] = field(default_factory=list)


@dataclass
class LowestRate:
    """An open-loop case's figures at one request at a time (``rate.lowest_rate``): what load is measured against
    when a failure needs a cause. Every field is left out while None, so a reference none of whose requests was
    answered is written ``{}``."""

    tokens_per_chunk: float | None = field(default=None, metadata=OMIT)
    step_ms: float | None = field(default=None, metadata=OMIT)
    tpot_ms: float | None = field(default=None, metadata=OMIT)
    requests: int | None = field(default=None, metadata=OMIT)
    response_ids: list[str | None] | None = field(default=None, metadata=OMIT)


@dataclass
class RateRequest:
    """One request of an open-loop case, timed from its scheduled arrival."""

    at_s: float
    sent_s: float
    late_s: float
    status: int | None = None
    error: str | None = field(default=None, metadata=OMIT)
    #: Of late_s, how long the sending thread waited for a CPU the host gave another process (Linux only)
    starved_s: float | None = field(default=None, metadata=OMIT)
    ttft_s: float | None = None
    e2e_s: float | None = None
    end_s: float | None = None
    tokens: int | None = None
    tpot_ms: float | None = None
    decode_tps: float | None = None
    tokens_per_chunk: float | None = None
    step_ms: float | None = None
    response_id: str | None = None
    ttft_content_s: float | None = None
    reasoning_tokens: int | None = None
    content_tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    met: bool | None = None
    category: str | None = field(default=None, metadata=OMIT)
    prompt_id: str | None = field(default=None, metadata=OMIT)
    # Lengths drawn from a distribution (cases/lengths.py): the prompt tokens and output tokens this request asked for
    drawn_ctx: int | None = field(default=None, metadata=OMIT)
    drawn_tokens: int | None = field(default=None, metadata=OMIT)


@dataclass
class SessionRequest:
    """One turn of one conversation."""

    user: int
    turn: int
    sent_s: float
    ttft_s: float
    ttft_content_s: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int = 0
    reasoning_tokens: int | None = None
    decode_tps: float = 0.0
    response_id: str | None = None


@dataclass
class TurnFigures:
    """One turn over every conversation: TTFT p50/p90, median prompt and cached tokens, cached share, decode."""

    turn: int
    sessions: int
    ttft_p50_s: float
    ttft_p90_s: float
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_hit: float | None = None
    decode_tps: float | None = None


@dataclass(frozen=True)
class Comparison:
    """One metric of one case, candidate vs baseline. Fractions throughout (0.05 = 5 %)."""

    metric: str
    direction: str  # "higher" | "lower" is better
    verdict: str  # passed | regressed | improved | inconclusive
    effect: float  # relative change, signed so that negative = worse (log-symmetric: compare/trials.py)
    ci: list[float]  # [low, high] of effect
    change: float  # plain relative change of the metric's geometric mean, cand / base - 1
    change_ci: list[float]  # [low, high] of change
    p: float | None  # one-sided Welch t p in the worse direction (of the interval's statistic)
    n_base: int
    n_cand: int
    mde: float  # smallest worsening detected with power 0.8 at this noise and n (as a positive fraction)
    noise: float  # per-trial log-sd (~CV) behind mde: both sides' robust spread, weighted by n; or the floor
    noise_source: str  # "measured" | "floor"
    trials_needed: int  # trials per side to detect the threshold at this noise
    threshold: float  # max_regression
    method: str  # "welch" | "prediction" | "noise-floor" | "identical", plus "+estimate" when decided at decide_at
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return to_dict(self)


def value_text(v: float | None, unit: str) -> str:
    """A figure as the cause's line and the report write it, in ``unit``'s precision."""
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v:.1f}" if v >= 10 else f"{v:.2f}"  # a fast simulator's steps of 2 ms: 2.00 -> 2.52, not 2.0 -> 2.5
    if unit in ("tokens/step", "of the prompt"):
        return f"{v:.2f}"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


@dataclass
class CauseFactor:
    """One factor of a change across runs (``compare/cause.py``): its figure on each side, in ``unit``, its relative
    change, and the share of the metric's change it explains (log terms over the metric's log change; the shares
    of one cause add to 1, ``other`` holding what the measured factors leave; None where the change was not split)."""

    name: str  # acceptance | step time | cached share | prompt | prefill | other
    unit: str = ""  # tokens/step | ms | of the prompt | tokens | uncached tok/s
    base: float | None = None  # the other side's (baseline, A, the history, the best arm)
    now: float | None = None  # this side's
    change: float | None = None  # now / base - 1
    share: float | None = None
    source: str = ""  # tokens per step: metrics | response | chunks (the stream's own steps)


@dataclass
class Cause:
    """What a compared metric's change comes from: both sides' figures per factor and the factor ``named`` as the
    cause (the largest share; None when the change is too small to split or too little was measured)."""

    metric: str
    change: float  # the metric's relative change, now / base - 1 (as the comparison's)
    sides: list[str] = field(default_factory=list)  # [other side, this side]: baseline/now, A/B, history/now
    named: str | None = None
    base: float | None = None  # the metric on each side (geometric mean of its units)
    now: float | None = None
    factors: list[CauseFactor] = field(default_factory=list)  # the cause first
    text: str = ""  # the line a reason carries


def case_key(nodeid: str, ctx: int | None, users: int | None = None) -> str:
    """The name of a case, sweep point or load level in comparisons and exports."""
    if users is not None:
        return f"{nodeid}@users={users}"
    return nodeid if ctx is None else f"{nodeid}@ctx={ctx}"


def unit_key(kind: object, nodeid: str, ctx: int | None, users: object = None) -> str:
    """The unit a comparison of a ``kind`` case judges, as the history keys its units: only a load sweep's levels
    are told apart by their users (a session's comparisons carry its users, but a session is one unit)."""
    return case_key(nodeid, ctx, users if kind == "load_sweep" and isinstance(users, int) else None)


@dataclass(frozen=True)
class CaseComparison:
    """A case (or sweep point) and metric matched between baseline and candidate, or left unmatched."""

    nodeid: str
    ctx: int | None  # sweep point's asked ctx; None for ordinary cases
    metric: str | None  # None for new / missing / errored cases
    verdict: str  # passed | regressed | improved | inconclusive | new | missing | skipped
    reason: str
    comparison: Comparison | None = None
    q: float | None = None  # Benjamini-Hochberg q-value over the run's p-values (report only)
    users: int | None = None  # a load sweep's level (concurrency); None for other cases
    cause: Cause | None = field(default=None, metadata=OMIT)  # what the change comes from (compare/cause.py)

    @property
    def key(self) -> str:
        """``nodeid``, ``nodeid@ctx=N`` or ``nodeid@users=N``."""
        return case_key(self.nodeid, self.ctx, self.users)

    def json_extras(self) -> dict[str, Any]:
        """Derived keys the JSON carries besides the fields (readers match comparisons by ``key``)."""
        return {"key": self.key}

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data, with ``key``."""
        return to_dict(self)


# history entries: the history gate's record per unit and metric (history/against_history.py, a result's
# ``history``) and ``specperf trend``'s per metric (history/trend.py). Keyword-only, so that fields with defaults
# (the ones an entry may lack, as the views have always tolerated) can keep their place in the JSON's key order.


@dataclass(kw_only=True)
class TrendPoint:
    """One run in a trend: its geometric mean and the 95 % interval of that mean, in the metric's own units."""

    run: int = 0  # its id in the history
    commit: str = ""  # short commit id, or "-"
    created: str = ""
    value: float
    lo: float
    hi: float


@dataclass(kw_only=True)
class ChangePoint:
    """A change point: the run it began at (``run`` None: this run) and the levels on either side of it."""

    index: int  # among the case's runs in the history (the first shown is ``first_shown``)
    run: int | None = None
    commit: str = ""  # short commit id; "this run" when it began now
    created: str = ""  # "" when it began now
    before: float
    after: float
    effect: float
    # only on an entry's ``began`` (the change that decided it): the mean level before it and of the last segment
    level_before: float | None = field(default=None, metadata=OMIT)
    level_now: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class HistoryEntry:
    """One unit and metric of a result judged against its history: the verdict, the prediction interval this run
    was judged by, the recent runs and change points (what the trend charts draw)."""

    key: str = ""  # the unit's case key (``case_key``)
    metric: str
    verdict: str  # passed | regressed | improved
    by: str = ""  # "step" or "change point": which check decided ("" when passed)
    runs: int  # earlier runs the prediction rests on
    value: float  # this run's, in the metric's own units
    predicted: float
    interval: list[float]  # [low, high] this run was predicted in
    effect: float  # this run against the prediction, better-is-positive
    p: float | None = None
    between: float = 0.0  # run-to-run noise (relative)
    within: float = 0.0  # within-run noise (relative)
    series: list[TrendPoint] = field(default_factory=list)  # the most recent earlier runs, oldest first
    first_shown: int = 0  # index of ``series[0]`` among the runs
    changes: list[ChangePoint] = field(default_factory=list)
    began: ChangePoint | None = field(default=None, metadata=OMIT)  # the recent change that decided the verdict
    since: int | None = field(default=None, metadata=OMIT)  # runs since ``began`` (this one included)
    reason: str = ""
    cause: Cause | None = field(default=None, metadata=OMIT)  # what the change comes from (compare/cause.py)


@dataclass(kw_only=True)
class MetricTrend:
    """``specperf trend``'s view of one metric of a case: its runs and change points, and the interval the next run
    is predicted in (the prediction's fields None while the history is too short for one)."""

    key: str
    metric: str
    runs: int
    first_shown: int = 0
    series: list[TrendPoint] = field(default_factory=list)
    changes: list[ChangePoint] = field(default_factory=list)
    predicted: float | None = field(default=None, metadata=OMIT)
    interval: list[float] | None = field(default=None, metadata=OMIT)
    between: float | None = field(default=None, metadata=OMIT)
    within: float | None = field(default=None, metadata=OMIT)


# the arms table and the crossover


@dataclass
class ArmFigures:
    """One arm at one level of the arms table: the geometric mean over its trials of per-user decode and of the
    aggregate, each with its interval; ``n`` trials measured it (0: the arm did not reach the level)."""

    decode_tps: float | None = None
    decode_interval: list[float] | None = None
    n: int = 0
    total_tps: float | None = None
    total_interval: list[float] | None = None
    trials: list[float] | None = field(default=None, metadata=OMIT)  # per-trial decode (the gate's noise)


@dataclass
class VsBest:
    """One arm against the level's best: the ratio of their decode, its interval and what the interval rests on."""

    ratio: float
    interval: list[float]
    method: str  # welch | prediction | noise-floor
    case_high: float | None = field(default=None, metadata=OMIT)  # upper bound at the case's share of alpha


@dataclass
class ArmsLevel:
    """One load level of the arms table: every arm's figures, the best arm, the arms tied with it, and whether
    the best is decided."""

    users: int
    arms: dict[str, ArmFigures] = field(default_factory=dict)
    best: str = ""
    vs_best: dict[str, VsBest] = field(default_factory=dict)
    alpha: float | None = field(default=None, metadata=OMIT)  # per side, for each comparison with the best
    tied: list[str] = field(default_factory=list)
    decided: bool = False
    # what the level is where it is no number of users: a replay's one, the trace's rows every arm answered
    label: str | None = field(default=None, metadata=OMIT)


@dataclass
class ArmsGateLevel:
    """The deployed arm at one level against ``max_loss_vs_best``: ``holds``, ``below`` or ``inconclusive``.

    Where the deployed arm is the best only the first four keys (and a replay's ``label``) are written; elsewhere
    every key, ``noise`` and ``trials_needed`` even when None (``json_extras``)."""

    users: int
    verdict: str
    ratio: float
    interval: list[float]
    best: str | None = field(default=None, metadata=OMIT)
    deployed_tps: float | None = field(default=None, metadata=OMIT)
    best_tps: float | None = field(default=None, metadata=OMIT)
    noise: float | None = field(default=None, metadata=OMIT)  # pooled per-trial log-sd of the two arms
    trials_needed: int | None = field(default=None, metadata=OMIT)  # per arm, to show an equal arm within
    cause: Cause | None = field(default=None, metadata=OMIT)  # below or inconclusive: what the loss comes from
    label: str | None = field(default=None, metadata=OMIT)  # its level's (``ArmsLevel.label``)

    def json_extras(self) -> dict[str, Any]:
        """A level judged against another arm writes ``noise`` and ``trials_needed`` as null when unknown; they
        are the last keys, so adding them here keeps the order."""
        return {} if self.best is None else {"noise": self.noise, "trials_needed": self.trials_needed}

    def loss_text(self, deployed: str, max_loss: float) -> str:
        """This judged level in words, as its reason and the table say it: where, how much slower than the best,
        and the figures."""
        lo, hi = self.interval
        what = "loses more than" if self.verdict == "below" else "is not shown within"
        need = ""
        if self.verdict == "inconclusive" and self.trials_needed:
            need = (f"; at {self.noise or 0:.1%} noise per trial about {self.trials_needed} trials per arm show an "
                    'equal arm within it (repeat="auto" adds trials until decided)')
        where = f"over {self.label}" if self.label else f"at {self.users} user" + ("" if self.users == 1 else "s")
        per = "for the median request" if self.label else "per user"
        return (f"{where} {deployed} {what} max_loss_vs_best {max_loss:g} against the best arm "
                f"{self.best}: {self.deployed_tps or 0:.1f} vs {self.best_tps or 0:.1f} tok/s {per}, ratio "
                f"{self.ratio:.2f} [{lo:.2f}, {hi:.2f}]{need}" + (f"; {self.cause.text}" if self.cause else ""))


@dataclass
class ArmsGate:
    """The deployed arm against the best at every level (``max_loss_vs_best``)."""

    deployed: str
    max_loss_vs_best: float
    levels: list[ArmsGateLevel] = field(default_factory=list)


@dataclass
class ArmsTable:
    """The arms comparison of one case (``compare/arms.py``): per level every arm, the best one, the schedule
    (users as a string -> best arm) and, with ``max_loss_vs_best``, the deployed arm's gate."""

    names: list[str]
    baseline: str
    deployed: str
    trials: dict[str, int] = field(default_factory=dict)
    levels: list[ArmsLevel] = field(default_factory=list)
    schedule: dict[str, str] = field(default_factory=dict)
    max_loss_vs_best: float | None = None
    # every arm's speculative tokens, where all are known; then the schedule as batch size -> tokens
    tokens: dict[str, int] | None = field(default=None, metadata=OMIT)
    num_speculative_tokens: dict[str, int] | None = field(default=None, metadata=OMIT)
    gate: ArmsGate | None = None
    text: str = ""
    endpoints: dict[str, str | None] | None = field(default=None, metadata=OMIT)  # an arms run: each arm's URL


@dataclass(kw_only=True)  # keywords only: ``method`` may be absent (runs saved before it), later fields not
class SpeedupLevel:
    """B's speedup over A for users at one level (``compare/crossover.py``): the ratio of per-trial decode, its
    interval and verdict against the floor, and the trials it rests on."""

    users: int
    speedup: float
    interval: list[float]
    verdict: str  # holds | below | inconclusive
    method: str | None = field(default=None, metadata=OMIT)  # welch | prediction | noise-floor
    a_decode_tps: float
    b_decode_tps: float
    n_a: int
    n_b: int
    a_trials: list[float] | None = field(default=None, metadata=OMIT)
    b_trials: list[float] | None = field(default=None, metadata=OMIT)
    family: int | None = field(default=None, metadata=OMIT)  # levels the interval is joint over (Bonferroni)
    case_high: float | None = field(default=None, metadata=OMIT)  # upper bound at the case's share of alpha


@dataclass
class Crossover:
    """A/B on a load sweep: B's speedup per level and the first level that does not hold the floor (its users,
    speedup, interval and verdict; None where every level holds)."""

    floor: float = 1.0
    gated: bool = False  # min_speedup given: the crossover is the sweep's A/B gate
    levels: list[SpeedupLevel] = field(default_factory=list)
    users: int | None = None
    speedup: float | None = None
    interval: list[float] | None = None
    verdict: str | None = None
    text: str = ""


@dataclass
class ReplayRequest(RateRequest):
    """One request of a replay: its trace row and what the trace asked beside what was sent and answered."""

    row: int = 0  # the trace file's row (1-based data rows; a CSV's line)
    scheduled_s: float = 0.0  # = at_s: when the trace says to send it, s after the case's start (speed applied)
    input_length: int = 0  # the trace's prompt tokens (the server's count is prompt_tokens)
    output_length: int = 0  # the trace's output tokens (the server's count is output_tokens)
    output_tokens: int | None = None  # generated tokens, as the server counted them
    reusable_tokens: int = 0  # prompt tokens the trace's hash_ids say a prefix cache could serve
    bucket: str = ""  # input-length bucket (<1k, 1-4k, 4-16k, >16k)


@dataclass
class LengthBucket:
    """A replay's figures over the requests of one input-length bucket (answered ones for the latencies)."""

    requests: int = 0
    answered: int = 0
    ttft_p50_s: float | None = None  # from the scheduled send
    ttft_p90_s: float | None = None
    decode_tps: float | None = None  # median request's
    attainment: float | None = None  # share of the bucket's requests meeting the slo (with an slo)


@dataclass
class WorkerShare:
    """One worker process that sent part of a case (``--specperf-workers``, ``--specperf-hosts``): its share."""

    host: str  # its execnet spec as given (ssh=USER@HOST, socket=HOST:PORT), or popen for a local process
    pid: int
    streams: int  # requests it sent
    offset_s: float  # its clock minus the controller's (min-RTT round trip); its stamps were moved by this
    offset_err_s: float  # half that round trip: the offset is known to within this
    cpu_share: float  # its CPU seconds over the wall seconds of its share (1.0: one core busy throughout)
    late_p99_s: float  # p99 of its requests' send lateness
