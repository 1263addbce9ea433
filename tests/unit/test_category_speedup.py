"""A/B per category: the speedup interval's error rate in a seeded simulation (benchmarks/category_speedup.py
runs the same model at 1,000 comparisons a condition), and how an arm's trials combine per category."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import categories
from pytest_specperf.measure import combine
from tests.support.result_json import full

TRUE = {"qa": 1.3, "tool_call": 2.2}


def _trial(cats: dict[str, dict[str, Any]] | None = None) -> Result:
    """A sustained trial (or summary) whose figures per category are ``cats``."""
    return load_result(full({"kind": "sustained", "categories": cats}))


def _arm(rng: np.random.Generator, on: bool, trials: int = 5, streams: int = 3) -> list[Result]:
    out = []
    for _ in range(trials):
        offset = rng.normal(0, 0.03)  # the trial's shared offset: the engine, the machine
        cats = {c: {"n": streams, "decode_tps_p50": float(np.median(
            100 * (s if on else 1.0) * np.exp(offset + rng.normal(0, 0.02, streams))))} for c, s in TRUE.items()}
        out.append(_trial(cats))
    return out


def test_the_interval_holds_each_categorys_true_speedup_as_often_as_stated() -> None:
    rng = np.random.default_rng(7)
    held = []
    for _ in range(300):
        summary = _trial()
        a, b = _arm(rng, False), _arm(rng, True)
        summary.categories = combine.combine_categories(b)  # B's trials combined, as measuring hands them over
        categories.apply(summary, a, b)
        for cat, true in TRUE.items():
            lo, hi = summary.categories[cat].speedup_interval  # type: ignore[attr-defined]
            held.append(lo <= true <= hi)
    # stated 98 %; 600 intervals: 95 % is more than 4 standard errors below it
    assert np.mean(held) >= 0.95, np.mean(held)


def test_an_arms_trials_combine_per_category() -> None:
    def row(v: float, accept: float | None) -> Result:
        return _trial({"qa": {"n": 2, "n_prompts": 2, "decode_tps_p50": v, "accept_len": accept}})

    a, b = [row(v, None) for v in (10, 30, 20)], [row(v, 3.0) for v in (40, 20, 60)]
    summary = _trial()
    summary.categories = combine.combine_categories(b)
    categories.apply(summary, a, b)
    qa = summary.categories["qa"]  # type: ignore[attr-defined]
    assert (qa.n, qa.trials, qa.decode_tps_p50, qa.accept_len) == (6, 3, 40.0, 3.0)
    assert qa.speedup_n_a == qa.speedup_n_b == 3
    assert abs(qa.speedup - (40 * 20 * 60 / (10 * 30 * 20)) ** (1 / 3)) < 1e-9  # geometric means' ratio
    assert combine.combine_categories([_trial()]) is None
