"""A/B per prompt category: speculation's speedup for each category of a case over a prompt file.

The samples are trials, as for the crossover (``crossover.speedup_level``): a trial gives one value per
category, the median decode rate of that category's streams in it, and both arms send the same prompts
(the draw is seeded by the case). The speedup is B over A, its interval Welch's in log space (or the
prediction / noise-floor fallbacks with few trials); ``n_a`` and ``n_b`` say how many trials it rests on.
The intervals are joint over the case's categories (each at ``ALPHA / categories`` per side), so identical
arms show some category below 1 at most ``ALPHA`` of the time however many categories the file has.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_specperf.cases.json_form import OMIT
from pytest_specperf.cases.result_parts import CategoryFigures
from pytest_specperf.cases.results import CapacityResult, LoadSweepResult, RateResult, Result, SustainedResult
from pytest_specperf.compare.crossover import log_interval, speedup_level
from pytest_specperf.compare.trials import ALPHA, Case, read

#: Figures a combined row shows per category as the median over an arm's trials.
MEDIANS = ("decode_tps_p50", "decode_tps_p10", "ttft_p50_s", "accept_len", "accept_rate", "drift",
           "prompt_tokens_p50", "attainment")


def _trial_values(arm: Sequence[Case], category: str) -> list[float]:
    out = []
    for r in arm:
        f = (read(r, "categories") or {}).get(category) or {}
        v = read(f, "decode_tps_p50")
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            out.append(float(v))
    return out


def _carried(figures: CategoryFigures, key: str) -> bool:
    """Whether ``figures`` carries ``key`` in its JSON (an optional figure, ``OMIT``, only while it is set)."""
    f = next(f for f in dataclasses.fields(figures) if f.name == key)
    return getattr(figures, key) is not None or not all(f.metadata.get(k) for k in OMIT)


def combine(arm: Sequence[Result]) -> dict[str, CategoryFigures] | None:
    """One arm's categories over its trials: counts summed, figures the median over trials."""
    rows = [c for r in arm if isinstance(c := getattr(r, "categories", None), dict)]
    if not rows:
        return None
    out: dict[str, CategoryFigures] = {}
    for cat in dict.fromkeys(c for row in rows for c in row):  # a category's name is data: a key
        got = [f for row in rows if isinstance(f := row.get(cat), CategoryFigures)]
        changes: dict[str, Any] = {"n": sum(int(g.n or 0) for g in got), "trials": len(got)}
        for key in MEDIANS:
            if not any(_carried(g, key) for g in got):
                continue  # a figure no trial has (an open-loop one of a closed-loop case): the record leaves it out
            values = [v for g in got for v in [getattr(g, key)]
                      if isinstance(v, int | float) and not isinstance(v, bool)]
            changes[key] = float(np.median(values)) if values else None
        out[cat] = dataclasses.replace(got[-1], **changes)
    return out


def apply(summary: Result, arm_a: Sequence[Case], arm_b: Sequence[Result]) -> None:
    """Put B's categories over its trials into ``summary``, each with its speedup over A and interval."""
    combined = combine(arm_b)
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
    if isinstance(summary, SustainedResult | LoadSweepResult | RateResult | CapacityResult):  # kinds with categories
        summary.categories = combined
