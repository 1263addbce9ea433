"""A/B per prompt category: speculation's speedup for each category of a case over a prompt file.

The samples are trials, as for the crossover (``crossover.speedup_level``): a trial gives one value per
category, the median decode rate of that category's streams in it, and both arms send the same prompts
(the draw is seeded by the case). The speedup is B over A, its interval Welch's in log space (or the
prediction / noise-floor fallbacks with few trials); ``n_a`` and ``n_b`` say how many trials it rests on.
The intervals are joint over the case's categories (each at ``ALPHA / categories`` per side), so identical
arms show some category below 1 at most ``ALPHA`` of the time however many categories the file has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_specperf.cases.figures import Case
from pytest_specperf.cases.result_parts import CategoryFigures
from pytest_specperf.cases.results import (
    CapacityResult,
    LoadLevel,
    LoadSweepResult,
    RateResult,
    Result,
    SustainedResult,
)
from pytest_specperf.compare.crossover import log_interval, speedup_level
from pytest_specperf.compare.trials import ALPHA


def categories_of(r: Case) -> dict[str, CategoryFigures] | None:
    """A result's (or a load level's) figures per category; None for a kind without them."""
    if isinstance(r, SustainedResult | LoadSweepResult | RateResult | CapacityResult | LoadLevel):
        return r.categories
    return None


def _trial_values(arm: Sequence[Case], category: str) -> list[float]:
    out = []
    for r in arm:
        f = (categories_of(r) or {}).get(category)
        v = None if f is None else f.decode_tps_p50
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            out.append(float(v))
    return out


def apply(summary: Result, arm_a: Sequence[Case], arm_b: Sequence[Result]) -> None:
    """Give each of B's categories over its trials (``summary``'s, as ``measure.combine.ab_row`` combines them) its
    speedup over A and interval."""
    combined = categories_of(summary)
    if combined is None:
        return
    measured = {cat: (_trial_values(arm_a, cat), _trial_values(arm_b, cat)) for cat in combined}
    measured = {cat: (a, b) for cat, (a, b) in measured.items() if a and b}
    for cat, (a, b) in measured.items():
        f = combined[cat]
        # joint over the categories (Bonferroni): "some category below" holds the case's rate, not one category's
        d, lo, hi, method = log_interval(np.log(a), np.log(b), ALPHA / len(measured))
        lv = speedup_level(0, a, b, 1.0)
        f.speedup, f.speedup_interval = lv.speedup, [math.exp(min(lo, d)), math.exp(max(hi, d))]
        f.speedup_method, f.speedup_family = method, len(measured)
        f.speedup_n_a, f.speedup_n_b, f.a_decode_tps = lv.n_a, lv.n_b, lv.a_decode_tps
