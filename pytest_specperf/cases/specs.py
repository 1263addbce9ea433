"""Case specs: what a marker or a YAML case asks to measure, validated into frozen dataclasses.

The same classes serve ``@pytest.mark.sustained(...)``, YAML cases and direct calls such as
``specperf.sustained(tokens=300, ctx=1000)``, so every route validates alike.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.kinds import CONTENT_KINDS

#: Fewest tokens a sustained case needs for drift to be judged: 8 windows of 32 decode tokens, plus a
#: first chunk (TTFT's) of up to 8 tokens.
MIN_DRIFT_TOKENS = 264
APIS = ("completions", "chat")
#: trials repeat="auto" always takes (the sequential test's first look; sequential.MIN_TRIALS).
AUTO_MIN_TRIALS = 3
#: trials repeat="auto" takes at most unless max_repeat says otherwise.
AUTO_MAX_REPEAT = 20


def _check(cond: bool, kind: str, message: str) -> None:
    if not cond:
        raise ConfigError(f"{kind}(): {message}")


@dataclass(frozen=True, kw_only=True)
class CaseSpec:
    """Fields shared by every kind of case."""

    KIND: ClassVar[str] = ""
    ctx: int = 1000
    content: str = "prose"
    # Trials (streams of a sustained case, two-point pairs): a number, or "auto": trials are added until the
    # drift gate and any comparison (baseline, A/B) are decided, at most max_repeat (compare/sequential.py).
    repeat: int | str = 1
    max_repeat: int | None = None  # only with repeat="auto"; None: AUTO_MAX_REPEAT
    min_tps: float | None = None
    api: str = "completions"
    max_regression: float | None = None  # None: --specperf-max-regression
    # Sampling temperature of every request. 0 (greedy) is reproducible; acceptance depends on it,
    # so a case that guards a served configuration can ask for the temperature it serves.
    temperature: float = 0.0

    def validate(self) -> None:
        """Raise ConfigError naming the keyword when a value is out of range."""
        k = self.KIND
        _check(isinstance(self.ctx, int) and self.ctx >= 1, k, f"ctx must be a positive integer, got {self.ctx!r}")
        _check(self.content in CONTENT_KINDS, k, f"content must be one of {', '.join(CONTENT_KINDS)}, "
               f"got {self.content!r}")
        _check(self.repeat == "auto" or (isinstance(self.repeat, int) and not isinstance(self.repeat, bool)
                                         and self.repeat >= 1), k,
               f"repeat must be an integer >= 1 or 'auto', got {self.repeat!r}")
        _check(self.max_repeat is None or self.repeat == "auto", k,
               f"max_repeat applies to repeat='auto' only, got repeat={self.repeat!r}; drop max_repeat or set "
               "repeat='auto'")
        _check(self.max_repeat is None or (isinstance(self.max_repeat, int) and not isinstance(self.max_repeat, bool)
                                           and self.max_repeat >= AUTO_MIN_TRIALS), k,
               f"max_repeat must be an integer >= {AUTO_MIN_TRIALS} (the sequential test's first look), "
               f"got {self.max_repeat!r}")
        _check(self.min_tps is None or (_is_number(self.min_tps) and self.min_tps > 0), k,
               f"min_tps must be a positive number of tokens/s, got {self.min_tps!r}")
        _check(self.api in APIS, k, f"api must be one of {', '.join(APIS)}, got {self.api!r}")
        _check(self.max_regression is None or (_is_number(self.max_regression) and 0 < self.max_regression < 1), k,
               f"max_regression must be a fraction in (0, 1), got {self.max_regression!r}")
        _check(_is_number(self.temperature) and 0 <= self.temperature <= 2, k,
               f"temperature must be a number in [0, 2], got {self.temperature!r}")

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for reports and JSON."""
        return dataclasses.asdict(self)


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


@dataclass(frozen=True, kw_only=True)
class SustainedSpec(CaseSpec):
    """A long streamed generation: decode rate, drift between early and late windows, TTFT."""

    KIND: ClassVar[str] = "sustained"
    tokens: int = 1500
    max_drift: float | None = None  # None: the ini default (specperf_max_drift)
    max_burst_gap: float | None = None
    max_ttft_s: float | None = None
    min_accept_len: float | None = None
    max_accept_drop: float | None = None
    require_speculation: bool = False
    concurrency: int = 1  # streams at once (users); > 1 makes it a load case
    ramp_s: float = 0.0  # starts spread evenly over this many seconds (0: all together)
    min_total_tps: float | None = None  # floor on aggregate output tok/s while all streams decode

    def validate(self) -> None:
        super().validate()
        k = self.KIND
        validate_load(self, k)
        _check(self.concurrency == 1 or (self.repeat == 1 and self.max_burst_gap is None), k,
               f"concurrency={self.concurrency} runs its streams at once: drop repeat and max_burst_gap "
               "(they measure one stream at a time)")
        _check(isinstance(self.tokens, int) and self.tokens >= 16, k,
               f"tokens must be an integer >= 16, got {self.tokens!r}")
        for name in ("max_drift", "max_burst_gap", "max_accept_drop"):
            v = getattr(self, name)
            _check(v is None or (_is_number(v) and 0 < v < 1), k, f"{name} must be a fraction in (0, 1), got {v!r}")
        _check(self.max_drift is None or self.tokens >= MIN_DRIFT_TOKENS, k,
               f"max_drift needs tokens >= {MIN_DRIFT_TOKENS} (drift is judged over 8 windows of 32 decode tokens), "
               f"got tokens={self.tokens}; raise tokens or drop max_drift")
        _check(self.max_ttft_s is None or (_is_number(self.max_ttft_s) and self.max_ttft_s > 0), k,
               f"max_ttft_s must be a positive number of seconds, got {self.max_ttft_s!r}")
        _check(self.min_accept_len is None or (_is_number(self.min_accept_len) and self.min_accept_len >= 1), k,
               f"min_accept_len must be a number >= 1 (tokens per step), got {self.min_accept_len!r}")
        _check(isinstance(self.require_speculation, bool), k,
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
        _check(isinstance(self.short, int) and self.short >= 1, k, f"short must be an integer >= 1, got {self.short!r}")
        _check(isinstance(self.long, int) and self.long > self.short, k,
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
        _check(self.repeat != "auto", k, "repeat='auto' is for sustained and two_point cases; give a sweep a "
               "number of repeats")
        _check(len(self.ctxs) >= 1 and all(isinstance(c, int) and c >= 1 for c in self.ctxs), k,
               f"ctxs must be a non-empty list of positive integers, got {list(self.ctxs)!r}")
        _check(isinstance(self.tokens, int) and self.tokens >= 8, k,
               f"tokens must be an integer >= 8, got {self.tokens!r}")
        _check(isinstance(self.short, int) and self.short >= 1, k, f"short must be an integer >= 1, got {self.short!r}")


@dataclass(frozen=True, kw_only=True)
class LoadSweepSpec(CaseSpec):
    """A sustained load at each concurrency: per-user and aggregate decode, the knee, speculation's crossover."""

    KIND: ClassVar[str] = "load_sweep"
    concurrency: tuple[int, ...] = field(default=(1, 2, 4, 8))
    tokens: int = 300
    ramp_s: float = 0.0
    max_drift: float | None = None
    # Floors: one number for every level, or {level: floor}.
    min_tps: Any = None  # type: ignore[assignment]
    min_total_tps: Any = None
    min_speedup: float | None = None  # A/B: B's per-user decode / A's at every level must reach this

    def validate(self) -> None:
        k = self.KIND
        _check(isinstance(self.concurrency, tuple) and len(self.concurrency) >= 1
               and all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in self.concurrency)
               and list(self.concurrency) == sorted(set(self.concurrency)), k,
               f"concurrency must be a rising list of positive integers, e.g. [1, 2, 4, 8], got "
               f"{list(self.concurrency)!r}")
        _concurrency_bound(self.concurrency[-1], k)
        for name in ("min_tps", "min_total_tps"):
            floors = getattr(self, name)
            if isinstance(floors, Mapping):
                bad = [c for c in floors if c not in self.concurrency]
                _check(not bad, k, f"{name} names level {bad[0] if bad else ''!r}, which is not in concurrency "
                       f"{list(self.concurrency)}")
                values = list(floors.values())
            else:
                values = [floors]
            _check(all(v is None or (_is_number(v) and v > 0) for v in values), k,
                   f"{name} must be a positive number of tokens/s or a mapping {{level: tokens/s}}, got {floors!r}")
        CaseSpec.validate(dataclasses.replace(self, min_tps=None))  # the shared keywords; floors checked above
        _check(self.repeat == 1, k, f"repeat={self.repeat}: a load sweep runs each level once; drop repeat "
               "(in A/B, --specperf-ab-trials sets the trials per arm)")
        _check(isinstance(self.tokens, int) and self.tokens >= 16, k,
               f"tokens must be an integer >= 16, got {self.tokens!r}")
        _check(_is_number(self.ramp_s) and self.ramp_s >= 0, k,
               f"ramp_s must be a number of seconds >= 0, got {self.ramp_s!r}")
        _check(self.max_drift is None or (_is_number(self.max_drift) and 0 < self.max_drift < 1), k,
               f"max_drift must be a fraction in (0, 1), got {self.max_drift!r}")
        _check(self.max_drift is None or self.tokens >= MIN_DRIFT_TOKENS, k,
               f"max_drift needs tokens >= {MIN_DRIFT_TOKENS}, got tokens={self.tokens}; raise tokens or drop it")
        _check(self.min_speedup is None or (_is_number(self.min_speedup) and self.min_speedup > 0), k,
               f"min_speedup must be a positive ratio (1.0: speculation must not slow users), got {self.min_speedup!r}")

    def floor(self, name: str, level: int) -> float | None:
        """The ``min_tps`` or ``min_total_tps`` floor at one level."""
        v = getattr(self, name)
        return v.get(level) if isinstance(v, Mapping) else v

    def level(self, c: int) -> SustainedSpec:
        """The sustained case measured at concurrency ``c``."""
        return SustainedSpec(ctx=self.ctx, content=self.content, api=self.api, temperature=self.temperature,
                             tokens=self.tokens, concurrency=c, ramp_s=self.ramp_s, max_drift=self.max_drift,
                             min_tps=self.floor("min_tps", c), min_total_tps=self.floor("min_total_tps", c))


#: Most streams one case runs at once. They are all read by one client process on one event loop;
#: past a few hundred its own per-read work and socket count (1024 open files is a common default
#: limit) are what a run would measure, and building that many prompts costs minutes before the
#: first request. A bound known before anything is sent is a usage error, not a late failure.
MAX_CONCURRENCY = 512


def _concurrency_bound(c: int, k: str) -> None:
    _check(c <= MAX_CONCURRENCY, k, f"concurrency={c} is above {MAX_CONCURRENCY}, the most streams one case runs at "
           f"once (one client process reads them all); lower it to {MAX_CONCURRENCY} or less")


def validate_load(spec: Any, k: str) -> None:
    """concurrency, ramp_s and min_total_tps of a sustained case."""
    c = spec.concurrency
    _check(isinstance(c, int) and not isinstance(c, bool) and c >= 1, k,
           f"concurrency must be an integer >= 1 (streams at once), got {c!r}")
    _concurrency_bound(c, k)
    _check(_is_number(spec.ramp_s) and spec.ramp_s >= 0, k,
           f"ramp_s must be a number of seconds >= 0, got {spec.ramp_s!r}")
    v = spec.min_total_tps
    _check(v is None or (_is_number(v) and v > 0), k,
           f"min_total_tps must be a positive number of tokens/s (aggregate over all streams), got {v!r}")


SPECS: dict[str, type[CaseSpec]] = {s.KIND: s for s in (SustainedSpec, TwoPointSpec, CtxSweepSpec, LoadSweepSpec)}

from pytest_specperf.cases import open_loop as _ratespec  # noqa: E402, F401  (adds the open-loop kinds to SPECS; they build on CaseSpec)


def marker_help() -> dict[str, str]:
    """Marker registration lines with their signatures, for ``pytest --markers``."""
    out = {}
    for kind, cls in SPECS.items():
        args = ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(cls))
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        out[kind] = f"{kind}({args}): specperf perf case. {doc}"
    return out


def build_spec(kind: str, kwargs: Mapping[str, Any], args: tuple[Any, ...] = ()) -> CaseSpec:
    """Validate marker/YAML keywords into a spec; unknown or misspelt keywords are a ConfigError."""
    if kind not in SPECS:
        raise ConfigError(f"unknown specperf case kind {kind!r}; use one of {', '.join(SPECS)}")
    cls = SPECS[kind]
    if args:
        raise ConfigError(f"{kind}() takes keyword arguments only, e.g. {kind}(ctx=1000); got positional {args!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in kwargs:
        if key not in names:
            near = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; valid keywords: {', '.join(names)}"
            raise ConfigError(f"{kind}(): unknown keyword {key!r}{hint}")
    values = dict(kwargs)
    for name in ("ctxs", "concurrency"):
        if kind != "sustained" and isinstance(values.get(name), list | tuple):
            values[name] = tuple(values[name])
    if kind == "load_sweep" and isinstance(values.get("concurrency"), int) and not isinstance(
            values["concurrency"], bool):
        values["concurrency"] = (values["concurrency"],)
    spec = cls(**values)
    spec.validate()
    return spec


def fit_spec(spec: CaseSpec, max_ctx: int, max_tokens: int, max_floor: float | None = None) -> CaseSpec:
    """The same case sized down (for a small local engine): ctx, tokens and floors capped, a sweep scaled whole."""
    changes: dict[str, Any] = {}
    if isinstance(spec, CtxSweepSpec):
        top = max(spec.ctxs)
        if top > max_ctx:
            scaled = sorted({max(16, round(c * max_ctx / top)) for c in spec.ctxs})
            changes["ctxs"] = tuple(scaled)
        if spec.tokens > max_tokens:
            changes["tokens"] = max_tokens
    else:
        if spec.ctx > max_ctx:
            changes["ctx"] = max_ctx
        for name in ("tokens", "long"):
            if getattr(spec, name, 0) > max_tokens:
                changes[name] = max_tokens
    if max_floor is not None and _is_number(spec.min_tps) and spec.min_tps > max_floor:
        changes["min_tps"] = max_floor
    return dataclasses.replace(spec, **changes) if changes else spec
