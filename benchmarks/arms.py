"""Endpoint time repeat="auto" saves on N arms against a fixed number of trials, at the same error rates.

Seeded comparisons of three arms at one load level. A trial's streams share the engine's batched steps, so
they share its offset: a stream's per-user decode is ``rate * exp(offset_trial + e_stream)`` with
``offset ~ N(0, between)`` per trial and ``e ~ N(0, within)`` per stream (log scale). Per condition it prints,
for repeat="auto" (``interleaved.run_arms(auto=True)``: rounds of one trial per arm from the third round on until the
level's best arm is decided, 20 at most) and for fixed designs of n trials per arm:

* ``undecided``: how often the level's best arm is not decided at the end (another arm neither shown slower
  nor shown within 5 % of it), so the schedule there is a guess;
* ``wrong``: how often the schedule names an arm truly more than 5 % slower than the best (a wrong pick);
* ``trials``: the mean trials per arm, i.e. endpoint time (every trial of every arm costs the same).

``saved`` compares auto with the smallest fixed n whose undecided and wrong-pick rates are both no higher
than auto's (a fixed design must take, at every level, the trials its hardest level needs).

Then the ``max_loss_vs_best`` gate (0.05) under repeat="auto" (``max_repeat`` 20) over load sweeps of 4 and 6
levels at 3 % noise between trials, counted per case (every level must hold): how often identical arms hold
(pass), how often they are ``below`` (a false alarm), and how often a deployed arm truly 10 % slower at every
level is ``below`` (detection), with the mean level-trials per arm and level.

Run: ``python benchmarks/arms.py`` (about 5 minutes on 2 busy cores; ``--comparisons 100 --gate-runs 100`` for a
quick look, ``--only-gate`` for the gate block alone).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

# a simulated trial as its result record: the one helper the seeded benchmarks share (run as scripts, this folder
# is on the path)
from case_error_rates import record

from pytest_specperf.compare import arms
from pytest_specperf.compare import gates as gating
from pytest_specperf.measure import interleaved

USERS = 8
TOLERANCE = 0.05
CONDITIONS = {  # name: (true per-user rates of the three arms, between-trial sd)
    "clear, 25% apart": ((100.0, 80.0, 60.0), 0.04),
    "close, 8% apart": ((100.0, 92.0, 85.0), 0.04),
    "two tied, third 15% slower": ((100.0, 100.0, 85.0), 0.04),
}
FIXED = (3, 5, 8, 12, 20)


def trial(rng: np.random.Generator, rate: float, between: float, within: float = 0.01) -> dict[str, Any]:
    """One load-sweep trial of one arm at one level."""
    tps = rate * np.exp(rng.normal(0, between) + rng.normal(0, within, USERS))
    return {"kind": "load_sweep", "concurrency": [USERS], "endpoint": "", "decode_tps": float(np.median(tps)),
            "verdict": "passed", "levels": [{"concurrency": USERS, "streams": [{"decode_tps": float(v)} for v in tps]}]}


def wrong(best: str, rates: dict[str, float]) -> bool:
    """The pick is truly more than TOLERANCE slower than the best arm."""
    return rates[best] < max(rates.values()) * (1 - TOLERANCE)


def run_auto(rng: np.random.Generator, rates: dict[str, float], between: float) -> tuple[bool, bool, float]:
    """(undecided, wrong pick, trials per arm) of one repeat="auto" comparison."""
    def measure(name: str, levels: list[int] | None) -> Any:
        return record(trial(rng, rates[name], between))
    row, _ = interleaved.run_arms(measure, list(rates), 20, gating.Gate(), baseline="a", auto=True)
    t = row.arms
    assert t is not None
    lv = t.levels[0]
    return not lv.decided, wrong(lv.best, rates), float(np.mean(list(t.trials.values())))


def run_fixed(rng: np.random.Generator, rates: dict[str, float], between: float, n: int) -> tuple[bool, bool]:
    """(undecided, wrong pick) of a fixed design of ``n`` trials per arm."""
    results = {name: [record(trial(rng, rate, between)) for _ in range(n)] for name, rate in rates.items()}
    lv = arms.table(results, baseline="a").levels[0]
    return not lv.decided, wrong(lv.best, rates)


GATE_CONDITIONS = {  # name: (arms, levels, the deployed arm's true ratio to the others)
    "3 identical arms x 4 levels": (3, 4, 1.0),
    "3 identical arms x 6 levels": (3, 6, 1.0),
    "3 arms x 4 levels, deployed 10% slower": (3, 4, 0.9),
}


def sweep_trial(rng: np.random.Generator, rate: float, levels: list[int], between: float = 0.03) -> dict[str, Any]:
    """One load-sweep trial of one arm over ``levels``, each level with its own offset."""
    rows = []
    for users in levels:
        tps = rate * np.exp(rng.normal(0, between) + rng.normal(0, 0.01, USERS))
        rows.append({"concurrency": users, "streams": [{"decode_tps": float(v)} for v in tps]})
    return {"kind": "load_sweep", "concurrency": levels, "endpoint": "", "decode_tps": 1.0, "verdict": "passed",
            "levels": rows}


def run_gate(rng: np.random.Generator, n_arms: int, n_levels: int, ratio: float) -> tuple[str, float]:
    """(the case's gate verdict, mean trials per arm and level) of one repeat="auto" run, deployed arm "a"."""
    every = list(range(1, n_levels + 1))

    def measure(name: str, levels: list[int] | None) -> Any:
        return record(sweep_trial(rng, 100.0 * (ratio if name == "a" else 1.0), levels or every))
    row, _ = interleaved.run_arms(measure, list("abcd"[:n_arms]), 20, gating.Gate(), baseline="a", max_loss=TOLERANCE,
                             auto=True)
    assert row.arms is not None and row.arms.gate is not None
    vs = [x.verdict for x in row.arms.gate.levels]
    n = float(np.mean([a.n for lv in row.arms.levels for a in lv.arms.values()]))
    return ("below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"), n


def share(hits: int, n: int) -> str:
    """A share with its binomial standard error."""
    p = hits / n
    return f"{p:.1%} (+-{np.sqrt(max(p * (1 - p), 1 / n) / n):.1%})"


def gates(runs: int, seed: int) -> None:
    """The max_loss_vs_best block: per condition the case's verdicts over ``runs`` seeded runs."""
    for i, (name, (n_arms, n_levels, ratio)) in enumerate(GATE_CONDITIONS.items()):
        rng = np.random.default_rng([seed, i])
        out = [run_gate(rng, n_arms, n_levels, ratio) for _ in range(runs)]
        vs = [v for v, _ in out]
        print(f"max_loss_vs_best 0.05, auto, {name}: holds {share(vs.count('holds'), runs)}, "
              f"below {share(vs.count('below'), runs)}, inconclusive {share(vs.count('inconclusive'), runs)}, "
              f"{np.mean([n for _, n in out]):.1f} trials per arm and level ({runs} runs)", flush=True)


def main() -> None:
    """Print one block per condition."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comparisons", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="20 comparisons per condition: a check that it runs")
    ap.add_argument("--gate-runs", type=int, default=400, help="runs per max_loss_vs_best condition")
    ap.add_argument("--only-gate", action="store_true", help="only the max_loss_vs_best block")
    args = ap.parse_args()
    if args.quick:
        args.comparisons, args.gate_runs = 20, 10
    if args.only_gate:
        t0 = time.monotonic()
        gates(args.gate_runs, 2026)
        print(f"({time.monotonic() - t0:.0f} s)")
        return
    rng = np.random.default_rng(2026)
    t0 = time.monotonic()
    for name, (values, between) in CONDITIONS.items():
        rates = dict(zip("abc", values, strict=True))
        autos = [run_auto(rng, rates, between) for _ in range(args.comparisons)]
        auto_open, auto_wrong, auto_trials = (float(np.mean([a[i] for a in autos])) for i in range(3))
        print(f"{name} (between-trial sd {between:.0%}): auto undecided {auto_open:.1%}, wrong {auto_wrong:.1%}, "
              f"{auto_trials:.1f} trials per arm")
        match = None
        for n in FIXED:
            runs = [run_fixed(rng, rates, between, n) for _ in range(args.comparisons)]
            o, w = (float(np.mean([x[i] for x in runs])) for i in range(2))
            print(f"  fixed {n:2d} trials per arm: undecided {o:.1%}, wrong {w:.1%}")
            if match is None and o <= auto_open and w <= auto_wrong:
                match = n
        if match is not None:
            print(f"  saved: fixed {match} trials per arm for the same undecided and wrong-pick rates; auto uses "
                  f"{auto_trials:.1f} ({1 - auto_trials / match:+.0%} endpoint time saved)")
        else:
            print(f"  saved: no fixed design up to {FIXED[-1]} trials per arm decides as often; auto uses "
                  f"{auto_trials:.1f} ({1 - auto_trials / FIXED[-1]:+.0%} against {FIXED[-1]})")
    gates(args.gate_runs, 2026)
    print(f"({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
