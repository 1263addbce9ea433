"""The ``session`` case spec: multi-turn conversations, each turn sent with the conversation so far."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pytest_specperf.cases.base import CaseSpec, check, is_number

#: Most sessions one case runs at once (each turn's answer is parsed as it ends, so one event loop spends more per
#: stream than in other load cases; with workers they are dealt out, scale/pool.py).
MAX_SESSIONS = 512

#: Most turns one conversation has. Every turn resends the whole conversation, so the work grows with the
#: square of the turns, and a conversation longer than this outgrows any server's context long before.
MAX_TURNS = 1000


@dataclass(frozen=True, kw_only=True)
class SessionSpec(CaseSpec):
    """Multi-turn conversations: per-turn TTFT and decode, prompt and cached tokens, the cache-hit share.

    ``users`` sessions run at once, each ``turns`` turns long; a turn sends the conversation so far
    (every earlier user message and the model's own answers) plus a new user message, and waits
    ``think_s`` after each answer. ``ctx`` is the first user message's length in tokens, ``turn_ctx``
    each later one's; ``prompts`` takes the user messages from a prompt file instead (a record's own
    later turns where it has them).
    """

    KIND: ClassVar[str] = "session"
    ctx: int = 256  # the first user message, in tokens
    api: str = "chat"
    turns: int = 4
    tokens: int = 64  # generated per turn
    users: int = 1  # sessions at once
    think_s: float = 0.0  # pause between an answer and the next turn
    turn_ctx: int = 32  # each later user message, in tokens (generated text of ``content``)
    # prompts= (CaseSpec's, with prompts_format, sample, categories): the user turns from a prompt file
    min_cache_hit: float | None = None  # floor on the cached share of later turns' prompt tokens
    # Ceiling on the p90 turn's time to first token: a session judges its tail of turns (unlike a load case, whose
    # max_ttft_s reads the median request), kept so; max_ttft_p90_s says the same explicitly
    max_ttft_s: float | None = None
    max_ttft_p90_s: float | None = None  # ceiling on the p90 turn's time to first token
    max_ttft_p99_s: float | None = None  # ceiling on the p99 turn's time to first token
    max_ttft_content_s: float | None = None  # ceiling on the p90 turn's time to first answer token

    def validate(self) -> None:
        super().validate()
        k = self.KIND
        for name, lo in (("turns", 1), ("tokens", 2), ("users", 1), ("turn_ctx", 1)):
            v = getattr(self, name)
            check(isinstance(v, int) and not isinstance(v, bool) and v >= lo, k,
                  f"{name} must be an integer >= {lo}, got {v!r}")
        # Bounds known before anything is sent: each session holds its conversation and its streams at once.
        check(self.users <= MAX_SESSIONS, k, f"users={self.users} is above {MAX_SESSIONS}, the most sessions "
              f"one case runs at once (one client process reads them all); lower it to {MAX_SESSIONS} or less")
        check(self.turns <= MAX_TURNS, k, f"turns={self.turns} is above {MAX_TURNS}, the most turns one conversation "
              f"has (each turn resends all earlier ones); lower it to {MAX_TURNS} or less")
        check(is_number(self.think_s) and self.think_s >= 0, k,
              f"think_s must be a number of seconds >= 0, got {self.think_s!r}")
        check(self.min_tps is None or is_number(self.min_tps), k,
              f"min_tps must be one number of tokens/s (a session has no per-category floors), got {self.min_tps!r}")
        check(self.min_cache_hit is None or (is_number(self.min_cache_hit) and 0 < self.min_cache_hit <= 1), k,
              f"min_cache_hit must be a fraction in (0, 1], got {self.min_cache_hit!r}")
        check(self.min_cache_hit is None or self.turns >= 2, k,
              "min_cache_hit needs turns >= 2 (the first turn has no conversation to reuse); raise turns")
        for name in ("max_ttft_s", "max_ttft_p90_s", "max_ttft_p99_s", "max_ttft_content_s"):
            v = getattr(self, name)
            check(v is None or (is_number(v) and v > 0), k, f"{name} must be a positive number of seconds, got {v!r}")
        check(self.max_ttft_s is None or self.max_ttft_p90_s is None, k,
              "max_ttft_s and max_ttft_p90_s both bound a session's p90 turn TTFT; give one (max_ttft_p90_s)")
