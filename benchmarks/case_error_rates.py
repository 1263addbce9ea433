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
  ``repeat="auto"`` (``interleaved.run_arms``), holds within ``max_repeat``;
* ``regression``: a load sweep of L levels in A/B through the regression gate (``samples.per_trial`` and
  ``trials.compare_ab``, every level x decode_tps, ttft_s, total_tps): some comparison ``regressed``;
* ``trials``: one metric, 5, 10 and 20 trials a side (``trials.compare_case``), trials lognormal, two-group
  (40 % of trials 10 % slower) or skewed (1 + 5 % x exponential): ``regressed``;
* ``load trials``: a load case (``sustained(concurrency=8)``, or a 4-level ``load_sweep``) saved with ``repeat=N``
  (its trials combined as the plugin saves them, ``combine.aggregate``), then a candidate run through the plugin's
  whole-case trial loop and gate (``repeats.run_trials``, ``gates.against_baseline``; ``repeat=N`` or ``"auto"``):
  the case ``failed``. Identical deploys (false alarms), and a deploy 6 % slower (detections; decode and
  aggregate x0.94, TTFT /0.94).

A trial's streams share an offset (between-trial sd 3 %, within 1 %, 8 users). Run:
``python benchmarks/case_error_rates.py`` (4,000 comparisons per condition, about 15 minutes on 2 busy cores;
``--quick``: 100 per condition, under a minute; ``--load-trials``: only the load-trials rows). The ± is one
binomial standard error.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from typing import Any

import numpy as np

from pytest_specperf.cases import figures
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import LoadSweepResult, Result
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import arms, categories, crossover, gates, samples
from pytest_specperf.compare import trials as compare
from pytest_specperf.measure import combine, interleaved, repeats

USERS = 8

#: What a result record requires besides the figures this simulation draws (the gates read records).
_RESULT = {"endpoint": "", "model": "sim", "server": "sim", "ctx": 0, "prompt_tokens": None}
_STREAM = {"prompt_tokens": None, "completion_tokens": 0, "ttft_s": 0.0, "total_s": 0.0, "decode_tps": 0.0,
           "client_tps": 0.0, "window_tokens": None, "window_tps": [], "early_tps": None, "late_tps": None,
           "drift": None, "trend_p": None, "stalls": [], "tokens_per_chunk": 0.0, "count_source": "",
           "counts_exact": True}


def _streams(data: dict[str, Any]) -> dict[str, Any]:
    return {"streams": [{**_STREAM, **s} for s in data["streams"]]} if "streams" in data else {}


def record(data: dict[str, Any]) -> Result:
    """A simulated trial (the figures the gates read, as its JSON) as its result record, loaded as a saved run's
    results are (``saved_results.load_record``); the seeded benchmarks share it (they run as scripts, with this
    folder on the path)."""
    levels = {"levels": [{**lv, **_streams(lv)} for lv in data["levels"]]} if "levels" in data else {}
    r = load_record({**_RESULT, **data, **_streams(data), **levels})
    assert isinstance(r, Result), "a simulated trial is measured, never an error"
    return r


def level_row(rng: np.random.Generator, users: int, between: float = 0.03, within: float = 0.01,
              factor: float = 1.0) -> dict[str, Any]:
    """One level of one trial: every user's decode and TTFT share the trial's offset (``factor`` as fast)."""
    off = rng.normal(0, between)
    tps = 100 * factor * np.exp(off + rng.normal(0, within, USERS))
    ttft = 0.2 / factor * np.exp(-off + rng.normal(0, within, USERS))
    streams = [{"decode_tps": float(v), "ttft_s": float(t)} for v, t in zip(tps, ttft, strict=True)]
    return {"concurrency": users, "streams": streams,
            "decode_tps": float(np.median(tps)), "ttft_s": float(np.median(ttft)), "total_tps": float(tps.sum())}


def sweep(rng: np.random.Generator, levels: list[int], trials: int = 5) -> list[Result]:
    """One arm's load-sweep results, one record per trial."""
    return [record({"kind": "load_sweep", "nodeid": "t", "concurrency": levels, "endpoint": "", "verdict": "passed",
                    "levels": [level_row(rng, u) for u in levels]}) for _ in range(trials)]


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
    a, b = category_arm(rng, k), category_arm(rng, k)
    summary.categories = combine.combine_categories(b)  # B's trials combined, as measuring hands them over
    categories.apply(summary, a, b)
    return any(f.speedup_interval[1] < 1 for f in summary.categories.values())  # type: ignore[attr-defined]


def arms_gate(rng: np.random.Generator, n_arms: int, n_levels: int) -> str:
    lv = list(range(1, n_levels + 1))
    t = arms.table({name: sweep(rng, lv) for name in "abcd"[:n_arms]}, baseline="a", max_loss=0.05)
    vs = [x.verdict for x in t.gate.levels] if t.gate is not None else []
    return "below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"


def arms_auto(rng: np.random.Generator, n_arms: int, n_levels: int) -> str:
    lv = list(range(1, n_levels + 1))

    def measure(name: str, levels: list[int] | None) -> Any:
        return sweep(rng, levels or lv, 1)[0]

    row, _ = interleaved.run_arms(measure, list("abcd"[:n_arms]), 20, gates.Gate(), baseline="a", max_loss=0.05,
                            auto=True)
    assert row.arms is not None and row.arms.gate is not None
    vs = [x.verdict for x in row.arms.gate.levels]
    return "below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"


def regression_fails(rng: np.random.Generator, n_levels: int) -> bool:
    lv = list(range(1, n_levels + 1))
    a, b = samples.per_trial(sweep(rng, lv)), samples.per_trial(sweep(rng, lv))
    return any(cc.verdict == "regressed" for cc in compare.compare_ab(a, b, metrics=figures.METRICS))


_LOAD = record({"kind": "sustained", "nodeid": "t", "concurrency": USERS, "verdict": "passed"})
_SWEEP = record({"kind": "load_sweep", "nodeid": "t", "concurrency": [1, 2, 3, 4], "verdict": "passed",
                 "levels": [{"concurrency": u, "verdict": "passed"} for u in (1, 2, 3, 4)]})


def load_trial(rng: np.random.Generator, sweep_levels: bool, factor: float, between: float) -> Result:
    """One trial of a load case as its record: one value per level and metric (a trial's users are one sample)."""
    def figures(users: int) -> dict[str, Any]:
        row = level_row(rng, users, between, factor=factor)
        return {k: row[k] for k in ("decode_tps", "ttft_s", "total_tps")}

    if sweep_levels:
        assert isinstance(_SWEEP, LoadSweepResult)
        return dataclasses.replace(_SWEEP, levels=[dataclasses.replace(lv, **figures(lv.concurrency))
                                                   for lv in _SWEEP.levels])
    return dataclasses.replace(_LOAD, **figures(USERS))


def load_trials_fail(rng: np.random.Generator, sweep_levels: bool, saved: int, repeat: int | str, factor: float,
                     between: float) -> tuple[bool, int]:
    """(failed, candidate trials): a load case saved with ``saved`` trials, then judged as the plugin judges it."""
    spec = build_spec("load_sweep", {"concurrency": [1, 2, 3, 4], "repeat": repeat}) if sweep_levels else \
        build_spec("sustained", {"concurrency": USERS, "tokens": 64, "repeat": repeat})
    base = combine.aggregate([load_trial(rng, sweep_levels, 1.0, between) for _ in range(saved)]) if saved > 1 else \
        load_trial(rng, sweep_levels, 1.0, between)
    gate = gates.Gate(0.05)
    if repeat == 1:
        row = load_trial(rng, sweep_levels, factor, between)
    else:
        row = repeats.run_trials(lambda _: load_trial(rng, sweep_levels, factor, between), spec, gate,
                               baseline=[base], nodeid="t")
    gates.against_baseline(gate, row, [base], auto=repeat == "auto")
    return row.verdict == "failed", int(getattr(row, "repeat", None) or 1)


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
    ap.add_argument("--load-trials", action="store_true", help="only the load-trials rows")
    args = ap.parse_args()
    n = 100 if args.quick else args.comparisons
    t0 = time.perf_counter()
    if not args.load_trials:
        other_conditions(args, n)
    load_trials_rows(args, n)
    print(f"({time.perf_counter() - t0:.0f} s)")


def other_conditions(args: argparse.Namespace, n: int) -> None:
    """The rows of every gate but load trials."""
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


def load_trials_rows(args: argparse.Namespace, n: int) -> None:
    """Load cases saved with repeat=N and judged against it: false alarms and detections per case."""
    print("load trials against a saved baseline, 5 % threshold, 8 users, 1 % within a trial:")
    for j, (what, sweep_levels, saved, repeat, factor, between) in enumerate((
            ("sustained(concurrency=8), identical", False, 5, 5, 1.0, 0.03),
            ("sustained(concurrency=8), identical", False, 10, 10, 1.0, 0.02),
            ("sustained(concurrency=8), identical", False, 10, "auto", 1.0, 0.02),
            ("load_sweep 4 levels, identical", True, 5, 5, 1.0, 0.03),
            ("load_sweep 4 levels, identical", True, 5, 5, 1.0, 0.06),
            ("sustained(concurrency=8), 6 % slower", False, 1, 1, 0.94, 0.02),
            ("sustained(concurrency=8), 6 % slower", False, 5, 5, 0.94, 0.02),
            ("sustained(concurrency=8), 6 % slower", False, 10, 10, 0.94, 0.02),
            ("sustained(concurrency=8), 6 % slower", False, 10, 10, 0.94, 0.03),
            ("sustained(concurrency=8), 6 % slower", False, 10, "auto", 0.94, 0.02),
            ("load_sweep 4 levels, 6 % slower", True, 10, 10, 0.94, 0.02))):
        rng = np.random.default_rng([args.seed, 200 + j])
        runs = [load_trials_fail(rng, sweep_levels, saved, repeat, factor, between) for _ in range(n)]
        hits = sum(f for f, _ in runs)
        label = f"{what}, {saved} saved vs {repeat}, {between:.0%} between"
        print(f"  {label:<72} failed {rate(hits, n)} (mean trials {np.mean([k for _, k in runs]):.1f})", flush=True)


if __name__ == "__main__":
    main()
