"""repeat="auto" (sequential test) against a fixed 10-trial design, on the simulator.

For each condition (noise level x true change of B against A) it runs ``--comparisons`` seeded A/B
comparisons on two simulators (B's steps slowed by the change) and prints, per design:
false alarms (regressed when nothing changed) or detections (regressed at a real regression),
inconclusive verdicts, mean trials and mean endpoint time (simulated seconds at speed 1).

Both designs judge the same streams: trial i of comparison c is one stream with a seed of its own,
measured once and shared (common random numbers), so the difference between designs is the
design's alone. Designs:

* A/B, fixed: 10 trials per arm, ``compare.compare_case`` (the rule ``repeat=10`` uses);
* A/B, auto: ``interleaved.ab_until_decided`` (``repeat="auto"``, max_repeat 20), ABBA rounds;
* baseline, fixed / auto: A's first 5 trials (``--base-trials``) stand for a stored run; the
  candidate (B) runs 10 trials, or sequential ones until decided (``sprt(..., stored=True)``, its last
  look at ``max_repeat``). Endpoint time counts the candidate's trials only.

Run: ``python benchmarks/sequential.py`` (about 20 minutes on 2 busy cores; ``--comparisons 50``
for a quick look).

``--synthetic`` instead judges seeded normal log-noise without a server, ``--comparisons`` (default 4,000)
per condition, as the gate does: each gated metric's sequential test with its share of alpha, the case
regressed when any metric is (every condition the docs name: against 5 stored trials, A/B, paired; one or
two gated metrics; 2 to 10 % per-trial noise). ``--saved-check`` runs the saved-baseline check (8.3 % noise,
15 % slower steps) on the simulator's model: its detection before (5 saved trials, unpaired) and after
(sized to the noise, paired).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# a simulated trial as its result record: the one helper the seeded benchmarks share (run as scripts, this folder
# is on the path)
from case_error_rates import record

from pytest_specperf.cases.results import Result
from pytest_specperf.compare import sequential
from pytest_specperf.compare import trials as compare
from pytest_specperf.endpoint.client import Client
from pytest_specperf.measure import interleaved
from pytest_specperf.prompts.exact_length import build_prompt
from pytest_specperf.run import stream_figures as measure
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

    def one(arm: Arm, name: str) -> Result:
        tps, _ = arm.trial(c, used[name])
        used[name] += 1
        return record({"nodeid": "x", "kind": "two_point", "decode_tps": tps})  # one value per trial

    _, _, ccs = interleaved.ab_until_decided(lambda: one(a, "A"), lambda: one(b, "B"), max_repeat=max_repeat,
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


def _case(mode: str, sig: float, metrics: int, rng: np.random.Generator, change: float = 0.0, nb: int = 5,
          max_repeat: int = 20) -> tuple[str, int]:
    """One seeded case: (verdict, candidate trials), each metric's test as the gate runs it (``first_decision``
    with its share of alpha: looks until decided, the last at ``max_repeat``), the case as long as its longest."""
    alpha = sequential.ALPHA / metrics
    verdicts, trials = [], []
    for _ in range(metrics):
        base = np.exp(rng.normal(0.0, sig, max(nb, max_repeat)))
        cand = np.exp(rng.normal(np.log1p(change), sig, max_repeat))
        if mode == "ab":
            n, d = _ab_path(base, cand, alpha)
        else:
            paired = mode == "paired"
            b = base[:nb]
            top = nb if paired else max_repeat
            d = sequential.first_decision(b, cand[:top], stored=True, final=True, paired=paired, alpha=alpha)
            n = d.n_cand
        verdicts.append(d.verdict)
        trials.append(n)
    verdict = "regressed" if "regressed" in verdicts else "passed" if all(v == "passed" for v in verdicts) else \
        "inconclusive"
    return verdict, max(trials)


def _ab_path(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[int, sequential.Decision]:
    d = sequential.first_decision(a, b, stored=False, alpha=alpha)
    return d.n_cand, d


def synthetic(args: argparse.Namespace) -> None:
    """False alarms per case in every condition the docs name, ``args.comparisons`` seeded cases each."""
    conditions = [(m, s, k) for m in ("stored", "ab") for k in (1, 2) for s in (0.02, 0.04, 0.06, 0.08, 0.10)]
    conditions += [("paired", s, k) for k in (1, 2) for s in (0.04, 0.08)]
    print(f"threshold {THRESHOLD:.0%}, {args.comparisons} seeded cases per condition, nothing changed; stored: 5 "
          f"saved trials, up to 20 candidate trials; paired: 20 saved trials; stated rate {sequential.ALPHA:.0%} "
          f"per case within {sequential.NOISE_CHECKED:g}x the threshold")
    print(f"{'mode':<8}{'metrics':>8}{'noise':>7}{'in range':>9}{'false alarms':>13}{'passed':>8}{'trials':>8}")
    for i, (mode, sig, k) in enumerate(conditions):
        rng = np.random.default_rng(1000 + i)
        rows = [_case(mode, sig, k, rng, nb=20 if mode == "paired" else 5) for _ in range(args.comparisons)]
        fa = sum(v == "regressed" for v, _ in rows) / len(rows)
        ok = "yes" if sig <= sequential.NOISE_CHECKED * THRESHOLD + 1e-9 else "no"
        print(f"{mode:<8}{k:>8}{sig:>7.0%}{ok:>9}{fa:>13.2%}{sum(v == 'passed' for v, _ in rows) / len(rows):>8.3f}"
              f"{np.mean([t for _, t in rows]):>8.2f}", flush=True)


def saved_check(args: argparse.Namespace) -> None:
    """Detection of the saved-baseline check's -13 % (15 % slower steps, 8.3 % noise) before and after."""
    import random

    from pytest_specperf.sim import load_profile
    from pytest_specperf.sim.model import plan

    def run(slower: float, seeds: list[int], rng: random.Random) -> list[dict[str, Any]]:
        profile = load_profile("healthy", {"accept_dist": "geometric", "jitter": 0.0, "step_ms": 20.0 * (1 + slower),
                                           "step_ms_per_1k_ctx": 0.2 * (1 + slower)})
        streams = []
        for seed in seeds:  # the seed fixes the accepted drafts (same text); step jitter is the run's own
            _, steps = plan(profile, 200, "prose", 200, seed=seed)
            ms = sum(st.step_ms * min(2.0, max(0.2, 1 + 0.02 * rng.gauss(0.0, 1.0))) for st in steps)
            streams.append({"decode_tps": sum(st.tokens for st in steps) / (ms / 1000.0), "text_sha": str(seed)})
        return [{"nodeid": "t", "kind": "sustained", "streams": streams}]

    for label, paired, sized in (("before: 5 saved trials, unpaired", False, False),
                                 ("sized to the noise, unpaired", False, True),
                                 ("5 saved trials, paired", True, False),
                                 ("after: sized and paired", True, True)):
        rng = random.Random(7)
        found, inconclusive, cand_trials, base_trials = 0, 0, [], []
        for _ in range(args.comparisons):
            seeds = [rng.randrange(2**31) for _ in range(20)]
            full = run(0.0, seeds, rng)[0]["streams"]
            nb = sequential.SAVED_BASELINE_TRIALS
            until = sequential.until_saved(max_repeat=20, max_regression=THRESHOLD)
            while sized and nb < 20 and not until({"decode_tps": [s["decode_tps"] for s in full[:nb]]}):
                nb += 1
            base = [record({"nodeid": "t", "kind": "sustained", "streams": full[:nb]})]
            cand = run(0.15, seeds, rng)[0]["streams"]
            if not paired:
                cand = [{**s, "text_sha": None} for s in cand]
            until_c = sequential.until_baseline(base, "t", max_regression=THRESHOLD, metrics=("decode_tps",))
            k = sequential.MIN_TRIALS
            while k < 20 and not until_c({"decode_tps": [s["decode_tps"] for s in cand[:k]],
                                          "text_sha": [s["text_sha"] for s in cand[:k]]}):
                k += 1
            (cc,) = sequential.sprt_runs(base, [record({"nodeid": "t", "kind": "sustained", "streams": cand[:k]})],
                                            max_regression=THRESHOLD, metrics=("decode_tps",), final=True)
            found += cc.verdict == "regressed"
            inconclusive += cc.verdict == "inconclusive"
            cand_trials.append(k)
            base_trials.append(nb)
        n = args.comparisons
        print(f"{label:<36} detected {found / n:.3f}  inconclusive {inconclusive / n:.3f}  saved trials "
              f"{np.mean(base_trials):.1f}  candidate trials {np.mean(cand_trials):.1f}  ({n} runs)", flush=True)


LIVE_CASES = """
import pytest

@pytest.mark.parametrize("i", range({n}))
@pytest.mark.sustained(tokens=200, ctx=200, repeat="auto")
def test_case(specperf, i):
    pass
"""


def saved_check_live(args: argparse.Namespace) -> None:
    """The saved-baseline check on live simulators, through pytest: save ``--comparisons`` cases (distinct
    prompts and seeds) on healthy with geometric acceptance, compare them on a profile with 15 % slower steps.
    Runs whichever plugin ``PYTHONPATH`` imports, so the code before a change can run it too."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    geo = {"accept_dist": "geometric"}
    slow = {**geo, "step_ms": 23.0, "step_ms_per_1k_ctx": 0.23}
    with tempfile.TemporaryDirectory() as tmp, SimServer("healthy", speed=args.speed, overrides=geo) as a, \
            SimServer("healthy", speed=args.speed, overrides=slow) as b:
        Path(tmp, "test_saved.py").write_text(LIVE_CASES.format(n=args.comparisons))
        out = Path(tmp, "r.json")

        def pytest(*opts: str) -> list[dict[str, Any]]:
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *opts,
                            f"--specperf-json={out}", "-W", "ignore"], cwd=tmp, env=os.environ, capture_output=True,
                           check=False)
            return json.loads(out.read_text())["results"]

        saved = pytest(f"--endpoint={a.url}", "--specperf-save=base")
        cand = pytest(f"--endpoint={b.url}", "--specperf-compare=base")
    dec = [c for r in cand for c in r.get("comparisons") or [] if c["metric"] == "decode_tps"]
    found = sum(c["verdict"] == "regressed" for c in dec)
    print(f"saved trials {np.mean([r['repeat'] for r in saved]):.1f}, candidate trials "
          f"{np.mean([r['repeat'] for r in cand]):.1f}; 15 % slower steps found in {found} of {len(dec)} cases "
          f"({sum(c['verdict'] == 'inconclusive' for c in dec)} inconclusive)")
    for c in dec[:3]:
        print("  ", c["reason"])


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
    ap.add_argument("--synthetic", action="store_true", help="seeded normal noise, no server (false alarms per case)")
    ap.add_argument("--saved-check", action="store_true", help="the saved-baseline check on the simulator's model")
    ap.add_argument("--saved-check-live", action="store_true", help="the saved-baseline check on live simulators")
    ap.add_argument("--quick", action="store_true", help="a few comparisons of each mode: a check that it runs")
    args = ap.parse_args()
    if args.quick:  # each mode once, small: the simulator A/B, the synthetic false alarms, the saved check
        t0 = time.perf_counter()
        for extra in ({}, {"synthetic": True}, {"saved_check": True}):
            quick = argparse.Namespace(**{**vars(args), "comparisons": 3, "tokens": 64, "noise": ["low"],
                                          "changes": [0.0], "quick": False, "synthetic": False,
                                          "saved_check": False, **extra})
            if extra:
                quick.comparisons = 20
                (synthetic if quick.synthetic else saved_check)(quick)
            else:
                for r in run_condition("low", 0.0, quick):
                    print(f"{r['design']:<11} regressed {r['regressed']:.3f} passed {r['passed']:.3f}")
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
    t0 = time.perf_counter()
    if args.saved_check_live:
        args.comparisons = 12 if args.comparisons == 200 else args.comparisons
        saved_check_live(args)
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
    if args.synthetic or args.saved_check:
        if args.comparisons == 200:
            args.comparisons = 4000
        if args.synthetic:
            synthetic(args)
        else:
            saved_check(args)
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
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
