"""Coverage of the per-category A/B speedup interval (``compare/categories.py``), per trials and noise.

Seeded A/B comparisons of one case over a prompt file: each arm runs ``trials`` trials; in a trial each
category has ``streams`` streams whose decode is ``100 * speedup_c * exp(offset_trial + e_stream)`` with
``offset ~ N(0, between)`` shared by the trial's streams and ``e ~ N(0, within)`` per stream (log scale).
A trial gives one value per category (the median of its streams), and the speedup's interval is the
crossover's (Welch on the logs, 98 % two-sided). Per condition it prints how often the interval holds the
true speedup of each category (stated: 98 %) and its median width.

Run: ``python benchmarks/category_speedup.py`` (about a minute; ``--comparisons 200`` for a quick look).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import categories
from pytest_specperf.measure import combine

SPEEDUPS = {"qa": 1.3, "tool_call": 2.2, "math_reasoning": 1.0}
CONDITIONS = [  # (trials per arm, between-trial sd, within-trial sd, streams per category and trial)
    (3, 0.02, 0.02, 1), (3, 0.02, 0.02, 4), (5, 0.00, 0.03, 2), (5, 0.03, 0.02, 3), (5, 0.05, 0.05, 3),
    (10, 0.03, 0.02, 3),
]


def _sustained(cats: dict[str, dict[str, Any]] | None = None) -> Result:
    """A sustained result (a trial, or the summary) with ``cats``, its figures per category."""
    return load_result({"kind": "sustained", "endpoint": "", "model": "sim", "server": "sim", "ctx": 0,
                        "prompt_tokens": None, "categories": cats})


def arm(rng: np.random.Generator, trials: int, between: float, within: float, streams: int, on: bool
        ) -> list[Result]:
    """One arm's sustained results, one per trial, each with its figures per category."""
    out = []
    for _ in range(trials):
        offset = rng.normal(0, between)
        cats = {}
        for cat, speedup in SPEEDUPS.items():
            tps = 100 * (speedup if on else 1.0) * np.exp(offset + rng.normal(0, within, streams))
            cats[cat] = {"n": streams, "decode_tps_p50": float(np.median(tps))}
        out.append(_sustained(cats))
    return out


def coverage(rng: np.random.Generator, n: int, trials: int, between: float, within: float, streams: int
             ) -> tuple[float, float]:
    """(share of intervals holding the true speedup, median relative width) over ``n`` comparisons."""
    held, widths = [], []
    for _ in range(n):
        summary = _sustained()
        a = arm(rng, trials, between, within, streams, on=False)
        b = arm(rng, trials, between, within, streams, on=True)
        summary.categories = combine.combine_categories(b)  # B's trials combined, as measuring hands them over
        categories.apply(summary, a, b)
        for cat, true in SPEEDUPS.items():
            lo, hi = summary.categories[cat].speedup_interval  # type: ignore[attr-defined]
            held.append(lo <= true <= hi)
            widths.append((hi - lo) / true)
    return float(np.mean(held)), float(np.median(widths))


def main() -> None:
    """Print one row per condition."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--comparisons", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="50 comparisons per condition: a check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.comparisons = 50
    rng = np.random.default_rng(20261203)
    print("trials  between  within  streams  coverage (stated 0.98)  median width")
    for trials, between, within, streams in CONDITIONS:
        cov, width = coverage(rng, args.comparisons, trials, between, within, streams)
        print(f"{trials:6d}  {between:7.2f}  {within:6.2f}  {streams:7d}  {cov:22.3f}  {width:12.3f}")


if __name__ == "__main__":
    main()
