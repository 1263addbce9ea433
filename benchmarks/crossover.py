"""False alarms and detections of the crossover's speedup floor (``min_speedup``), per trials and noise.

Seeded A/B comparisons of one load level: each arm runs ``trials`` trials of ``users`` streams. A trial's
streams share the engine's batched steps, so they share its offset: a stream's per-user decode is
``100 * speedup * exp(offset_trial + e_stream)`` with ``offset ~ N(0, between)`` per trial and
``e ~ N(0, within)`` per stream (log scale; 0.02 is about 2 %). Per comparison it prints how often the
level is judged ``below`` the floor 1.0 (a failure of ``min_speedup=1.0``) and ``holds``:

* ``trials`` (now): ``crossover.crossover``, one value per trial (its median user), Welch on the logs;
* ``streams`` (before): every stream of every trial pooled as if independent, the rule the crossover used
  before (``compare.compare_case`` on the pooled streams, speedup as a ratio of medians).

With B identical to A (``speedup 1.00``) every ``below`` is a false alarm; the stated rate is 1 % (one side
of a 98 % interval). With B 10 % slower, ``below`` is a detection.

Run: ``python benchmarks/crossover.py`` (about 6 minutes on 2 busy cores, most of it the pooled rule's rank
test; ``--comparisons 200`` for a quick look).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

# a simulated trial as its result record: the one helper the seeded benchmarks share (run as scripts, this folder
# is on the path)
from case_error_rates import record

from pytest_specperf.cases.results import LoadSweepResult
from pytest_specperf.compare import crossover
from pytest_specperf.compare import trials as compare

USERS = 8
CONDITIONS = [  # (trials per arm, between-trial sd, within-trial sd, true speedup of B)
    (5, 0.00, 0.02, 1.0), (5, 0.01, 0.01, 1.0), (5, 0.02, 0.01, 1.0), (5, 0.03, 0.01, 1.0), (5, 0.03, 0.02, 1.0),
    (2, 0.03, 0.01, 1.0), (3, 0.03, 0.01, 1.0), (10, 0.03, 0.01, 1.0),
    (2, 0.02, 0.01, 0.9), (3, 0.02, 0.01, 0.9), (5, 0.02, 0.01, 0.9), (5, 0.03, 0.01, 0.9), (10, 0.03, 0.01, 0.9),
]


def arm(rng: np.random.Generator, trials: int, between: float, within: float, speedup: float
        ) -> list[LoadSweepResult]:
    """One arm's load-sweep results at one level, a result per trial."""
    out = []
    for _ in range(trials):
        tps = 100 * speedup * np.exp(rng.normal(0, between) + rng.normal(0, within, USERS))
        streams = [{"decode_tps": float(v)} for v in tps]
        r = record({"kind": "load_sweep", "concurrency": [USERS],
                    "levels": [{"concurrency": USERS, "streams": streams}]})
        assert isinstance(r, LoadSweepResult)
        out.append(r)
    return out


def pooled_streams(a: list[LoadSweepResult], b: list[LoadSweepResult], floor: float) -> str:
    """The rule before: streams pooled over trials, compare_case's interval, the verdict from its high end."""
    va = [s.decode_tps for r in a for s in r.levels[0].streams]
    vb = [s.decode_tps for r in b for s in r.levels[0].streams]
    c = compare.compare_case(va, vb, direction="higher", metric="decode_tps", against="A")
    hi = 1.0 + c.change_ci[1]
    return "below" if hi < floor else "inconclusive" if 1.0 + c.change < floor else "holds"


def main() -> None:
    """Print one row per condition."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--comparisons", type=int, default=2000, help="seeded comparisons per condition")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--quick", action="store_true", help="40 comparisons per condition: a check that it runs")
    args = ap.parse_args()
    if args.quick:
        args.comparisons = 40
    print(f"{args.comparisons} seeded comparisons per condition, {USERS} users, floor 1.0 (min_speedup=1.0)")
    print("| trials per arm | between-trial sd | within-trial sd | B / A | below, trials (now) | holds, trials "
          "| below, streams (before) |")
    print("|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for i, (trials, between, within, speedup) in enumerate(CONDITIONS):
        rng = np.random.default_rng([args.seed, i])
        below = holds = before = 0
        for _ in range(args.comparisons):
            a, b = arm(rng, trials, between, within, 1.0), arm(rng, trials, between, within, speedup)
            [lv] = crossover.crossover(a, b, min_speedup=1.0).levels
            below += lv.verdict == "below"
            holds += lv.verdict == "holds"
            before += pooled_streams(a, b, 1.0) == "below"
        n = args.comparisons
        print(f"| {trials} | {between:.2f} | {within:.2f} | {speedup:.2f} | {below / n:.2%} | {holds / n:.2%} "
              f"| {before / n:.2%} |")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
