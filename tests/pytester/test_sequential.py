"""repeat="auto": error rates of the sequential test on the simulator's noise model, and the gate end to end."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from support import judged_json
from support.records import record, records

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.compare import gates as gating
from pytest_specperf.compare import sequential
from pytest_specperf.errors import ConfigError
from pytest_specperf.measure import interleaved, repeats
from pytest_specperf.sim import SimServer, load_profile
from pytest_specperf.sim.model import plan

# The healthy profile with 30 % per-step jitter: per 256-token stream a log-sd of ~3 %, a typical within-job CV.
NOISY = {"jitter": 0.3}


def _trial_source(change: float, rng: random.Random, noise: dict[str, float] = NOISY) -> Callable[[], Any]:
    """Trials of one arm: the decode rate of a 256-token generation drawn from the simulator's own model
    (the same step plan a SimServer would sleep through), seeded, with steps slowed by ``change``."""
    profile = load_profile("healthy", {**noise, "step_ms": 20.0 / (1.0 + change)})

    def trial() -> Any:
        _, steps = plan(profile, 200, "prose", 256, seed=rng.randrange(2**31))
        tps = sum(s.tokens for s in steps) / (sum(s.step_ms for s in steps) / 1000.0)
        return record({"nodeid": "t", "kind": "two_point", "decode_tps": tps})  # one trial: one value

    return trial


def _ab(change: float, n: int, seed: int) -> tuple[list[str], list[int]]:
    rng = random.Random(seed)
    verdicts, trials = [], []
    for _ in range(n):
        a, b, ccs = interleaved.ab_until_decided(_trial_source(0.0, rng), _trial_source(change, rng), max_repeat=20,
                                      max_regression=0.05, metrics=("decode_tps",))
        verdicts.append(ccs[0].verdict)
        trials.append(len(a) + len(b))
    return verdicts, trials


def test_error_rates_and_trials_on_the_simulator_noise_model() -> None:
    # 80 seeded A/B comparisons per condition (benchmarks/sequential.py runs 200 on live simulators).
    same, n_same = _ab(0.0, 80, seed=1)
    slow, n_slow = _ab(-0.10, 80, seed=2)
    assert same.count("regressed") <= 1  # false alarms: ~1 % allowed
    assert slow.count("regressed") >= 76  # detection of a 10 % regression: >= 95 %
    fixed = 2 * 10  # the fixed design: 10 trials per arm
    assert np.mean(n_same + n_slow) <= 0.6 * fixed, (np.mean(n_same), np.mean(n_slow))
    assert same.count("passed") >= 76  # a stable build is passed, not left inconclusive


def _against_baseline(change: float, n: int, seed: int, base_trials: int) -> tuple[list[str], list[int]]:
    """``n`` candidates judged as the runner and the gate do against a stored run of ``base_trials`` trials:
    trials are added while ``until_baseline`` says undecided (20 at most), then the final comparison."""
    rng = random.Random(seed)
    verdicts, trials = [], []
    for _ in range(n):
        base_trial = _trial_source(0.0, rng, NOISIER)
        base = [base_trial() for _ in range(base_trials)]
        trial = _trial_source(change, rng, NOISIER)
        until = sequential.until_baseline(base, "t", max_regression=0.05, metrics=("decode_tps",))
        cand = [trial()]
        while len(cand) < 20 and not until({"decode_tps": [c.decode_tps for c in cand]}):
            cand.append(trial())
        (cc,) = sequential.sprt_runs(base, cand, max_regression=0.05, metrics=("decode_tps",), final=True)
        verdicts.append(cc.verdict)
        trials.append(len(cand))
    return verdicts, trials


# 40 % per-step jitter: a per-trial log-sd of ~4.2 %, the noisier of the benchmark's conditions.
NOISIER = {"jitter": 0.4}


def test_error_rates_against_a_small_stored_baseline() -> None:
    # A stored run of 5 trials: its mean's error stays in every look however many candidate trials are added.
    # 100 seeded comparisons per condition (benchmarks/sequential.py runs 200 on live simulators).
    same, n_same = _against_baseline(0.0, 100, seed=3, base_trials=5)
    slow, n_slow = _against_baseline(-0.10, 100, seed=4, base_trials=5)
    assert same.count("regressed") <= 1, same.count("regressed")  # false alarms: ~1 % allowed
    assert slow.count("regressed") >= 95, slow.count("regressed")  # detection of a 10 % regression: >= 95 %
    assert np.mean(n_same + n_slow) <= 0.6 * 10, (np.mean(n_same), np.mean(n_slow))  # fixed: 10 candidate trials


def test_unequal_noise_is_not_pooled_away() -> None:
    # A noisy stored baseline (6 % per trial) and a quiet candidate (1 %), nothing changed: pooling the two
    # variances would take the candidate's quiet for the baseline's and raise false alarms past 1 %.
    rng = np.random.default_rng(21)
    alarms = 0
    for _ in range(1000):
        base, cand = np.exp(rng.normal(0.0, 0.06, 5)), np.exp(rng.normal(0.0, 0.01, 20))
        for n in range(sequential.MIN_TRIALS, 21):
            d = sequential.sprt(base, cand[:n], stored=True, final=n == 20)
            if d.verdict != "continue":
                alarms += d.verdict == "regressed"
                break
    assert alarms <= 10, alarms


def test_too_small_a_baseline_names_the_fix() -> None:
    # One baseline trial at ~4 % noise cannot show a 5 % threshold even with 20 candidate trials.
    rng = random.Random(6)
    base, cand = [_trial_source(0.0, rng, NOISIER)()], [_trial_source(-0.05, rng, NOISIER)() for _ in range(20)]
    (cc,) = sequential.sprt_runs(base, cand, max_regression=0.05, metrics=("decode_tps",), final=True)
    assert cc.verdict == "inconclusive", cc.reason
    assert "1 baseline trials are too few" in cc.reason and "save the baseline with repeat=" in cc.reason, cc.reason


def test_sprt_waits_for_its_first_look_and_for_the_medians() -> None:
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    assert sequential.sprt(base, [80.0, 81.0]).verdict == "continue"  # 2 candidate trials: no look yet
    assert sequential.sprt(base, [80.0, 81.0, 80.5]).verdict == "regressed"
    assert sequential.sprt(base, [100.0, 100.2, 99.8]).verdict == "passed"
    # Lower is better (ttft): 20 % longer is a regression.
    assert sequential.sprt([0.10, 0.101, 0.099], [0.12, 0.121, 0.119], direction="lower").verdict == "regressed"


def test_hiccup_trials_do_not_hide_a_regression() -> None:
    # 3 % per-trial noise, and 1 trial in 20 a 30 % hiccup on either side (a stall, a noisy neighbour):
    # a 10 % regression is still found in >= 95 % of comparisons (unclipped hiccups inflate the variance
    # and leave ~12 % of them undecided).
    rng = np.random.default_rng(5)

    def trials(mu: float) -> np.ndarray:
        x = np.exp(rng.normal(mu, 0.03, 20))
        x[rng.random(20) < 0.05] *= 0.7
        return x

    found = 0
    for _ in range(150):
        a, b = trials(0.0), trials(np.log(0.9))
        for n in range(sequential.MIN_TRIALS, 21):
            d = sequential.sprt(a[:n], b[:n])
            if d.verdict != "continue":
                found += d.verdict == "regressed"
                break
    assert found >= 143, found


@pytest.mark.parametrize(("kw", "needle"), [
    ({"repeat": "often"}, "repeat must be an integer >= 1 or 'auto'"),
    ({"repeat": 3, "max_repeat": 10}, "max_repeat applies to repeat='auto' only"),
    ({"repeat": "auto", "max_repeat": 2}, "max_repeat must be an integer >= 3"),
])
def test_auto_keywords_are_validated(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        build_spec("two_point", kw)
    with pytest.raises(ConfigError, match="repeat='auto' is for sustained, two_point, load_sweep, rate and session "
                                          "cases; give a context sweep"):
        build_spec("ctx_sweep", {"repeat": "auto"})


def test_drift_gate_adds_streams_until_decided(runner_for: Any) -> None:
    # Drift near the limit under heavy noise: three streams often cannot decide it, more do (or max_repeat).
    ramp = {"jitter": 0.3, "accept_dist": "geometric", "step_ms_per_1k_generated": 10.0}
    # at speed 5 the drift windows last about 120 ms: at speed 20 (31 ms) beside two CPU hogs the timing noise
    # (7 ms) left them too short to time, and drift was rightly not judged
    with SimServer("healthy", speed=5, overrides=ramp) as sim:
        runner = runner_for(sim.url)
        spec = build_spec("sustained", {"tokens": 600, "ctx": 200, "repeat": "auto", "max_repeat": 7})
        results = [runner.run(spec, f"t::{i}") for i in range(3)]
    for r in results:
        assert len(r.streams) == r.repeat >= 3
        if r.repeat < 7:  # stopped early: decided
            assert r.drift_verdict in ("passed", "failed"), r.drift_gate
        if r.repeat > 3:  # went on: the first three streams were undecided
            assert r.drift_verdict == "inconclusive" or r.repeat > 3
    assert max(r.repeat for r in results) > 3, [r.drift_gate for r in results]


SLOW = """
accept_dist: min-variance
prefill_tokens_per_s: 20000
step_ms: 23.53
step_ms_per_1k_ctx: 0.2
accept_len: {prose: 3.0, code: 4.0, reasoning: 2.9, repetitive: 6.0}
max_accept: 8
jitter: 0.02
"""
CASE = """
import pytest

@pytest.mark.sustained(tokens=300, ctx=200, repeat="auto", max_repeat=8)
def test_case(specperf):
    pass
"""


@pytest.fixture(scope="module")
def ab_sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    slow = tmp_path_factory.mktemp("seq") / "slow.yaml"
    slow.write_text(SLOW)
    with SimServer("healthy", speed=8) as a, SimServer("healthy", speed=8) as a2, SimServer(slow, speed=8) as b:
        yield a.url, a2.url, b.url


def _result(path: Path) -> dict[str, Any]:
    (r,) = json.loads(path.read_text())["results"]
    return r


def test_auto_against_a_saved_baseline(pytester: pytest.Pytester, ab_sims: tuple[str, str, str]) -> None:
    a, a2, slow = ab_sims
    pytester.makepyfile(test_perf=CASE)
    out = pytester.path / "r.json"
    saved = pytester.runpytest_subprocess(f"--endpoint={a}", "--specperf-save=base", f"--specperf-json={out}")
    saved.assert_outcomes(passed=1)
    base_trials = _result(out)["repeat"]
    # saved with nothing to compare: sized to serve as a baseline (at least 5, more at its noise, 8 at most)
    assert sequential.SAVED_BASELINE_TRIALS <= base_trials <= 8
    bad = pytester.runpytest_subprocess(f"--endpoint={slow}", "--specperf-compare=base", f"--specperf-json={out}")
    bad.assert_outcomes(failed=1)
    # Same prompts, seeds and text as the saved trials: compared in pairs.
    bad.stdout.fnmatch_lines(["*decode_tps -1*% * vs baseline (sequential test, * pairs*: regressed beyond 5%*"])
    r = _result(out)
    assert 3 <= r["repeat"] <= base_trials and len(r["streams"]) == r["repeat"]
    good = pytester.runpytest_subprocess(f"--endpoint={a2}", "--specperf-compare=base", f"--specperf-json={out}")
    good.assert_outcomes(passed=1)
    cmp = {c["metric"]: c for c in _result(out)["comparisons"]}
    assert cmp["decode_tps"]["verdict"] == "passed" and cmp["decode_tps"]["comparison"]["method"] == "sprt-paired"


def test_auto_in_ab_mode(pytester: pytest.Pytester, ab_sims: tuple[str, str, str]) -> None:
    a, a2, slow = ab_sims
    pytester.makepyfile(test_perf=CASE)
    out = pytester.path / "r.json"
    # Judged by what the trials themselves showed: beside other jobs a trial's noise reached 9.2% here, past
    # where the sequential test's rates hold (NOISE_CHECKED x the 5% threshold); there undecided is honest.
    noisy = sequential.NOISE_CHECKED * 0.05
    bad = pytester.runpytest_subprocess(f"--specperf-ab={a},{slow}", f"--specperf-json={out}")
    r = _result(out)
    assert 3 <= r["ab"]["trials"] <= 8 and len(r["ab"]["a_decode_tps"]) == r["ab"]["trials"]
    (dec,) = [c for c in r["comparisons"] if c["metric"] == "decode_tps"]
    assert dec["comparison"]["method"] == "sprt"
    # B is 15% slower (the profile's truth): never passed; regressed unless the noise was past the checked range
    assert dec["verdict"] == "regressed" or (dec["verdict"] == "inconclusive" and dec["comparison"]["noise"] > noisy)
    bad.assert_outcomes(**({"failed": 1} if dec["verdict"] == "regressed" else {"passed": 1}))
    good = pytester.runpytest_subprocess(f"--specperf-ab={a},{a2}", f"--specperf-json={out}")
    (same,) = [c for c in _result(out)["comparisons"] if c["metric"] == "decode_tps"]
    # identical arms: never regressed; passed unless the noise was past the checked range
    assert same["verdict"] == "passed" or (same["verdict"] == "inconclusive" and same["comparison"]["noise"] > noisy)
    good.assert_outcomes(passed=1)


def test_two_point_auto_against_a_baseline(ab_sims: tuple[str, str, str], runner_for: Any) -> None:
    a, _, slow = ab_sims
    spec = build_spec("two_point", {"ctx": 200, "repeat": "auto", "max_repeat": 8})
    gate = gating.Gate(0.05)
    base = runner_for(a).run(spec, "t::tp").as_dict()
    assert base["repeat"] == 3  # nothing to decide without a baseline: the first look's trials
    until = repeats.until_baseline(gate, "t::tp", [record(base)])
    cand = runner_for(slow).run(spec, "t::tp", until=until).as_dict()
    judged_json.against_baseline(gate, cand, [base], auto=True)
    (dec,) = [c for c in cand["comparisons"] if c["metric"] == "decode_tps"]
    assert dec["verdict"] == "regressed" and dec["comparison"]["method"] == "sprt"
    assert len(cand["samples_tps"]) == cand["repeat"] < 8


def test_final_look_needs_the_change_beyond_the_threshold() -> None:
    # At max_repeat the sequential looks are undecided; the t-test finds the candidate significantly worse, but by
    # less than the 5 % threshold: not a regression. The same noise with a change just beyond the threshold is one.
    rng = np.random.default_rng(8)
    z = rng.normal(0.0, 1.0, 40)
    z = (z - z.mean()) / z.std(ddof=1) * 0.04
    base = np.exp(z[:20])
    for change, want in ((-0.049, "continue"), (-0.055, "regressed")):
        cand = np.exp(z[20:] - z[20:].mean() + z[:20].mean() + np.log1p(change))
        undecided = sequential.sprt(base, cand, stored=True, final=False)
        last = sequential.sprt(base, cand, stored=True, final=True)
        assert undecided.verdict == "continue", (change, undecided)
        p = scipy.stats.ttest_ind(np.log(cand), np.log(base), alternative="less").pvalue
        assert p < sequential.FINAL_SHARE * sequential.ALPHA  # significant either way: the effect size decides
        assert last.verdict == want, (change, last)


def test_a_decided_metric_stays_decided_while_the_case_goes_on() -> None:
    # decode_tps passes at the first look (3 trials like the baseline's); the case goes on for a noisy ttft_s, and
    # later decode trials 12 % lower must not reopen it: each later look would be an uncounted chance to fail.
    base = records([{"nodeid": "t", "kind": "sustained",
                     "streams": [{"decode_tps": 100.0 * (1 + 0.002 * i), "ttft_s": 0.2 * (1 + 0.3 * (-1) ** i)}
                                 for i in range(5)]}])
    streams = [{"decode_tps": 100.0 * (1 + 0.002 * i) * (1.0 if i < 3 else 0.88), "ttft_s": 0.2 * (1 + 0.3 * (-1) ** i)}
               for i in range(20)]
    cand = records([{"nodeid": "t", "kind": "sustained", "streams": streams}])
    ccs = {cc.metric: cc for cc in sequential.sprt_runs(base, cand, max_regression=0.05,
                                                           metrics=("decode_tps", "ttft_s"), final=True)}
    assert ccs["decode_tps"].verdict == "passed", ccs["decode_tps"].reason
    assert "5 vs 3 trials" in ccs["decode_tps"].reason


def test_case_alpha_is_split_over_its_gated_metrics() -> None:
    # Two gated metrics share the case's 1 %: each look's regressed bound is Wald's at 0.75 x 0.5 %.
    rng = np.random.default_rng(9)
    streams = [{"decode_tps": float(x), "ttft_s": float(y)} for x, y in
               zip(np.exp(rng.normal(4.6, 0.03, 8)), np.exp(rng.normal(-1.6, 0.03, 8)), strict=True)]
    one = records([{"nodeid": "t", "kind": "sustained", "streams": [{"decode_tps": s["decode_tps"]} for s in streams]}])
    two = records([{"nodeid": "t", "kind": "sustained", "streams": streams}])
    for results, alpha in ((one, sequential.ALPHA), (two, sequential.ALPHA / 2)):
        (cc, *_) = sequential.sprt_runs(results, results, max_regression=0.05, metrics=("decode_tps", "ttft_s"))
        upper = sequential.bounds(alpha * (1 - sequential.FINAL_SHARE))[1]
        assert f"{upper:.2f}]" in cc.reason, (alpha, cc.reason)


def test_false_alarms_per_case_over_two_metrics_within_the_stated_noise() -> None:
    # The case as the gate judges it: 5 stored trials, up to 20 candidate trials, two gated metrics each at its half
    # of alpha (test_case_alpha_is_split_over_its_gated_metrics), both at 4 % per-trial noise (0.8x the threshold,
    # the edge of the stated range), nothing changed. 1,000 seeded cases (benchmarks/sequential.py --synthetic runs
    # 4,000 per condition): false alarms within the case's 1 %.
    rng = np.random.default_rng(10)
    alarms = 0
    for _ in range(1000):
        verdicts = [sequential.first_decision(np.exp(rng.normal(0.0, 0.04, 5)), np.exp(rng.normal(0.0, 0.04, 20)),
                                              stored=True, final=True, alpha=sequential.ALPHA / 2).verdict
                    for _metric in range(2)]
        alarms += "regressed" in verdicts
    assert alarms <= 10, alarms


def _hidden_check_trials(slower: float, seeds: list[int], rng: random.Random) -> list[dict[str, Any]]:
    """One run of the saved-baseline check's case: 200-token streams on healthy with geometric acceptance (8.3 %
    per-trial noise), steps ``slower``. Trial i's accepted drafts follow its seed (same prompt, greedy: the same
    text), its step times a jitter of their own, as a real server's do."""
    profile = load_profile("healthy", {"accept_dist": "geometric", "jitter": 0.0,
                                       "step_ms": 20.0 * (1 + slower), "step_ms_per_1k_ctx": 0.2 * (1 + slower)})
    streams = []
    for seed in seeds:
        _, steps = plan(profile, 200, "prose", 200, seed=seed)
        ms = sum(st.step_ms * min(2.0, max(0.2, 1 + 0.02 * rng.gauss(0.0, 1.0))) for st in steps)
        streams.append({"decode_tps": sum(st.tokens for st in steps) / (ms / 1000.0), "text_sha": str(seed)})
    return [{"nodeid": "t", "kind": "sustained", "streams": streams}]


def _saved_check(paired: bool, sized: bool, n: int, seed: int) -> int:
    """Detections of a 15 % step slowdown (-13 % decode) in ``n`` seeded runs of the saved-baseline check."""
    rng = random.Random(seed)
    found = 0
    for _ in range(n):
        seeds = [rng.randrange(2**31) for _ in range(20)]
        until = sequential.until_saved(max_repeat=20, max_regression=0.05)
        nb = sequential.SAVED_BASELINE_TRIALS
        while sized and nb < 20:
            values = {"decode_tps": [s["decode_tps"] for s in _hidden_check_trials(0.0, seeds[:nb], rng)[0]["streams"]]}
            if until(values):
                break
            nb += 1
        base = _hidden_check_trials(0.0, seeds[:nb], rng)
        cand = _hidden_check_trials(0.15, seeds, rng)
        if not paired:  # different text per trial: the design before pairing
            for s in cand[0]["streams"]:
                s["text_sha"] = None
        # All 20 candidate trials at once: the verdict is the first look that decided, as the runner would stop.
        (cc,) = sequential.sprt_runs(records(base), records(cand), max_regression=0.05, metrics=("decode_tps",),
                                     final=True)
        found += cc.verdict == "regressed"
    return found


def test_a_saved_baseline_finds_the_slower_steps_its_noise_hid() -> None:
    # The saved-baseline check (8.3 % per-trial noise, 15 % slower steps): 5 saved trials compared unpaired found
    # the -13 % in about 3 runs of 4 (and never in the check's own seeds); sized to its noise and compared in
    # pairs it finds it every time.
    # (benchmarks/sequential.py --saved-check: 0.73 of 1,000 before.)
    assert _saved_check(paired=False, sized=False, n=20, seed=11) <= 18
    assert _saved_check(paired=True, sized=False, n=12, seed=14) == 12  # pairs alone: 5 saved trials are enough
    assert _saved_check(paired=True, sized=True, n=12, seed=12) == 12


def test_a_saved_baseline_is_sized_to_its_noise() -> None:
    rng = np.random.default_rng(13)
    until = sequential.until_saved(max_repeat=20, max_regression=0.05)
    quiet = {"decode_tps": list(np.exp(rng.normal(4.6, 0.01, 5)))}
    assert until(quiet)  # 1 % noise: five trials decide 5 %
    noisy = np.exp(rng.normal(4.6, 0.083, 20))
    assert not until({"decode_tps": list(noisy[:5])}) and not until({"decode_tps": list(noisy[:19])})
    streams = [{"decode_tps": float(x)} for x in noisy]
    (note,) = sequential.saved_notes(record({"kind": "sustained", "streams": streams}), max_repeat=20,
                                     max_regression=0.05)
    assert "20 trials at" in note and "too few" in note and "compared in pairs" in note, note
    assert sequential.saved_notes(record({"kind": "sustained", "streams": [
        {"decode_tps": float(x)} for x in noisy[:5] / noisy[:5] * 100 * np.exp(rng.normal(0, 0.01, 5))]}),
        max_repeat=20, max_regression=0.05) == []


def test_pairs_only_where_the_text_repeats() -> None:
    def side(keys: str) -> list[Any]:
        return records([{"nodeid": "t", "kind": "sustained",
                         "streams": [{"decode_tps": 1.0, "text_sha": k} for k in keys]}])

    base, same, other = side("abcde"), side("abc"), side("abx")
    assert sequential.pairable(base, same) == 3 and sequential.pairable(base, other) == 0
