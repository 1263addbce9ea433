"""The cost and acceptance model of one request: prefill time, decode step times, accepted drafts.

All times here are model times in milliseconds (speed 1); the engine divides them by ``speed``.

- prefill: ``prompt_tokens / prefill_tokens_per_s``; it also yields the first token.
- decode step of a batch (``decode_step_ms``): ``step_ms + draft_ms_per_token * k
  + step_ms_per_seq * (B - 1) + step_ms_per_token * max(0, T - step_free_tokens)`` plus, for
  each of the B sequences, ``step_ms_per_1k_ctx * c + step_ms_per_1k_ctx_sq * c**2
  + step_ms_per_1k_generated * g`` with ``c`` its current context (prompt + generated) and ``g``
  its tokens generated so far, both in thousands; ``k`` is the longest draft in the step and
  ``T`` the tokens verified (drafts + one bonus per sequence). Alone (B = 1) this is the
  single-request step time. The whole step is then scaled by ``1 + jitter * N(0, 1)`` (clamped)
  drawn by its oldest sequence, so a seeded request alone draws exactly as before.
- acceptance: each step drafts ``num_speculative_tokens`` tokens (default ``max_accept - 1``;
  fewer near ``max_tokens``, so no draft is wasted); draft position i is accepted with a constant
  conditional probability ``p`` while every earlier one was, so P(at least i accepted) = p**i. ``p`` solves
  ``p + p**2 + ... + p**k = L - 1`` for the mean length L (bonus included) of the content kind,
  the same geometric schedule as llama.cpp's ``--spec-synth-len``. L == max_accept gives p == 1.
  With ``accept_dist: min-variance`` (vLLM's synthetic_acceptance_length schedule) a step
  accepts floor(L - 1) drafts plus one more with probability frac(L - 1) instead.
  ``speculation: false`` drafts nothing: every step emits one token.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_specperf.sim.profile import Profile


@functools.lru_cache(maxsize=256)
def conditional_accept_prob(mean_len: float, drafts: int) -> float:
    """``p`` with ``p + p**2 + ... + p**drafts == mean_len - 1`` (bisection; exact at the ends)."""
    target = mean_len - 1.0
    if drafts <= 0 or target <= 0:
        return 0.0
    if target >= drafts:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        total = sum(mid ** i for i in range(1, drafts + 1))
        lo, hi = (mid, hi) if total < target else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Step:
    """One decode step of one request as the model plans it (model milliseconds)."""

    tokens: int  # tokens emitted: accepted drafts + the bonus token
    accepted: int
    drafted: int
    step_ms: float  # the step's time with this request alone (jitter included)
    ctx: int  # context length when the step starts
    jitter: float = 1.0  # the relative jitter this request drew for the step


def seq_ms(profile: Profile, ctx: int, generated: int) -> float:
    """What one sequence adds to a step: attention over its context and fragmentation (model ms)."""
    p = profile
    c = ctx / 1000.0
    return p.step_ms_per_1k_ctx * c + p.step_ms_per_1k_ctx_sq * c * c + p.step_ms_per_1k_generated * generated / 1000.0


def decode_step_ms(profile: Profile, seqs: Iterable[tuple[int, int, int]]) -> float:
    """A decode step's time without jitter for sequences given as (ctx, generated, drafted); 0 when none."""
    p = profile
    batch = verified = longest = 0
    attention = 0.0
    for ctx, generated, drafted in seqs:
        batch += 1
        attention += seq_ms(p, ctx, generated)
        verified += drafted + 1
        longest = max(longest, drafted)
    if batch == 0:
        return 0.0
    return (p.step_ms + p.draft_ms_per_token * longest + p.step_ms_per_seq * (batch - 1) + attention
            + p.step_ms_per_token * max(0, verified - p.step_free_tokens))


class RequestModel:
    """Draws one request's step times and acceptance; deterministic for a given rng seed."""

    def __init__(self, profile: Profile, prompt_tokens: int, kind: str, seed: int,
                 category: str | None = None) -> None:
        self.profile = profile
        self.prompt_tokens = prompt_tokens
        self.kind = kind
        self.category = category  # the profile's category of the prompt text, if any
        self.rng = random.Random(seed)
        self.reasoning = 0  # the first N output tokens are the reasoning phase (chat with reasoning_tokens)
        self.cached_tokens = 0  # prompt tokens the prefix cache holds: their prefill is skipped

    def prefill_ms(self) -> float:
        """Prefill time, proportional to the uncached prompt tokens (no jitter: prefill is compute-bound)."""
        return 1000.0 * (self.prompt_tokens - self.cached_tokens) / self.profile.prefill_tokens_per_s

    def in_reasoning(self, generated: int) -> bool:
        """Whether the step after ``generated`` tokens is a reasoning-phase step."""
        return generated < self.reasoning

    def drafts(self, remaining: int) -> int:
        """Drafts proposed with ``remaining`` tokens still allowed: none past the end, none without speculation."""
        return max(0, min(self.profile.drafts_per_step, remaining - 1))

    def base_step_ms(self, generated: int, drafted: int | None = None) -> float:
        """Step time alone, without jitter, after ``generated`` tokens (full drafts unless ``drafted``)."""
        if drafted is None:
            drafted = self.drafts(self.profile.drafts_per_step + 1)
        return decode_step_ms(self.profile, [(self.prompt_tokens + generated, generated, drafted)])

    def _accepted(self, generated: int, drafted: int) -> int:
        p = self.profile
        if not p.speculation:
            return 0
        # a category's acceptance is the answer's; the reasoning phase follows its own kind
        category = self.category if not self.in_reasoning(generated) else None
        mean = p.accept_mean(p.phase_kind(self.kind, generated, self.reasoning), generated, category)
        if p.accept_dist == "min-variance":
            whole = int(mean - 1.0)
            return min(drafted, whole + (1 if self.rng.random() < (mean - 1.0 - whole) else 0))
        prob = conditional_accept_prob(mean, p.max_accept - 1)
        accepted = 0
        if prob >= 1.0:
            return drafted
        if prob > 0.0:
            while accepted < drafted and self.rng.random() < prob:
                accepted += 1
        return accepted

    def step(self, generated: int, remaining: int) -> Step:
        """Plan the next step after ``generated`` tokens with ``remaining`` still allowed (>= 1)."""
        p = self.profile
        drafted = self.drafts(remaining)
        accepted = self._accepted(generated, drafted)
        factor = 1.0
        if p.jitter > 0:
            # clamp so a rare large draw cannot make a step negative or absurdly short
            factor = min(2.0, max(0.2, 1.0 + p.jitter * self.rng.gauss(0.0, 1.0)))
        return Step(tokens=accepted + 1, accepted=accepted, drafted=drafted,
                    step_ms=self.base_step_ms(generated, drafted) * factor, ctx=self.prompt_tokens + generated,
                    jitter=factor)


def plan(profile: Profile, prompt_tokens: int, kind: str, max_tokens: int, seed: int = 0) -> tuple[float, list[Step]]:
    """A whole single-request generation without a clock: (prefill_ms, decode steps); for fitting."""
    model = RequestModel(profile, prompt_tokens, kind, seed)
    steps: list[Step] = []
    generated = 1
    while generated < max_tokens:
        s = model.step(generated, max_tokens - generated)
        steps.append(s)
        generated += s.tokens
    return model.prefill_ms(), steps


def expected_two_point(profile: Profile, prompt_tokens: int, kind: str = "prose", short: int = 8, long: int = 264,
                       seeds: int = 20) -> float:
    """Mean two-point decode rate (tok/s at speed 1) the model gives, averaged over ``seeds`` draws."""
    rates = []
    for seed in range(seeds):
        t = []
        for n in (short, long):
            pre, steps = plan(profile, prompt_tokens, kind, n, seed * 2 + (n == long))
            t.append(pre + sum(s.step_ms for s in steps))
        rates.append((long - short) / ((t[1] - t[0]) / 1000.0))
    return sum(rates) / len(rates)


def expected_sustained(profile: Profile, prompt_tokens: int, kind: str, tokens: int, seeds: int = 5) -> float:
    """Mean client rate (tokens / whole request time, tok/s at speed 1) for one long generation."""
    rates = []
    for seed in range(seeds):
        pre, steps = plan(profile, prompt_tokens, kind, tokens, seed)
        rates.append(tokens / ((pre + sum(s.step_ms for s in steps)) / 1000.0))
    return sum(rates) / len(rates)


def expected_step_tokens(profile: Profile, kind: str = "prose", drafts: int | None = None) -> float:
    """Mean tokens one decode step emits (bonus included) with ``drafts`` drafts (default the profile's own)."""
    p = profile
    k = p.drafts_per_step if drafts is None else drafts
    if k <= 0:
        return 1.0
    mean = p.accept_len[kind]
    if p.accept_dist == "min-variance":
        whole = int(mean - 1.0)
        return 1.0 + (k if k <= whole else whole + (mean - 1.0 - whole))
    prob = conditional_accept_prob(mean, p.max_accept - 1)
    return 1.0 + sum(prob ** i for i in range(1, k + 1))


def expected_user_tps(profile: Profile, users: int, prompt_tokens: int, tokens: int, kind: str = "prose") -> float:
    """The per-user decode rate (tok/s at speed 1) the profile implies with ``users`` sequences decoding together.

    Steady state, jitter averaged out: every step holds all ``users`` sequences at the context they reach
    half-way through ``tokens``, each drafting the profile's ``drafts_per_step`` and emitting
    ``expected_step_tokens``. The truth against which arms that differ by speculative tokens are checked.
    """
    k = profile.drafts_per_step
    mid = tokens // 2
    step = decode_step_ms(profile, [(prompt_tokens + mid, mid, k)] * users)
    return expected_step_tokens(profile, kind) / (step / 1000.0)
