"""False alarms per case: identical arms or sides, counted over everything a case judges (docs/statistics.md).

A case fails when any of its levels, categories or metrics fails, so the stated rate (``ALPHA``, 1 %) must hold
for the case, not for each comparison in it. Seeded simulations of the project's own functions, nothing changed
between the sides, per condition:

* ``crossover``: a load sweep of L levels in A/B with ``min_speedup=1.0`` (``crossover.crossover``): some
  level ``below``;
* ``categories``: an A/B case over a prompt file of K categories (``categories.apply``): some category's
  speedup interval wholly under 1;
* ``arms``: N identical arms over L levels with ``max_loss_vs_best=0.05`` (``arms.table``): the deployed arm
  ``below`` at some level; and the share of runs the gate is inconclusive (fixed 5 trials) or, with
  ``repeat="auto"`` (``gates.run_arms``), holds within ``max_repeat``;
* ``regression``: a load sweep of L levels in A/B through the regression gate (``gates.per_trial`` and
  ``trials.compare_ab``, every level x decode_tps, ttft_s, total_tps): some comparison ``regressed``;
* ``trials``: one metric, 5, 10 and 20 trials a side (``trials.compare_case``), trials lognormal, two-group
  (40 % of trials 10 % slower) or skewed (1 + 5 % x exponential): ``regressed``.

A trial's streams share an offset (between-trial sd 3 %, within 1 %, 8 users). Run:
``python benchmarks/case_error_rates.py`` (4,000 comparisons per condition, about 15 minutes on 2 busy cores;
``--quick``: 100 per condition, under a minute). The ± is one binomial standard error.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from pytest_specperf.cases.results import Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import arms, categories, crossover, gates
from pytest_specperf.compare import trials as compare

USERS = 8

#: What a result record requires besides the figures this simulation draws (the gates read records).
_RESULT = {"endpoint": "", "model": "sim", "server": "sim", "ctx": 0, "prompt_tokens": None}
_STREAM = {"prompt_tokens": None, "completion_tokens": 0, "ttft_s": 0.0, "total_s": 0.0, "decode_tps": 0.0,
           "client_tps": 0.0, "window_tokens": None, "window_tps": [], "early_tps": None, "late_tps": None,
           "drift": None, "trend_p": None, "stalls": [], "tokens_per_chunk": 0.0, "count_source": "",
           "counts_exact": True}


def record(data: dict[str, Any]) -> Result:
    """A simulated trial (the figures the gates read, as its JSON) as its result record."""
    levels = [{**lv, "streams": [{**_STREAM, **s} for s in lv.get("streams", [])]} for lv in data.get("levels", [])]
    return load_result({**_RESULT, **data, **({"levels": levels} if "levels" in data else {})})


def level_row(rng: np.random.Generator, users: int, between: float = 0.03, within: float = 0.01) -> dict[str, Any]:
    """One level of one trial: every user's decode and TTFT share the trial's offset."""
    off = rng.normal(0, between)
    tps = 100 * np.exp(off + rng.normal(0, within, USERS))
    ttft = 0.2 * np.exp(-off + rng.normal(0, within, USERS))
    streams = [{"decode_tps": float(v), "ttft_s": float(t)} for v, t in zip(tps, ttft, strict=True)]
    return {"concurrency": users, "streams": streams,
            "decode_tps": float(np.median(tps)), "ttft_s": float(np.median(ttft)), "total_tps": float(tps.sum())}


def sweep(rng: np.random.Generator, levels: list[int], trials: int = 5) -> list[dict[str, Any]]:
    """One arm's load-sweep results, one per trial."""
    return [{"kind": "load_sweep", "nodeid": "t", "concurrency": levels, "endpoint": "", "verdict": "passed",
             "levels": [level_row(rng, u) for u in levels]} for _ in range(trials)]


def crossover_fails(rng: np.random.Generator, n_levels: int) -> bool:
    lv = list(range(1, n_levels + 1))
    return any(x.verdict == "below" for x in crossover.crossover(sweep(rng, lv), sweep(rng, lv), 1.0).levels)


def category_arm(rng: np.random.Generator, k: int, trials: int = 5) -> list[Result]:
    out = []
    for _ in range(trials):
        off = rng.normal(0, 0.03)
        out.append(record({"kind": "sustained", "categories": {f"c{i}": {"n": 3, "decode_tps_p50": float(np.median(
            100 * np.exp(off + rng.normal(0, 0.02, 3))))} for i in range(k)}}))
    return out


def categories_fail(rng: np.random.Generator, k: int) -> bool:
    summary = record({"kind": "sustained"})
    categories.apply(summary, category_arm(rng, k), category_arm(rng, k))
    return any(f.speedup_interval[1] < 1 for f in summary.categories.values())  # type: ignore[attr-defined]


def arms_gate(rng: np.random.Generator, n_arms: int, n_levels: int) -> str:
    lv = list(range(1, n_levels + 1))
    t = arms.table({name: sweep(rng, lv) for name in "abcd"[:n_arms]}, baseline="a", max_loss=0.05)
    vs = [x.verdict for x in t.gate.levels] if t.gate is not None else []
    return "below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"


def arms_auto(rng: np.random.Generator, n_arms: int, n_levels: int) -> str:
    lv = list(range(1, n_levels + 1))

    def measure(name: str, levels: list[int] | None) -> Any:
        return record(sweep(rng, levels or lv, 1)[0])

    row, _ = gates.run_arms(measure, list("abcd"[:n_arms]), 20, gates.Gate(), baseline="a", max_loss=0.05,
                            auto=True)
    assert row.arms is not None and row.arms.gate is not None
    vs = [x.verdict for x in row.arms.gate.levels]
    return "below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"


def regression_fails(rng: np.random.Generator, n_levels: int) -> bool:
    lv = list(range(1, n_levels + 1))
    a, b = gates.per_trial([record(r) for r in sweep(rng, lv)]), gates.per_trial([record(r) for r in sweep(rng, lv)])
    return any(cc.verdict == "regressed" for cc in compare.compare_ab(a, b, metrics=gates.METRICS))


def draw(rng: np.random.Generator, shape: str, n: int) -> np.ndarray:
    if shape == "two-group":
        x = 100 * np.exp(rng.normal(0, 0.01, n))
        x[rng.random(n) < 0.4] *= 0.9
        return x
    if shape == "skewed":
        return 100 * (1 + 0.05 * rng.exponential(1, n))
    return 100 * np.exp(rng.normal(0, 0.03, n))


def trials_fail(rng: np.random.Generator, shape: str, n: int) -> bool:
    return compare.compare_case(draw(rng, shape, n), draw(rng, shape, n), direction="higher").verdict == "regressed"


def rate(hits: int, n: int) -> str:
    p = hits / n
    return f"{p:6.2%} ± {math.sqrt(max(p, 1 / n) * (1 - p) / n):.2%}"


def main() -> None:
    """Print one row per condition."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comparisons", type=int, default=4000, help="seeded comparisons per condition (default 4000)")
    ap.add_argument("--quick", action="store_true", help="100 comparisons per condition: a check that it runs")
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    n = 100 if args.quick else args.comparisons
    t0 = time.perf_counter()
    print(f"{n} seeded comparisons per condition, nothing changed; stated rate {compare.ALPHA:.0%} per case")
    conditions: list[tuple[str, Any]] = [
        *((f"crossover, {k} levels, min_speedup 1.0", lambda r, k=k: crossover_fails(r, k)) for k in (1, 4, 6)),
        *((f"categories, {k}, some below 1", lambda r, k=k: categories_fail(r, k)) for k in (3, 4, 6)),
        *((f"regression gate A/B, {k} levels x 3 metrics", lambda r, k=k: regression_fails(r, k)) for k in (1, 4)),
        *((f"trials, {s}, {k} vs {k}", lambda r, s=s, k=k: trials_fail(r, s, k))
          for s in ("lognormal", "two-group", "skewed") for k in (5, 10, 20)),
        *((f"arms, {a} arms x {k} levels, max_loss 0.05: below", lambda r, a=a, k=k: arms_gate(r, a, k) == "below")
          for a, k in ((3, 1), (3, 4))),
    ]
    for i, (name, fails) in enumerate(conditions):
        rng = np.random.default_rng([args.seed, i])
        hits = sum(bool(fails(rng)) for _ in range(n))
        print(f"{name:<52} false alarms {rate(hits, n)}", flush=True)
    for a, k in ((2, 1), (3, 1), (3, 4)):
        rng = np.random.default_rng([args.seed, 100 + a * 10 + k])
        fixed = [arms_gate(rng, a, k) for _ in range(n)]
        auto = [arms_auto(rng, a, k) for _ in range(max(20, n // 10))]
        print(f"arms, {a} identical x {k} levels, max_loss 0.05: 5 trials inconclusive "
              f"{fixed.count('inconclusive') / n:.1%}; repeat=\"auto\" holds {auto.count('holds') / len(auto):.1%}, "
              f"below {auto.count('below') / len(auto):.1%} ({len(auto)} runs)", flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
