"""Speculation's crossover and load A/B rows: trials are the samples, the speedup is its interval's centre.

Seeded simulations of the statistic's error rates (benchmarks/crossover.py runs the same model at 2,000
comparisons per condition, and shows the rule before): per-user decode is lognormal around a known
speedup, with an offset per trial that every stream of the trial shares (they share the engine's steps).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_specperf.cases.results import LoadSweepResult, Recorded, Result, SustainedResult
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import crossover, samples
from pytest_specperf.compare import gates as gating
from pytest_specperf.compare import trials as compare
from pytest_specperf.measure import combine, interleaved
from tests.support.records import record
from tests.support.result_json import full


def _arm(rng: np.random.Generator, trials: int, speedup: float = 1.0, between: float = 0.025,
         within: float = 0.01, users: int = 8) -> list[Recorded]:
    out = []
    for _ in range(trials):
        tps = 100 * speedup * np.exp(rng.normal(0, between) + rng.normal(0, within, users))
        out.append(record({"kind": "load_sweep", "concurrency": [users], "levels": [
            {"concurrency": users, "streams": [{"decode_tps": float(v)} for v in tps]}]}))
    return out


def _sweep(speedups: dict[int, list[float]]) -> list[Recorded]:
    """One arm of trials whose per-level median user is given: {users: [value per trial]}."""
    n = len(next(iter(speedups.values())))
    return [record({"kind": "load_sweep", "concurrency": list(speedups), "levels": [
        {"concurrency": c, "streams": [{"decode_tps": v[i]}]} for c, v in speedups.items()]}) for i in range(n)]


def _summary(min_speedup: float | None) -> LoadSweepResult:
    """B's summary of a load sweep, before the crossover judges it."""
    return LoadSweepResult(kind="load_sweep", endpoint="b", model="m", server="s", ctx=0, prompt_tokens=None,
                           min_speedup=min_speedup)


def test_identical_arms_fail_min_speedup_at_most_at_the_stated_rate() -> None:
    # The known answer: B identical to A, 5 trials x 8 users, 2-3 % offset between trials. Pooling
    # streams as independent samples judged 'below' in about 24 % of these; one value per trial holds 1 %.
    rng = np.random.default_rng(20)
    verdicts = [crossover.crossover(_arm(rng, 5, between=b), _arm(rng, 5, between=b), min_speedup=1.0)
                .levels[0].verdict for b in np.linspace(0.02, 0.03, 1000)]
    below = verdicts.count("below")
    # Binomial(1000, 0.01): P(more than 20) = 0.1 %. This seed: 9 below, 8 holds.
    assert below <= 20, below
    assert verdicts.count("holds") <= 20  # the mirror image: B not shown faster when it is not
    assert below >= 5  # a rule that can never say 'below' is no gate either


def test_ten_percent_slower_is_below_with_five_trials() -> None:
    rng = np.random.default_rng(21)
    verdicts = [crossover.crossover(_arm(rng, 5), _arm(rng, 5, speedup=0.9), min_speedup=1.0).levels[0].verdict
                for _ in range(200)]
    assert verdicts.count("below") >= 190, verdicts.count("below")


def test_the_speedup_is_the_centre_of_its_interval_whatever_the_trials() -> None:
    # Property over seeded random arms: few trials, no spread, wild scales, lopsided noise. The estimate
    # lies inside [lo, hi] and is its centre in log space (the report once drew 0.6862 outside
    # [0.6868, 0.6919]); a and b decode are the arms' geometric means, so their ratio is the estimate.
    rng = np.random.default_rng(22)
    for _ in range(400):
        na, nb = rng.integers(1, 7, size=2)
        scale = 10 ** rng.uniform(-1, 4)
        a = list(scale * np.exp(rng.normal(0, rng.choice([0, 1e-12, 0.01, 0.3]), na)))
        b = list(scale * rng.uniform(0.3, 3) * np.exp(rng.normal(0, rng.choice([0, 0.01, 0.3]), nb)))
        lv = crossover.speedup_level(4, a, b, floor=float(rng.uniform(0.5, 2)))
        lo, hi = lv.interval
        assert lo <= lv.speedup <= hi, lv
        assert math.log(lv.speedup) == pytest.approx((math.log(lo) + math.log(hi)) / 2, abs=1e-9)
        assert lv.b_decode_tps / lv.a_decode_tps == pytest.approx(lv.speedup, rel=1e-9)


def test_verdicts_need_the_whole_interval_on_one_side_of_the_floor() -> None:
    a = [100.0, 103.0, 97.0, 101.0, 99.0]
    # Estimate just under the floor, interval reaching over it: not shown below.
    straddle = crossover.speedup_level(8, a, [98.0, 101.0, 95.0, 100.0, 97.0], floor=1.0)
    assert straddle.interval[0] < 1.0 < straddle.interval[1] and straddle.speedup < 1.0
    assert straddle.verdict == "inconclusive"
    # Estimate just over it, interval reaching under it: not shown to hold either.
    over = crossover.speedup_level(8, a, [101.0, 104.0, 98.0, 103.0, 100.0], floor=1.0)
    assert over.interval[0] < 1.0 < over.speedup and over.verdict == "inconclusive"
    below = crossover.speedup_level(8, a, [80.0, 82.0, 79.0, 81.0, 80.5], floor=1.0)
    assert below.interval[1] < 1.0 and below.verdict == "below"
    holds = crossover.speedup_level(8, a, [80.0, 82.0, 79.0, 81.0, 80.5], floor=0.7)
    assert holds.interval[0] >= 0.7 and holds.verdict == "holds"


def test_the_crossover_is_the_first_level_that_does_not_hold() -> None:
    # 1 user: 2x (holds); 4 users: 0.98 but noisy (under the floor, not significantly); 8 users: 0.8 (below).
    a = _sweep({1: [100, 101, 99], 4: [100, 106, 94], 8: [100, 101, 99]})
    b = _sweep({1: [200, 202, 198], 4: [98, 104, 92], 8: [80, 81, 79]})
    cross = crossover.crossover(a, b, min_speedup=1.0)
    assert [lv.verdict for lv in cross.levels] == ["holds", "inconclusive", "below"]
    assert cross.users == 4 and cross.verdict == "inconclusive"
    assert cross.text.startswith("B not shown faster for users from 4 users: speedup 0.98")
    # Gated, the 8-user level fails the case and is named; the 4-user one is the crossover.
    summary = _summary(1.0)
    assert crossover.apply(summary, a, b, "warn") == []
    assert summary.verdict == "failed"
    assert "from 4 users" in summary.reason and "at 8 users: below min_speedup 1, speedup 0.80" in summary.reason


def test_a_failing_reason_never_says_b_is_faster() -> None:
    # The case: at 8 users a ratio of medians said 1.01 over a Welch interval [0.816, 0.94], and the
    # case failed with "B faster for users at every level". Now the text is the level's own verdict.
    rng = np.random.default_rng(0)
    a = _sweep({1: list(rng.normal(100, 1, 3)), 8: list(rng.normal(100, 1, 3))})
    b = _sweep({1: list(rng.normal(200, 1, 3)), 8: [101.5, 70.0, 69.0]})
    summary = _summary(1.0)
    warnings = crossover.apply(summary, a, b, "warn")
    assert summary.crossover is not None
    lv = summary.crossover.levels[1]
    assert lv.interval[0] <= lv.speedup <= lv.interval[1]
    assert "B faster" not in summary.reason + "".join(warnings)
    assert summary.crossover.users == 8


def test_inconclusive_levels_follow_the_policy_and_without_min_speedup_it_is_a_note() -> None:
    a = _sweep({4: [100, 106, 94]})
    b = _sweep({4: [98, 104, 92]})
    warned = _summary(1.0)
    assert crossover.apply(warned, a, b, "warn") == [crossover.crossover(a, b, 1.0).text]
    assert warned.verdict == "passed"
    failed = _summary(1.0)
    assert crossover.apply(failed, a, b, "fail") == [] and failed.verdict == "failed"
    slower = _sweep({4: [80, 81, 79]})
    note = _summary(None)
    assert crossover.apply(note, a, slower, "fail") == []
    assert note.crossover is not None and note.verdict == "passed" and note.notes == [note.crossover.text]
    assert note.crossover.text.startswith("B slower for users from 4 users")


def test_few_trials_say_what_the_interval_rests_on() -> None:
    # 2 trials a side: Welch with ~1-2 degrees of freedom, a wide interval.
    two = crossover.speedup_level(8, [100.0, 103.0], [80.0, 81.0], floor=1.0)
    five = crossover.speedup_level(8, [100.0, 103.0, 101.0, 102.0, 100.5], [80.0, 81.0, 80.2, 80.6, 81.1], floor=1.0)
    assert two.method == five.method == "welch"
    assert math.log(two.interval[1] / two.interval[0]) > 3 * math.log(five.interval[1] / five.interval[0])
    # One trial on one arm: the other arm's spread (a prediction interval); none on either: the assumed 3 %.
    assert crossover.speedup_level(8, [100.0], [80.0, 82.0, 81.0], floor=1.0).method == "prediction"
    one = crossover.speedup_level(8, [100.0], [80.0], floor=1.0)
    flat = crossover.speedup_level(8, [100.0, 100.0], [80.0, 80.0], floor=1.0)
    assert one.method == flat.method == "noise-floor"
    assert "1 vs 1 trials; no spread to measure, 3% per trial assumed" in crossover.level_text(one)
    # The assumed noise is compare's: the same half-width compare_case gives one trial a side.
    c = compare.compare_case([100.0], [80.0], direction="higher")
    assert one.interval == pytest.approx([1 + c.change_ci[0], 1 + c.change_ci[1]], rel=1e-9)


def test_comparisons_of_a_load_case_take_one_value_per_trial() -> None:
    # A/B of sustained(concurrency=8), 5 trials an arm: 5 values a side, each trial's median user, not 40 streams.
    rng = np.random.default_rng(23)

    def trial(offset: float) -> dict[str, Any]:
        tps = 100 * np.exp(offset + rng.normal(0, 0.01, 8))
        return {"nodeid": "t::load", "kind": "sustained", "concurrency": 8, "verdict": "passed",
                "decode_tps": float(np.median(tps)), "ttft_s": 0.1, "total_tps": float(tps.sum()),
                "streams": [{"decode_tps": float(v), "ttft_s": 0.1} for v in tps]}

    a = [trial(o) for o in rng.normal(0, 0.03, 5)]
    b = [trial(o) for o in rng.normal(0, 0.03, 5)]
    ta, tb = [load_result(full(r)) for r in a], [load_result(full(r)) for r in b]
    ccs = compare.compare_ab(samples.per_trial(ta), samples.per_trial(tb), metrics=("decode_tps", "total_tps"))
    assert [(cc.comparison.n_base, cc.comparison.n_cand) for cc in ccs if cc.comparison] == [(5, 5), (5, 5)]
    # The combined A/B row keeps the trials, so a later --specperf-compare against it sees them too.
    row = combine.aggregate(tb)
    assert isinstance(row, SustainedResult) and row.trials is not None
    assert [t.decode_tps for t in row.trials] == [r["decode_tps"] for r in b]
    assert [s.trial for s in row.streams] == [i for i in range(5) for _ in range(8)]
    again = compare.compare_runs(samples.per_trial([row]), samples.per_trial(ta), metrics=("decode_tps",))
    assert (again[0].comparison.n_base, again[0].comparison.n_cand) == (5, 5)


def _level(c: int, decode: float, p10: float, verdict: str = "passed", reason: str = "") -> dict[str, Any]:
    streams = [{"decode_tps": decode, "ttft_s": 0.2, "response_id": f"r{c}-{decode}-{i}"} for i in range(c)]
    return {"concurrency": c, "kind": "sustained", "decode_tps": decode, "decode_p10_tps": p10, "ttft_s": 0.2,
            "total_tps": decode * c, "stalls": 1, "verdict": verdict, "reason": reason, "warnings": [], "notes": [],
            "streams": streams}


def test_ab_sweep_level_rows_combine_every_trial() -> None:
    # The case failed "at 8 users: p10 20.0 < 30" in trial 1 while the row showed trial 2's 40.0, passed.
    why = "p10 user decode 20.0 tok/s < min_tps 30 with 8 users"
    trials = [{"nodeid": "t::sweep", "kind": "load_sweep", "concurrency": [1, 8], "verdict": v, "reason": r,
               "levels": [_level(1, 100.0, 100.0), _level(8, d, p10, v, r)], "decode_tps": d, "total_tps": 8 * d,
               "warnings": [], "notes": []}
              for d, p10, v, r in ((30.0, 20.0, "failed", why), (50.0, 40.0, "passed", ""), (40.0, 35.0, "passed", ""))]
    row = combine.aggregate([load_result(full(t)) for t in trials])
    assert isinstance(row, LoadSweepResult)
    one, eight = row.levels
    assert row.verdict == eight.verdict == "failed" and one.verdict == "passed"
    assert eight.reason == f"trial 1 of 3: {why}"
    assert (eight.decode_tps, eight.decode_p10_tps, eight.total_tps) == (40.0, 35.0, 320.0)
    assert eight.stalls == 3 and len(eight.streams) == 24
    assert eight.trials is not None and [t.decode_tps for t in eight.trials] == [30.0, 50.0, 40.0]
    assert row.total_tps == 320.0  # the best combined level, as a single trial's sweep reports
    # Compared per trial: three results, each with its trial's level figures.
    expanded = samples.per_trial([row])
    assert [r.levels[1].decode_tps for r in expanded] == [30.0, 50.0, 40.0]
    assert all(not lv.streams for r in expanded for lv in r.levels)


def test_a_level_shows_the_drift_its_reason_names_and_the_arm() -> None:
    # The row said "1089.9 -> 1068.5  drift 0.02 ... failed" (medians over trials) beside the reason
    # "trial 3 of 3: drift 0.35 > 0.15: early 1660.1 tok/s -> late 1068.5 tok/s", which did not name arm B.
    why = "drift 0.35 > 0.15: early 1660.1 tok/s -> late 1068.5 tok/s"

    def level(drift: float, early: float, late: float, verdict: str, reason: str) -> dict[str, Any]:
        return {**_level(8, 1000.0, 900.0, verdict, reason), "drift": drift, "early_tps": early, "late_tps": late,
                "drift_verdict": verdict, "drift_gate": reason or f"drift {drift:.2f} <= 0.15"}

    trials = [{"nodeid": "t::sweep", "kind": "load_sweep", "concurrency": [8], "verdict": lv["verdict"],
               "reason": lv["reason"], "levels": [lv], "decode_tps": 1000.0, "total_tps": 8000.0, "warnings": [],
               "notes": []}
              for lv in (level(0.02, 1089.9, 1068.2, "passed", ""), level(0.01, 1090.3, 1079.4, "passed", ""),
                         level(0.35, 1660.1, 1068.5, "failed", why))]
    typed = [load_result(full(t)) for t in trials]
    (eight,) = combine.aggregate(typed, arm="B").levels  # type: ignore[attr-defined]  # a load sweep's
    assert eight.verdict == "failed" and eight.reason == f"arm B, trial 3 of 3: {why}"
    assert (eight.drift, eight.early_tps, eight.late_tps) == (0.35, 1660.1, 1068.5)
    assert eight.drift_gate == why and eight.decode_tps == 1000.0  # the rest stays the median of all trials
    # no trial drifted: the medians, as before
    calm = combine.aggregate(typed[:2], arm="B").levels[0]  # type: ignore[attr-defined]
    assert (calm.drift, calm.early_tps) == (0.015, 1090.1)


def _measure(per_user: dict[int, float], rng: np.random.Generator, min_speedup: float | None):
    """A load sweep trial: 4 streams a level around ``per_user``, a 2 % offset shared by the trial's streams."""
    def run() -> Result:
        offset = rng.normal(0, 0.02)
        levels = []
        for c, tps in per_user.items():
            streams = [{"decode_tps": float(v), "ttft_s": 0.1} for v in tps * np.exp(offset + rng.normal(0, 0.01, 4))]
            med = float(np.median([s["decode_tps"] for s in streams]))
            levels.append({"concurrency": c, "kind": "sustained", "decode_tps": med, "ttft_s": 0.1,
                           "total_tps": med * c, "verdict": "passed", "reason": "", "warnings": [], "notes": [],
                           "streams": streams})
        return load_result(full({"nodeid": "t::sweep", "kind": "load_sweep", "endpoint": "http://x",
                                 "verdict": "passed", "reason": "", "concurrency": list(per_user), "levels": levels,
                                 "min_speedup": min_speedup, "decode_tps": levels[-1]["decode_tps"], "ttft_s": 0.1,
                                 "warnings": [], "notes": []}))
    return run


@pytest.mark.parametrize(("min_speedup", "verdict"), [(None, "failed"), (1.0, "failed"), (0.7, "passed")])
def test_with_min_speedup_the_floor_is_the_sweeps_ab_gate(min_speedup: float | None, verdict: str) -> None:
    # Speculation on (B) against off (A): 2.5x alone, 0.8x at 8 users. Without min_speedup the regression gate
    # judges every level (-20 % per user at 8 users regresses) and the crossover is a note; with it, the floor
    # alone judges (the comparisons are shown, not gated): 1.0 fails at 8 users, 0.7 passes although per-user
    # decode fell 20 %.
    rng = np.random.default_rng(24)
    gate = gating.Gate(max_regression=0.05)
    summary, _ = interleaved.run_ab(_measure({1: 100.0, 8: 100.0}, rng, min_speedup),
                               _measure({1: 250.0, 8: 80.0}, rng, min_speedup), 5, gate)
    assert isinstance(summary, LoadSweepResult) and summary.crossover is not None and summary.comparisons
    assert summary.verdict == verdict, summary.reason
    cross = summary.crossover
    assert cross.users == (8 if min_speedup != 0.7 else None)
    # Either way the per-level comparisons are there to read, one value per trial a side.
    assert {(c.comparison.n_base, c.comparison.n_cand) for c in summary.comparisons if c.comparison} == {(5, 5)}
    regressed = {c.users for c in summary.comparisons if c.verdict == "regressed"}
    assert 8 in regressed
    if min_speedup is None:
        assert summary.reason.startswith("at 8 users: decode_tps") and "B slower" not in summary.reason
        assert cross.text in summary.notes
    else:
        assert f"A/B judged by min_speedup {min_speedup:g}" in " ".join(summary.notes)
        assert (summary.reason == cross.text) == (verdict == "failed")


def test_min_speedup_outside_ab_is_a_note_not_a_verdict() -> None:
    result = LoadSweepResult(kind="load_sweep", endpoint="e", model="m", server="sim", ctx=64, prompt_tokens=None,
                             min_speedup=1.0)
    crossover.unjudged(result)
    assert result.verdict == "passed"
    assert result.notes == ["min_speedup 1 not judged: the speedup is B over A per level, which needs an A/B run "
                            "(--specperf-ab=A_URL,B_URL)"]
    quiet = LoadSweepResult(kind="load_sweep", endpoint="e", model="m", server="sim", ctx=64, prompt_tokens=None)
    crossover.unjudged(quiet)
    assert quiet.notes == []
