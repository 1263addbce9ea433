"""repeat="auto" (sequential test) against a fixed 10-trial design, on the simulator.

For each condition (noise level x true change of B against A) it runs ``--comparisons`` seeded A/B
comparisons on two simulators (B's steps slowed by the change) and prints, per design:
false alarms (regressed when nothing changed) or detections (regressed at a real regression),
inconclusive verdicts, mean trials and mean endpoint time (simulated seconds at speed 1).

Both designs judge the same streams: trial i of comparison c is one stream with a seed of its own,
measured once and shared (common random numbers), so the difference between designs is the
design's alone. Designs:

* A/B, fixed: 10 trials per arm, ``compare.compare_case`` (the rule ``repeat=10`` uses);
* A/B, auto: ``sequential.run_ab`` (``repeat="auto"``, max_repeat 20), ABBA rounds;
* baseline, fixed / auto: A's first 5 trials (``--base-trials``) stand for a stored run; the
  candidate (B) runs 10 trials, or sequential ones until decided (``sprt(..., stored=True)``, its last
  look at ``max_repeat``). Endpoint time counts the candidate's trials only.

Run: ``python benchmarks/sequential.py`` (about 20 minutes on 2 busy cores; ``--comparisons 50``
for a quick look).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_specperf import compare, measure, sequential
from pytest_specperf.client import Client
from pytest_specperf.prompts import build_prompt
from pytest_specperf.sim import SimServer

NOISE = {  # profile overrides: per-trial noise of decode_tps (log-sd) measured below
    "low": {},  # the healthy profile: min-variance acceptance, 2 % step jitter
    "realistic": {"jitter": 0.3},  # 30 % per-step jitter: ~3 % per 256-token stream, a typical within-job CV
}
FIXED = 10
BASE_TRIALS = 5
THRESHOLD = 0.05


@dataclass
class Arm:
    """One simulator and its measured trials per comparison (measured once, shared by designs)."""

    client: Client
    prompt: str
    tokens: int
    speed: float
    salt: int
    trials: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)  # (c, i) -> (tps, seconds)

    def trial(self, c: int, i: int) -> tuple[float, float]:
        if (c, i) not in self.trials:
            trace = self.client.stream(self.prompt, self.tokens, seed=(c * 100 + i) * 2 + self.salt)
            s, _ = measure.stream_result(trace)
            self.trials[(c, i)] = (s.decode_tps, s.total_s * self.speed)
        return self.trials[(c, i)]


def _fixed(a: Arm, b: Arm, c: int, n_base: int, n_cand: int) -> str:
    base = [a.trial(c, i)[0] for i in range(n_base)]
    cand = [b.trial(c, i)[0] for i in range(n_cand)]
    return compare.compare_case(base, cand, direction="higher", max_regression=THRESHOLD, decide_at=None).verdict


def _auto_ab(a: Arm, b: Arm, c: int, max_repeat: int) -> tuple[str, int, float]:
    used = {"A": 0, "B": 0}

    def one(arm: Arm, name: str) -> dict[str, Any]:
        tps, _ = arm.trial(c, used[name])
        used[name] += 1
        return {"nodeid": "x", "kind": "trial", "decode_tps": tps}

    _, _, ccs = sequential.run_ab(lambda: one(a, "A"), lambda: one(b, "B"), max_repeat=max_repeat,
                                  max_regression=THRESHOLD, metrics=("decode_tps",))
    secs = sum(a.trial(c, i)[1] for i in range(used["A"])) + sum(b.trial(c, i)[1] for i in range(used["B"]))
    return ccs[0].verdict, used["A"] + used["B"], secs


def _auto_baseline(a: Arm, b: Arm, c: int, max_repeat: int, base_trials: int) -> tuple[str, int, float]:
    base = [a.trial(c, i)[0] for i in range(base_trials)]
    cand: list[float] = []
    verdict = "inconclusive"
    while len(cand) < max_repeat:
        cand.append(b.trial(c, len(cand))[0])
        d = sequential.sprt(base, cand, max_regression=THRESHOLD, stored=True, final=len(cand) == max_repeat)
        if d.verdict != "continue":
            verdict = d.verdict
            break
    return verdict, len(cand), sum(b.trial(c, i)[1] for i in range(len(cand)))


def run_condition(noise: str, change: float, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every design on ``args.comparisons`` comparisons at one noise level and true change of B."""
    over = dict(NOISE[noise])
    slow = {**over, "step_ms": 20.0 / (1.0 + change)}  # healthy's 20 ms step: rate x (1 + change)
    with SimServer("healthy", speed=args.speed, overrides=over) as sa, \
            SimServer("healthy", speed=args.speed, overrides=slow) as sb:
        ca, cb = Client(sa.url), Client(sb.url)
        prompt = build_prompt("prose", 200, ca.count_tokens).text
        a = Arm(ca, prompt, args.tokens, args.speed, 0)
        b = Arm(cb, prompt, args.tokens, args.speed, 1)
        rows: dict[str, list[tuple[str, int, float]]] = {k: [] for k in ("ab-fixed", "ab-auto", "base-fixed",
                                                                          "base-auto")}
        for c in range(args.comparisons):
            v = _fixed(a, b, c, FIXED, FIXED)
            secs = sum(a.trial(c, i)[1] + b.trial(c, i)[1] for i in range(FIXED))
            rows["ab-fixed"].append((v, 2 * FIXED, secs))
            rows["ab-auto"].append(_auto_ab(a, b, c, args.max_repeat))
            v = _fixed(a, b, c, args.base_trials, FIXED)
            rows["base-fixed"].append((v, FIXED, sum(b.trial(c, i)[1] for i in range(FIXED))))
            rows["base-auto"].append(_auto_baseline(a, b, c, args.max_repeat, args.base_trials))
        ca.close()
        cb.close()
        logs = np.log([a.trials[(c, i)][0] for c in range(args.comparisons) for i in range(FIXED)])
        per_c = np.log([[a.trials[(c, i)][0] for i in range(FIXED)] for c in range(args.comparisons)])
        cv = float(np.mean(per_c.std(axis=1, ddof=1)))
    out = []
    for design, vs in rows.items():
        n = len(vs)
        out.append({"noise": noise, "cv": cv, "change": change, "design": design,
                    "regressed": sum(v == "regressed" for v, _, _ in vs) / n,
                    "passed": sum(v == "passed" for v, _, _ in vs) / n,
                    "inconclusive": sum(v == "inconclusive" for v, _, _ in vs) / n,
                    "trials": float(np.mean([t for _, t, _ in vs])), "seconds": float(np.mean([s for _, _, s in vs])),
                    "n": n, "pooled_sd": float(logs.std())})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comparisons", type=int, default=200, help="seeded comparisons per condition (default 200)")
    ap.add_argument("--tokens", type=int, default=256, help="tokens per stream (default 256)")
    ap.add_argument("--speed", type=float, default=20.0, help="simulator speed (default 20)")
    ap.add_argument("--max-repeat", type=int, default=20, help="repeat='auto' cap per arm (default 20)")
    ap.add_argument("--base-trials", type=int, default=BASE_TRIALS,
                    help=f"trials of the stored baseline in baseline mode (default {BASE_TRIALS})")
    ap.add_argument("--noise", nargs="*", default=list(NOISE), choices=list(NOISE))
    ap.add_argument("--changes", nargs="*", type=float, default=[0.0, -0.10], help="true changes of B (default 0 -0.1)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"threshold {THRESHOLD:.0%}, {args.comparisons} comparisons per condition, {args.tokens}-token streams, "
          f"speed {args.speed:g}, stored baseline of {args.base_trials} trials; 'regressed' is the false-alarm rate "
          "at change 0 and the detection rate below it")
    print(f"{'noise (cv)':<18}{'change':>7}  {'design':<11}{'regressed':>10}{'passed':>8}{'inconcl':>8}"
          f"{'trials':>8}{'endpoint s':>11}{'vs fixed':>9}", flush=True)
    rows: list[dict[str, Any]] = []
    fixed: dict[tuple[str, float, str], float] = {}
    for noise in args.noise:
        for ch in args.changes:
            for r in run_condition(noise, ch, args):
                rows.append(r)
                mode = r["design"].split("-")[0]
                if r["design"].endswith("fixed"):
                    fixed[(r["noise"], r["change"], mode)] = r["seconds"]
                ratio = r["seconds"] / fixed[(r["noise"], r["change"], mode)] - 1
                label = f"{r['noise']} ({r['cv']:.1%})"
                print(f"{label:<18}{r['change']:>+7.0%}  {r['design']:<11}{r['regressed']:>10.3f}{r['passed']:>8.3f}"
                      f"{r['inconclusive']:>8.3f}{r['trials']:>8.2f}{r['seconds']:>11.2f}{ratio:>+9.0%}", flush=True)
    pooled: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        pooled.setdefault((r["noise"], r["design"]), []).append(r["seconds"])
    for noise in args.noise:
        for mode in ("ab", "base"):
            f, a = np.mean(pooled[(noise, f"{mode}-fixed")]), np.mean(pooled[(noise, f"{mode}-auto")])
            print(f"{noise} {mode}: mean endpoint time over the conditions, auto vs fixed {a / f - 1:+.0%}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
