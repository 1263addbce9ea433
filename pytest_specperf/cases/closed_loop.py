"""Closed-loop case specs: a fixed number of streams, each waiting for its answer (``sustained``,
``two_point``, ``ctx_sweep``, ``load_sweep``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_specperf.cases.base import MIN_DRIFT_TOKENS, CaseSpec, check, is_number
from pytest_specperf.cases.prompt_cases import MAX_REQUESTS


@dataclass(frozen=True, kw_only=True)
class SustainedSpec(CaseSpec):
    """A long streamed generation: decode rate, drift between early and late windows, TTFT."""

    KIND: ClassVar[str] = "sustained"
    tokens: int = 1500
    max_drift: float | None = None  # None: the ini default (specperf_max_drift)
    max_burst_gap: float | None = None
    # ceiling on TTFT: one stream's, or under load (and over repeat=) the median request's (p50)
    max_ttft_s: float | None = None
    max_ttft_content_s: float | None = None  # time to the first answer token (after any reasoning)
    max_ttft_p90_s: float | None = None  # load cases: ceiling on the 90th-percentile request's TTFT
    max_ttft_p99_s: float | None = None  # load cases: ceiling on the 99th-percentile request's TTFT
    min_accept_len: Any = None  # a number, or {category: number} with a prompt file
    max_accept_drop: float | None = None
    require_speculation: bool = False
    concurrency: int = 1  # streams at once (users); > 1 makes it a load case
    # Requests in all, kept `concurrency` in flight (closed loop with refill); None: one per user, or with
    # prompts= every prompt of the file once. Judged over the steady window (run/load.py).
    requests: int | None = None
    ramp_s: float = 0.0  # starts spread evenly over this many seconds (0: all together)
    min_total_tps: float | None = None  # floor on aggregate output tok/s while all streams decode
    max_loss_vs_best: float | None = None  # --specperf-arms: the deployed arm at most this much slower than the best
    deployed: str | None = None  # --specperf-arms: the arm that is deployed (default the baseline arm)

    def validate(self) -> None:
        super().validate()
        k = self.KIND
        validate_load(self, k)
        validate_arms(self, k)
        # With streams at once, repeat= runs the whole case that many times (trials, compare/gates.run_trials).
        check(self.concurrency == 1 or self.max_burst_gap is None, k,
               f"concurrency={self.concurrency} runs its streams at once: drop max_burst_gap "
               "(it measures one stream at a time); requests=K sends K requests with that many in flight")
        validate_requests(self, self.concurrency, k)
        check(self.requests is None or ((self.repeat == 1 or self.concurrency > 1) and self.max_burst_gap is None),
               k, f"requests={self.requests} sends that many requests with concurrency={self.concurrency} in flight: "
               "drop repeat unless concurrency > 1, and max_burst_gap (they measure one stream at a time)")
        check(isinstance(self.tokens, int) and self.tokens >= 16, k,
               f"tokens must be an integer >= 16, got {self.tokens!r}")
        for name in ("max_drift", "max_burst_gap", "max_accept_drop"):
            v = getattr(self, name)
            check(v is None or (is_number(v) and 0 < v < 1), k, f"{name} must be a fraction in (0, 1), got {v!r}")
        check(self.max_drift is None or self.tokens >= MIN_DRIFT_TOKENS, k,
               f"max_drift needs tokens >= {MIN_DRIFT_TOKENS} (drift is judged over 8 windows of 32 decode tokens), "
               f"got tokens={self.tokens}; raise tokens or drop max_drift")
        check(self.concurrency > 1 or self.requests is not None or (self.tokens_dist is None and self.ctx_dist is None),
              k, "tokens or ctx drawn from a distribution needs several requests: give concurrency=N (N > 1) or "
              "requests=K")
        validate_drawn(self, k)
        for name in ("max_ttft_s", "max_ttft_content_s", "max_ttft_p90_s", "max_ttft_p99_s"):
            v = getattr(self, name)
            check(v is None or (is_number(v) and v > 0), k, f"{name} must be a positive number of seconds, got {v!r}")
        validate_ttft_tail(self, k)
        if not (self.prompts is not None and isinstance(self.min_accept_len, Mapping)):  # per category: prompt_cases
            check(self.min_accept_len is None or (is_number(self.min_accept_len) and self.min_accept_len >= 1), k,
                   f"min_accept_len must be a number >= 1 (tokens per step), got {self.min_accept_len!r}")
        check(isinstance(self.require_speculation, bool), k,
               f"require_speculation must be True or False, got {self.require_speculation!r}")


@dataclass(frozen=True, kw_only=True)
class TwoPointSpec(CaseSpec):
    """Two non-streamed requests of different lengths on the same prompt: (long - short) / (t_long - t_short)."""

    KIND: ClassVar[str] = "two_point"
    short: int = 8
    long: int = 264

    def validate(self) -> None:
        super().validate()
        k = self.KIND
        check(isinstance(self.short, int) and self.short >= 1, k, f"short must be an integer >= 1, got {self.short!r}")
        check(isinstance(self.long, int) and self.long > self.short, k,
               f"long must be an integer > short ({self.short}), got {self.long!r}")


@dataclass(frozen=True, kw_only=True)
class CtxSweepSpec(CaseSpec):
    """A two-point decode measurement at each context length; ``tokens`` = long - short."""

    KIND: ClassVar[str] = "ctx_sweep"
    ctxs: tuple[int, ...] = field(default=(64, 1024, 3072, 5120))
    tokens: int = 256
    short: int = 8

    def validate(self) -> None:
        # ctx is unused by a sweep; ctxs carries the points.
        super().validate()
        k = self.KIND
        check(self.repeat != "auto", k, "repeat='auto' is for sustained, two_point, load_sweep, rate and "
               "session cases; give a context sweep a number of repeats")
        check(len(self.ctxs) >= 1 and all(isinstance(c, int) and c >= 1 for c in self.ctxs), k,
               f"ctxs must be a non-empty list of positive integers, got {list(self.ctxs)!r}")
        check(isinstance(self.tokens, int) and self.tokens >= 8, k,
               f"tokens must be an integer >= 8, got {self.tokens!r}")
        check(isinstance(self.short, int) and self.short >= 1, k, f"short must be an integer >= 1, got {self.short!r}")


@dataclass(frozen=True, kw_only=True)
class LoadSweepSpec(CaseSpec):
    """A sustained load at each concurrency: per-user and aggregate decode, the knee, speculation's crossover."""

    KIND: ClassVar[str] = "load_sweep"
    concurrency: tuple[int, ...] = field(default=(1, 2, 4, 8))
    tokens: int = 300
    requests: int | None = None  # requests per level, that level's users in flight (None: as sustained's)
    ramp_s: float = 0.0
    max_drift: float | None = None
    # Floors: one number for every level, or {level: floor}.
    min_tps: Any = None
    min_total_tps: Any = None
    # TTFT ceilings, judged at each level as sustained(concurrency=) judges them: max_ttft_s the median request's
    # (p50; one request's at a level of one user), the others the 90th and 99th percentile request's
    max_ttft_s: Any = None
    max_ttft_p90_s: Any = None
    max_ttft_p99_s: Any = None
    min_speedup: float | None = None  # A/B: B's per-user decode / A's at every level must reach this
    max_loss_vs_best: float | None = None  # --specperf-arms: the deployed arm at most this much slower than the best
    deployed: str | None = None  # --specperf-arms: the arm that is deployed (default the baseline arm)

    def validate(self) -> None:
        k = self.KIND
        check(isinstance(self.concurrency, tuple) and len(self.concurrency) >= 1
               and all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in self.concurrency)
               and list(self.concurrency) == sorted(set(self.concurrency)), k,
               f"concurrency must be a rising list of positive integers, e.g. [1, 2, 4, 8], got "
               f"{list(self.concurrency)!r}")
        _concurrency_bound(self.concurrency[-1], k)
        validate_requests(self, self.concurrency[-1], k)
        for name in ("min_tps", "min_total_tps", *LEVEL_CEILINGS):
            floors = getattr(self, name)
            if isinstance(floors, Mapping):
                bad = [c for c in floors if c not in self.concurrency]
                check(not bad, k, f"{name} names level {bad[0] if bad else ''!r}, which is not in concurrency "
                       f"{list(self.concurrency)}")
                values = list(floors.values())
            else:
                values = [floors]
            unit = "seconds" if name in LEVEL_CEILINGS else "tokens/s"
            check(all(v is None or (is_number(v) and v > 0) for v in values), k,
                   f"{name} must be a positive number of {unit} or a mapping {{level: {unit}}}, got {floors!r}")
        CaseSpec.validate(dataclasses.replace(self, min_tps=None))  # the shared keywords; floors checked above
        validate_arms(self, k)
        check(isinstance(self.tokens, int) and self.tokens >= 16, k,
               f"tokens must be an integer >= 16, got {self.tokens!r}")
        check(is_number(self.ramp_s) and self.ramp_s >= 0, k,
               f"ramp_s must be a number of seconds >= 0, got {self.ramp_s!r}")
        check(self.max_drift is None or (is_number(self.max_drift) and 0 < self.max_drift < 1), k,
               f"max_drift must be a fraction in (0, 1), got {self.max_drift!r}")
        check(self.max_drift is None or self.tokens >= MIN_DRIFT_TOKENS, k,
               f"max_drift needs tokens >= {MIN_DRIFT_TOKENS}, got tokens={self.tokens}; raise tokens or drop it")
        validate_drawn(self, k)
        check(self.min_speedup is None or (is_number(self.min_speedup) and self.min_speedup > 0), k,
               f"min_speedup must be a positive ratio (1.0: speculation must not slow users), got {self.min_speedup!r}")

    def floor(self, name: str, level: int) -> float | None:
        """The ``min_tps`` or ``min_total_tps`` floor (or a ``LEVEL_CEILINGS`` ceiling) at one level."""
        v = getattr(self, name)
        return v.get(level) if isinstance(v, Mapping) else v

    def level(self, c: int) -> SustainedSpec:
        """The sustained case measured at concurrency ``c``."""
        return SustainedSpec(ctx=self.ctx, content=self.content, api=self.api, temperature=self.temperature,
                             prompts=self.prompts, prompts_format=self.prompts_format, sample=self.sample,
                             categories=self.categories,
                             tokens=self.tokens, concurrency=c, requests=self.requests, ramp_s=self.ramp_s,
                             tokens_dist=self.tokens_dist, ctx_dist=self.ctx_dist,
                             max_drift=self.max_drift,
                             min_tps=self.floor("min_tps", c), min_total_tps=self.floor("min_total_tps", c),
                             max_ttft_s=self.floor("max_ttft_s", c), max_ttft_p90_s=self.floor("max_ttft_p90_s", c),
                             max_ttft_p99_s=self.floor("max_ttft_p99_s", c))


#: A load sweep's TTFT ceilings: each one number for every level, or {level: seconds}.
LEVEL_CEILINGS = ("max_ttft_s", "max_ttft_p90_s", "max_ttft_p99_s")


#: Most streams one case runs at once, over all its worker processes and hosts (building that many prompts
#: already costs minutes before the first request). What one process reads faithfully is a smaller, measured
#: bound, checked when the case runs against the run's workers (scale/senders.PER_PROCESS_STREAMS).
MAX_CONCURRENCY = 10_000


def _concurrency_bound(c: int, k: str) -> None:
    check(c <= MAX_CONCURRENCY, k, f"concurrency={c} is above {MAX_CONCURRENCY}, the most streams one case runs at "
           f"once (over all its workers); lower it to {MAX_CONCURRENCY} or less")


def validate_load(spec: Any, k: str) -> None:
    """concurrency, ramp_s and min_total_tps of a sustained case."""
    c = spec.concurrency
    check(isinstance(c, int) and not isinstance(c, bool) and c >= 1, k,
           f"concurrency must be an integer >= 1 (streams at once), got {c!r}")
    _concurrency_bound(c, k)
    check(is_number(spec.ramp_s) and spec.ramp_s >= 0, k,
           f"ramp_s must be a number of seconds >= 0, got {spec.ramp_s!r}")
    v = spec.min_total_tps
    check(v is None or (is_number(v) and v > 0), k,
           f"min_total_tps must be a positive number of tokens/s (aggregate over all streams), got {v!r}")


def validate_drawn(spec: Any, k: str) -> None:
    """Drawn output lengths and the drift gate: every draw must be long enough to judge drift on."""
    d = spec.tokens_dist
    check(spec.max_drift is None or d is None or d.low >= MIN_DRIFT_TOKENS, k,
          f"max_drift needs every request's tokens >= {MIN_DRIFT_TOKENS}, but tokens={d.text if d else ''!r} draws "
          f"from {d.low if d else 0}; give the distribution min={MIN_DRIFT_TOKENS} or drop max_drift")


def validate_ttft_tail(spec: SustainedSpec, k: str) -> None:
    """``max_ttft_p90_s`` and ``max_ttft_p99_s`` read a load case's requests: one stream has no tail to judge."""
    for name in ("max_ttft_p90_s", "max_ttft_p99_s"):
        check(getattr(spec, name) is None or spec.concurrency > 1 or spec.requests is not None, k,
              f"{name} judges the tail of many requests' TTFT under load: give concurrency=N (N > 1), or judge one "
              "stream's TTFT with max_ttft_s")


def validate_requests(spec: Any, most_users: int, k: str) -> None:
    """``requests``: an integer, at least one per user of the largest level, at most MAX_REQUESTS."""
    n = spec.requests
    if n is None:
        return
    check(isinstance(n, int) and not isinstance(n, bool) and n >= 1, k,
          f"requests must be an integer >= 1 (requests sent in all), got {n!r}")
    check(n >= most_users, k, f"requests={n} is below concurrency={most_users}: each user needs a request to keep "
          f"{most_users} in flight; raise requests to {most_users} or more, or lower concurrency")
    check(n <= MAX_REQUESTS, k, f"requests={n} is above {MAX_REQUESTS}, the most one case sends; lower it")


def validate_arms(spec: Any, k: str) -> None:
    """``max_loss_vs_best`` and ``deployed``: the arms gate's keywords (whether ``deployed`` names an arm is
    checked when the arms are known)."""
    loss = spec.max_loss_vs_best
    check(loss is None or (is_number(loss) and 0 < loss < 1), k,
          f"max_loss_vs_best must be a fraction in (0, 1), e.g. 0.05, got {loss!r}")
    check(spec.deployed is None or (isinstance(spec.deployed, str) and spec.deployed.strip() != ""), k,
          f"deployed must be the name of an arm of --specperf-arms, got {spec.deployed!r}")
