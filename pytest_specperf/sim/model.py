"""The cost and acceptance model of one request: prefill time, decode step times, accepted drafts.

All times here are model times in milliseconds (speed 1); the engine divides them by ``speed``.

- prefill: ``prompt_tokens / prefill_tokens_per_s``; it also yields the first token.
- decode step: ``step_ms + step_ms_per_1k_ctx * c + step_ms_per_1k_ctx_sq * c**2
  + step_ms_per_1k_generated * g`` with ``c`` the current context (prompt + generated) and ``g``
  the tokens generated so far, both in thousands; times ``1 + batch_slowdown * (batch - 1)``
  for ``batch`` requests decoding at once; times ``1 + jitter * N(0, 1)`` (clamped).
- acceptance: each step drafts ``max_accept - 1`` tokens (fewer near ``max_tokens``, so no
  draft is wasted); draft position i is accepted with a constant conditional probability ``p``
  while every earlier one was, so P(at least i accepted) = p**i. ``p`` solves
  ``p + p**2 + ... + p**k = L - 1`` for the mean length L (bonus included) of the content kind,
  the same geometric schedule as llama.cpp's ``--spec-synth-len``. L == max_accept gives p == 1.
  With ``accept_dist: min-variance`` (vLLM's synthetic_acceptance_length schedule) a step
  accepts floor(L - 1) drafts plus one more with probability frac(L - 1) instead.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from .profile import Profile


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
    """One decode step as the model plans it (model milliseconds)."""

    tokens: int  # tokens emitted: accepted drafts + the bonus token
    accepted: int
    drafted: int
    step_ms: float
    ctx: int  # context length when the step starts


class RequestModel:
    """Draws one request's step times and acceptance; deterministic for a given rng seed."""

    def __init__(self, profile: Profile, prompt_tokens: int, kind: str, seed: int) -> None:
        self.profile = profile
        self.prompt_tokens = prompt_tokens
        self.kind = kind
        self.rng = random.Random(seed)

    def prefill_ms(self) -> float:
        """Prefill time, proportional to prompt tokens (no jitter: prefill is compute-bound)."""
        return 1000.0 * self.prompt_tokens / self.profile.prefill_tokens_per_s

    def base_step_ms(self, generated: int) -> float:
        """Step time without batch or jitter after ``generated`` tokens (the first token counts)."""
        p = self.profile
        c = (self.prompt_tokens + generated) / 1000.0
        return (p.step_ms + p.step_ms_per_1k_ctx * c + p.step_ms_per_1k_ctx_sq * c * c
                + p.step_ms_per_1k_generated * generated / 1000.0)

    def step(self, generated: int, remaining: int, batch: int = 1) -> Step:
        """Plan the next step after ``generated`` tokens with ``remaining`` still allowed (>= 1)."""
        p = self.profile
        drafted = max(0, min(p.max_accept - 1, remaining - 1))
        mean = p.accept_mean(self.kind, generated)
        accepted = 0
        if p.accept_dist == "min-variance":
            whole = int(mean - 1.0)
            accepted = min(drafted, whole + (1 if self.rng.random() < (mean - 1.0 - whole) else 0))
        else:
            prob = conditional_accept_prob(mean, p.max_accept - 1)
            if prob >= 1.0:
                accepted = drafted
            elif prob > 0.0:
                while accepted < drafted and self.rng.random() < prob:
                    accepted += 1
        ms = self.base_step_ms(generated) * (1.0 + p.batch_slowdown * max(0, batch - 1))
        if p.jitter > 0:
            # clamp so a rare large draw cannot make a step negative or absurdly short
            ms *= min(2.0, max(0.2, 1.0 + p.jitter * self.rng.gauss(0.0, 1.0)))
        return Step(tokens=accepted + 1, accepted=accepted, drafted=drafted, step_ms=ms,
                    ctx=self.prompt_tokens + generated)


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
