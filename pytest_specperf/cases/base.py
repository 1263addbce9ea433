"""What every case spec shares: the base class, its validation helpers and the trial constants.

Specs are frozen dataclasses validated once, the same way for markers, YAML cases and direct calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeGuard

from pytest_specperf.cases.lengths import DERIVED, DRAWN_KINDS, Lengths
from pytest_specperf.cases.prompt_cases import check_prompts
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.content_kinds import CONTENT_KINDS

#: Fewest tokens a sustained case needs for drift to be judged: 8 windows of 32 decode tokens, plus a
#: first chunk (TTFT's) of up to 8 tokens.
MIN_DRIFT_TOKENS = 264
APIS = ("completions", "chat")
#: ``prefix_cache=``: what a server's prefix cache may serve of a case's prompts.
PREFIX_CACHE_MODES = ("cold", "warm")
#: trials repeat="auto" always takes (the sequential test's first look; sequential.MIN_TRIALS).
AUTO_MIN_TRIALS = 3
#: trials repeat="auto" takes at most unless max_repeat says otherwise.
AUTO_MAX_REPEAT = 20


def check(cond: bool, kind: str, message: str) -> None:
    """A usage error naming the case kind unless ``cond`` holds."""
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
    # A prompt file instead of built prompts (cases/prompt_cases.py): its path (resolved against the case
    # file when the spec is built) or builtin:NAME, its format, a reproducible sample and a category filter.
    prompts: str | None = None
    prompts_format: str | None = None
    sample: int | None = None
    categories: tuple[str, ...] | None = None
    # "cold" (default): every request opens with a tag no earlier request sent, so no prefix cache serves its
    # prefill (prompts/cold.py); "warm": the same prompt text every time, sent once untimed before it is
    # measured, for figures of a cached prefill. A session's later turns reuse their conversation either way.
    prefix_cache: str = "cold"
    # ``tokens=`` and ``ctx=`` given as a distribution (cases/lengths.py), parsed when the spec is built; the keyword
    # itself then holds the longest length it draws (what the server's context must fit).
    tokens_dist: Lengths | None = field(default=None, metadata=DERIVED)
    ctx_dist: Lengths | None = field(default=None, metadata=DERIVED)

    def validate(self) -> None:
        """Raise ConfigError naming the keyword when a value is out of range."""
        k = self.KIND
        check((self.tokens_dist is None and self.ctx_dist is None) or k in DRAWN_KINDS, k,
              "a distribution of lengths applies to sustained(concurrency=N), load_sweep, rate and capacity")
        check(self.ctx_dist is None or self.prompts is None, k,
              f"ctx={self.ctx_dist.text if self.ctx_dist else ''!r} draws prompt lengths, but prompts= sends a file's "
              "prompts at their own lengths; drop one of them")
        check(isinstance(self.ctx, int) and self.ctx >= 1, k, f"ctx must be a positive integer, got {self.ctx!r}")
        check(self.content in CONTENT_KINDS, k, f"content must be one of {', '.join(CONTENT_KINDS)}, "
               f"got {self.content!r}")
        check(self.repeat == "auto" or (isinstance(self.repeat, int) and not isinstance(self.repeat, bool)
                                         and self.repeat >= 1), k,
               f"repeat must be an integer >= 1 or 'auto', got {self.repeat!r}")
        check(self.max_repeat is None or self.repeat == "auto", k,
               f"max_repeat applies to repeat='auto' only, got repeat={self.repeat!r}; drop max_repeat or set "
               "repeat='auto'")
        check(self.max_repeat is None or (isinstance(self.max_repeat, int) and not isinstance(self.max_repeat, bool)
                                           and self.max_repeat >= AUTO_MIN_TRIALS), k,
               f"max_repeat must be an integer >= {AUTO_MIN_TRIALS} (the sequential test's first look), "
               f"got {self.max_repeat!r}")
        if self.prompts is None or not isinstance(self.min_tps, Mapping):  # per category: check_prompts
            check(self.min_tps is None or (is_number(self.min_tps) and self.min_tps > 0), k,
                   f"min_tps must be a positive number of tokens/s, got {self.min_tps!r}")
        check(self.api in APIS, k, f"api must be one of {', '.join(APIS)}, got {self.api!r}")
        check(self.prefix_cache in PREFIX_CACHE_MODES, k,
               f"prefix_cache must be 'cold' (every request's prefill uncached) or 'warm' (the same prompt, "
               f"cached), got {self.prefix_cache!r}")
        check(self.max_regression is None or (is_number(self.max_regression) and 0 < self.max_regression < 1), k,
               f"max_regression must be a fraction in (0, 1), got {self.max_regression!r}")
        check(is_number(self.temperature) and 0 <= self.temperature <= 2, k,
               f"temperature must be a number in [0, 2], got {self.temperature!r}")
        check_prompts(self)

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for reports and JSON."""
        return dataclasses.asdict(self)


def is_number(x: object) -> TypeGuard[float]:
    """A real number (a bool is not one)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


