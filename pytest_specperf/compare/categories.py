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
from typing import Any

import numpy as np

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


def combine(arm: list[dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """One arm's categories over its trials: counts summed, figures the median over trials."""
    rows = [c for r in arm if isinstance(c := r.get("categories"), dict)]  # untyped part: trial rows
    if not rows:
        return None
    out: dict[str, dict[str, Any]] = {}
    for cat in dict.fromkeys(c for row in rows for c in row):
        got = [row[cat] for row in rows if isinstance(row.get(cat), dict)]
        n = sum(int(g.get("n") or 0) for g in got)  # untyped part: trial rows
        f: dict[str, Any] = {**got[-1], "n": n, "trials": len(got)}
        for key in MEDIANS:
            if not any(key in g for g in got):
                continue  # a figure no trial has (an open-loop one of a closed-loop case): the record leaves it out
            values = [g[key] for g in got if isinstance(g.get(key), int | float) and not isinstance(g.get(key), bool)]
            f[key] = float(np.median(values)) if values else None
        out[cat] = f
    return out


def apply(summary: dict[str, Any], arm_a: Sequence[Case], arm_b: list[dict[str, Any]]) -> None:
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
        f.update(speedup=lv.speedup, speedup_interval=[math.exp(min(lo, d)), math.exp(max(hi, d))],
                 speedup_method=method, speedup_n_a=lv.n_a, speedup_n_b=lv.n_b, a_decode_tps=lv.a_decode_tps,
                 speedup_family=len(measured))
    summary["categories"] = combined
