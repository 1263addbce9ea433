"""The history gate's error rates and cost (docs/history.md), seeded.

Each history is a case with two gated metrics (decode_tps and ttft_s, independent), ``--trials`` trials per run
with a per-trial log-sd of ``--within``, and a random offset per run and metric: normal with log-sd ``between``
(2, 3.5 and 5 %, the conditions). Every figure is counted per CASE: a case fails when either metric fails.

* false alarms: 5, 10 or 30 earlier runs of one deploy, then one more of the same deploy judged;
* step: 8 stable runs, then a run 10 % slower (decode_tps down, ttft_s up): caught at that first run?
* creep: 10 stable runs, then ten runs each 2 % slower than the one before, each judged on arrival with the
  runs before it as history: caught by the sixth?
* change points: 30 runs of one deploy, searched for change points as the gate does (one metric): no change
  point found in what share?
* cost: judging one case against a 100-run history in SQLite (the store read and the rule), and recording it.

Run: ``python benchmarks/history_gate.py`` (4,000 histories per condition, a few minutes on 2 busy cores) or
``--quick`` (200 per condition, under a minute).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_specperf.compare import trials as compare
from pytest_specperf.history import changepoints as cp
from pytest_specperf.history import decide, noise
from pytest_specperf.history.against_history import ALPHA

BETWEEN = (0.02, 0.035, 0.05)
METRICS = 2


def _run(rng: np.random.Generator, level: float, between: float, within: float, trials: int) -> np.ndarray:
    return level + rng.normal(0, between) + rng.normal(0, within, trials)


def _fails(past: list[list[np.ndarray]], cand: list[np.ndarray], max_regression: float) -> bool:
    alpha = ALPHA / len(cand)
    return any(decide.decide([p[m] for p in past], cand[m], alpha=alpha, max_regression=max_regression).verdict
               == "regressed" for m in range(len(cand)))


def history(rng: np.random.Generator, levels: list[float], between: float, within: float, trials: int
            ) -> list[list[np.ndarray]]:
    """Runs (one array per metric), metric 0's level per run as given, the other metric unchanged."""
    return [[_run(rng, lv if m == 0 else 0.0, between, within, trials) for m in range(METRICS)] for lv in levels]


def false_alarms(n: int, runs: int, between: float, within: float, trials: int, max_regression: float,
                 seed: int) -> float:
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(n):
        h = history(rng, [0.0] * (runs + 1), between, within, trials)
        bad += _fails(h[:-1], h[-1], max_regression)
    return bad / n


def baseline_rule(n: int, between: float, within: float, trials: int, max_regression: float, seed: int) -> float:
    """Today's rule for comparison: the same identical deploys judged against the previous run alone."""
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(n):
        h = history(rng, [0.0] * 2, between, within, trials)
        bad += any(compare.compare_case(np.exp(h[0][m]), np.exp(h[1][m]), direction="higher",
                                        max_regression=max_regression, family=METRICS).verdict == "regressed"
                   for m in range(METRICS))
    return bad / n


def step(n: int, between: float, within: float, trials: int, max_regression: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hit = 0
    for _ in range(n):
        h = history(rng, [0.0] * 8 + [math.log(0.9)], between, within, trials)
        hit += _fails(h[:-1], h[-1], max_regression)
    return hit / n


def creep(n: int, between: float, within: float, trials: int, max_regression: float, seed: int,
          by: int = 6) -> tuple[float, float]:
    """Share caught by the ``by``-th slower run, and the mean run at which it was caught (of those caught)."""
    rng = np.random.default_rng(seed)
    caught, at = 0, []
    for _ in range(n):
        h = history(rng, [0.0] * 10 + [math.log(0.98) * k for k in range(1, 11)], between, within, trials)
        for k in range(1, by + 1):
            if _fails(h[:10 + k - 1], h[10 + k - 1], max_regression):
                caught += 1
                at.append(k)
                break
    return caught / n, float(np.mean(at)) if at else float("nan")


def quiet(n: int, between: float, within: float, trials: int, seed: int, runs: int = 30) -> float:
    rng = np.random.default_rng(seed)
    clean = 0
    for _ in range(n):
        means = [float(np.mean(_run(rng, 0.0, between, within, trials))) for _ in range(runs)]
        clean += not cp.change_points(means)
    return clean / n


def gate_cost(runs: int = 100, repeats: int = 20) -> tuple[float, float]:
    """Seconds to judge one sustained case against ``runs`` recorded runs (SQLite), and to record one run."""
    from pytest_specperf.history import against_history
    from pytest_specperf.storage.schema import open_store
    from pytest_specperf.storage.store import Store, parse_target

    rng = np.random.default_rng(7)

    from pytest_specperf.cases.results import Result
    from pytest_specperf.cases.saved_results import load_result

    # a stream's fields the gate does not read
    rest = {"prompt_tokens": None, "completion_tokens": 200, "total_s": 1.0, "client_tps": 0.0, "window_tokens": None,
            "window_tps": [], "early_tps": None, "late_tps": None, "drift": None, "trend_p": None, "stalls": [],
            "tokens_per_chunk": 1.0, "count_source": "usage", "counts_exact": True}

    def result() -> Result:
        streams = [{**rest, "decode_tps": float(100 * math.exp(rng.normal(0, 0.03))),
                    "ttft_s": float(0.1 * math.exp(rng.normal(0, 0.03)))} for _ in range(5)]
        return load_result({"nodeid": "t.py::case", "kind": "sustained", "endpoint": "", "model": "m", "server": "sim",
                            "ctx": 100, "prompt_tokens": None, "verdict": "passed", "decode_tps": 100.0, "ttft_s": 0.1,
                            "streams": streams})

    meta = {"created": "2026-01-01T00:00:00Z", "model": "m", "server": "sim", "commit": {"id": "c"}}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Store(parse_target(str(Path(tmp) / "h.sqlite"), tmp)))
        from pytest_specperf.storage import records
        t0 = time.perf_counter()
        for _ in range(runs):
            records.record_run(store, [result()], meta)
        record_s = (time.perf_counter() - t0) / runs
        against_history.judge(store, result(), meta, max_regression=0.05)  # scipy and ruptures load once per process
        t0 = time.perf_counter()
        for _ in range(repeats):
            against_history.judge(store, result(), meta, max_regression=0.05)
        judge_s = (time.perf_counter() - t0) / repeats
        store.close()
    return judge_s, record_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--histories", type=int, default=4000, help="histories per condition (default 4,000)")
    ap.add_argument("--quick", action="store_true", help="200 histories per condition (under a minute)")
    ap.add_argument("--within", type=float, default=0.02, help="per-trial log-sd (default 0.02)")
    ap.add_argument("--trials", type=int, default=5, help="trials per run (default 5)")
    ap.add_argument("--max-regression", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    n = 200 if args.quick else args.histories
    w, k, mr = args.within, args.trials, args.max_regression
    print(f"{n} histories per condition; {k} trials per run, per-trial noise {w:.1%}; two gated metrics; "
          f"max regression {mr:.0%}; alpha {ALPHA:g} per case; change-point penalty {cp.PENALTY:g}")
    print("\nfalse alarms per case, identical deploy (run-to-run offset sd x earlier runs):")
    for b in BETWEEN:
        cells = [f"{r} runs {false_alarms(n, r, b, w, k, mr, args.seed + r):.2%}" for r in (noise.MIN_RUNS, 10, 30)]
        before = baseline_rule(n, b, w, k, mr, args.seed + 50)
        print(f"  offset {b:.1%}: " + ", ".join(cells) + f"; the baseline rule against the previous run {before:.1%}")
    print("\ndetections:")
    for b in (0.01, *BETWEEN):
        s = step(n, b, w, k, mr, args.seed + 100)
        c, at = creep(n, b, w, k, mr, args.seed + 200)
        q = quiet(n, b, w, k, args.seed + 300)
        print(f"  offset {b:.1%}: 10% step after 8 runs caught at once {s:.1%}; ten 2% slowdowns caught by the "
              f"sixth {c:.1%} (mean run {at:.1f}); 30 unchanged runs without a change point {q:.1%}")
    judge_s, record_s = gate_cost()
    print(f"\ncost: one case judged against a 100-run SQLite history {judge_s * 1000:.1f} ms; "
          f"recording a run {record_s * 1000:.1f} ms")


if __name__ == "__main__":
    main()
