"""Truth for load tests: rates computed from the simulator's per-request records of its real steps."""

from __future__ import annotations

import itertools


def true_decode(rec: dict, clock: str = "t_s") -> float:
    """Decode tok/s of one request: tokens after the first step over the time from first to last step
    (``clock``: the real writes, or ``intended_t_s`` for the model's schedule)."""
    steps = rec["steps"]
    k = sum(s["tokens"] for s in steps) - steps[0]["tokens"]
    return k / (steps[-1][clock] - steps[0][clock])


def true_aggregate(recs: list[dict], clock: str = "t_s") -> float:
    """Tokens all streams truly produced while every one of them was decoding, per second of that span.

    A step produces its tokens over the interval since the stream's previous step, so a step that
    straddles the span's edge counts in proportion to its overlap. ``clock``: the steps' real writes (``t_s``),
    or the model's schedule (``intended_t_s``: what the profile implies, whatever the host's load).
    """
    abs_steps = [[(r["arrival_monotonic"] + s[clock], s["tokens"]) for s in r["steps"]] for r in recs]
    start = max(steps[0][0] for steps in abs_steps)
    end = min(steps[-1][0] for steps in abs_steps)
    tokens = 0.0
    for steps in abs_steps:
        for (t_prev, _), (t, k) in itertools.pairwise(steps):
            overlap = min(t, end) - max(t_prev, start)
            if overlap > 0:
                tokens += k * overlap / (t - t_prev)
    return tokens / (end - start)
