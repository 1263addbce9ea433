"""Regression gating maths (pytest_specperf.compare.trials): seeded, no server."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from pytest_specperf.cases.figures import _kind, sub_cases, trials
from pytest_specperf.cases.results import Recorded
from pytest_specperf.compare.trials import (
    DIRECTIONS,
    CaseComparison,
    compare_ab,
    compare_case,
    compare_runs,
    gate,
    min_detectable,
    trials_needed,
)
from pytest_specperf.measure.interleaved import ab_order
from tests.support.records import record


def draw(rng: np.random.Generator, median: float, cv: float, n: int) -> list[float]:
    """n lognormal trials around ``median`` with log-sd ``cv``."""
    return list(median * np.exp(rng.normal(0.0, cv, n)))


def test_15pct_slower_5_trials_2pct_cv_regressed() -> None:
    verdicts = Counter()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        c = compare_case(draw(rng, 50, 0.02, 5), draw(rng, 42.5, 0.02, 5), direction="higher", metric="decode_tps")
        verdicts[c.verdict] += 1
        if seed == 0:
            assert c.p is not None and c.p < 0.01
            assert -0.19 < c.effect < -0.11
            assert c.ci[0] < c.effect < c.ci[1] < -0.05
            assert c.reason.startswith("decode_tps -1") and c.reason.endswith("regressed beyond 5%")
            assert c.method == "welch" and (c.n_base, c.n_cand) == (5, 5)
    assert verdicts == {"regressed": 40}


def test_identical_distributions_no_false_regressed() -> None:
    verdicts = Counter()
    for seed in range(20):
        rng = np.random.default_rng(1000 + seed)
        base, cand = draw(rng, 50, 0.02, 5), draw(rng, 50, 0.02, 5)
        verdicts[compare_case(base, cand, direction="higher").verdict] += 1
    assert verdicts["regressed"] == 0
    assert verdicts["improved"] == 0
    assert verdicts["passed"] >= 12  # 82 % passed in 500 seeded draws; the rest are inconclusive, not failures


def test_identical_single_trials_no_false_regressed() -> None:
    verdicts = Counter()
    for seed in range(20):
        rng = np.random.default_rng(2000 + seed)
        verdicts[compare_case(draw(rng, 50, 0.03, 1), draw(rng, 50, 0.03, 1), direction="higher").verdict] += 1
    assert verdicts["regressed"] == 0


def test_15pct_faster_improved() -> None:
    rng = np.random.default_rng(3)
    c = compare_case(draw(rng, 50, 0.02, 5), draw(rng, 57.5, 0.02, 5), direction="higher", metric="decode_tps")
    assert c.verdict == "improved"
    assert c.effect > 0.1 and c.change == pytest.approx(c.effect)
    assert "improved beyond 5%" in c.reason


def test_ttft_lower_is_better() -> None:
    rng = np.random.default_rng(4)
    base = draw(rng, 0.20, 0.02, 5)
    slower = compare_case(base, draw(rng, 0.25, 0.02, 5), direction="lower", metric="ttft_s")
    assert slower.verdict == "regressed"
    assert slower.change > 0.15 and slower.effect < -0.15  # the metric rose; negative effect = worse
    assert slower.reason.startswith("ttft_s +2")
    faster = compare_case(base, draw(rng, 0.16, 0.02, 5), direction="lower", metric="ttft_s")
    assert faster.verdict == "improved" and faster.change < 0 < faster.effect
    # the same numbers read as a throughput are the opposite verdicts
    assert compare_case(base, draw(rng, 0.25, 0.02, 5), direction="higher").verdict == "improved"


def test_huge_noise_inconclusive_with_mde() -> None:
    rng = np.random.default_rng(5)
    c = compare_case(draw(rng, 50, 0.30, 5), draw(rng, 50, 0.30, 5), direction="higher", metric="decode_tps")
    assert c.verdict == "inconclusive"
    assert c.mde > 0.05 and c.noise_source == "measured"
    assert c.trials_needed > 20
    assert f"need {c.trials_needed} trials per side" in c.reason


def test_single_trial_per_side_uses_the_noise_floor() -> None:
    big = compare_case([50.0], [42.5], direction="higher", metric="decode_tps")
    assert big.verdict == "regressed" and big.p < 0.01 and big.method == "noise-floor"
    assert "1 trial per side: no noise estimate, assumed 3% per trial" in big.reason
    small = compare_case([50.0], [48.5], direction="higher")
    assert small.verdict == "inconclusive"
    assert "need 8 trials per side" in small.reason  # docs/statistics.md: CV 3 % and 5 % threshold need 8 per side
    # no spread at all on several trials also falls back to the floor instead of an infinitely narrow CI
    flat = compare_case([50.0] * 5, [49.9] * 5, direction="higher")
    assert flat.method == "noise-floor" and flat.noise_source == "floor" and flat.verdict == "passed"
    # the same value everywhere (attainment 1.00 against 1.00) is no change, not an inconclusive warning
    same = compare_case([1.0], [1.0], direction="higher", metric="attainment")
    assert same.verdict == "passed" and same.method == "identical" and "no change" in same.reason


def test_one_trial_against_several_uses_their_spread() -> None:
    rng = np.random.default_rng(6)
    c = compare_case(draw(rng, 50, 0.02, 6), [40.0], direction="higher")
    assert c.verdict == "regressed" and c.method == "prediction" and "noise from the baseline" in c.reason


def test_small_n_uses_the_t_test_bound() -> None:
    # n = 3 per side: Welch's t, the one test at every trial count; its p agrees with the interval's bound.
    rng = np.random.default_rng(7)
    c = compare_case(draw(rng, 50, 0.02, 3), draw(rng, 42.5, 0.02, 3), direction="higher")
    assert c.p is not None and c.p < 0.01 and c.method == "welch" and c.verdict == "regressed" and c.ci[1] < 0


def test_decided_on_the_estimate_at_20_trials() -> None:
    rng = np.random.default_rng(8)
    base, cand = draw(rng, 50, 0.15, 20), draw(rng, 50, 0.15, 20)
    assert compare_case(base, cand, direction="higher", decide_at=None).verdict == "inconclusive"
    c = compare_case(base, cand, direction="higher")
    assert c.verdict == "passed" and c.method.endswith("+estimate")


def test_repetitions_formula_matches_reference_table() -> None:
    # The table in docs/statistics.md: alpha 0.01 one-sided, power 0.8, Welch's t (normal approximation).
    assert trials_needed(0.02, 0.05) == 5
    assert trials_needed(0.03, 0.05) == 8
    assert trials_needed(0.05, 0.05) == 21
    assert trials_needed(0.05, 0.10) == 6
    assert min_detectable(0.02, 5, 5) < 0.05 < min_detectable(0.05, 5, 5)


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="direction"):
        compare_case([1.0], [1.0], direction="up")
    with pytest.raises(ValueError, match="positive"):
        compare_case([1.0, 0.0], [1.0], direction="higher")
    with pytest.raises(ValueError, match="at least one"):
        compare_case([], [1.0], direction="higher")


def test_ab_order_abba() -> None:
    assert ab_order(4) == ["A", "B", "B", "A", "A", "B", "B", "A"]
    three = ab_order(3)
    assert three == ["A", "B", "B", "A", "A", "B"] and three.count("A") == three.count("B") == 3
    assert ab_order(0) == []


def _sustained_json(nodeid: str, tps: list[float], ttft: float = 0.2) -> dict:
    streams = [{"decode_tps": x, "ttft_s": ttft * (1 + 0.01 * i), "drift": 0.01} for i, x in enumerate(tps)]
    return {"nodeid": nodeid, "kind": "sustained", "verdict": "passed", "reason": "", "ctx": 5000,
            "decode_tps": float(np.median(tps)), "ttft_s": ttft, "repeat": len(tps), "streams": streams}


def _sustained(nodeid: str, tps: list[float], ttft: float = 0.2) -> Recorded:
    return record(_sustained_json(nodeid, tps, ttft))


def _two_point(nodeid: str, samples: list[float]) -> Recorded:
    return record({"nodeid": nodeid, "kind": "two_point", "verdict": "passed", "decode_tps": float(np.median(samples)),
                   "samples_tps": samples})


def _sweep(nodeid: str, points: dict[int, list[float]]) -> Recorded:
    pts = [{"ctx": ctx, "prompt_tokens": ctx + 3, "decode_tps": float(np.median(s)), "samples_tps": s}
           for ctx, s in points.items()]
    return record({"nodeid": nodeid, "kind": "ctx_sweep", "verdict": "passed", "points": pts,
                   "decode_tps": min(p["decode_tps"] for p in pts)})


def test_trials_per_kind() -> None:
    s = _sustained_json("t::a", [48.0, 49.0, 50.0])
    assert trials(record(s), "decode_tps") == [48.0, 49.0, 50.0]
    assert trials(record({**s, "burst_tps": 66.0}), "burst_tps") == [66.0]  # not per stream: the case's own value
    assert trials(record({**s, "streams": []}), "decode_tps") == [49.0]
    assert trials(_two_point("t::b", [66.1, 66.8, 67.0]), "decode_tps") == [66.1, 66.8, 67.0]
    assert trials(record({"kind": "two_point", "decode_tps": 66.0}), "decode_tps") == [66.0]
    assert trials(record({"kind": "sustained", "decode_tps": None, "ttft_s": float("nan")}), "ttft_s") == []
    sweep = _sweep("t::c", {64: [250.0, 251.0], 1024: [120.0]})
    assert trials(sweep, "decode_tps") == []
    subs = sub_cases(sweep)
    assert [(n, ctx) for n, ctx, _ in subs] == [("t::c", 64), ("t::c", 1024)]
    assert trials(subs[0][2], "decode_tps") == [250.0, 251.0] and _kind(subs[0][2]) == "two_point"


def test_compare_runs_matches_by_nodeid_and_ctx() -> None:
    rng = np.random.default_rng(9)
    base = [
        _sustained("perf/t.py::long", draw(rng, 50, 0.02, 5)),
        _two_point("perf/t.py::burst", draw(rng, 66, 0.02, 5)),
        _sweep("perf/t.py::sweep", {64: draw(rng, 250, 0.02, 5), 1024: draw(rng, 120, 0.02, 5)}),
        _sustained("perf/t.py::broken_now", draw(rng, 50, 0.02, 5)),
    ]
    cand = [
        _sustained("perf/t.py::long", draw(rng, 40, 0.02, 5)),
        _sustained("perf/t.py::brand_new", draw(rng, 50, 0.02, 5)),
        _sweep("perf/t.py::sweep", {64: draw(rng, 250, 0.02, 5), 4096: draw(rng, 60, 0.02, 5)}),
        record({"nodeid": "perf/t.py::broken_now", "kind": "sustained", "verdict": "error", "reason": "server down"}),
    ]
    out = compare_runs(base, cand, max_regression=0.05)
    got = {(cc.key, cc.metric): cc.verdict for cc in out}
    assert got == {
        ("perf/t.py::long", "decode_tps"): "regressed",
        ("perf/t.py::long", "ttft_s"): got[("perf/t.py::long", "ttft_s")],  # same ttft: passed or inconclusive
        ("perf/t.py::brand_new", None): "new",
        ("perf/t.py::sweep@ctx=64", "decode_tps"): got[("perf/t.py::sweep@ctx=64", "decode_tps")],
        ("perf/t.py::sweep@ctx=4096", None): "new",
        ("perf/t.py::burst", None): "missing",
        ("perf/t.py::sweep@ctx=1024", None): "missing",
        ("perf/t.py::broken_now", None): "skipped",
    }
    assert got[("perf/t.py::long", "ttft_s")] in ("passed", "inconclusive")
    assert got[("perf/t.py::sweep@ctx=64", "decode_tps")] in ("passed", "inconclusive")
    # ttft_s does not apply to two-point sweep points: no row rather than a "skipped" one
    assert ("perf/t.py::sweep@ctx=64", "ttft_s") not in got
    skipped = next(cc for cc in out if cc.verdict == "skipped")
    assert skipped.reason == "candidate errored: server down"
    assert all(isinstance(cc, CaseComparison) for cc in out)
    assert all(cc.q is not None for cc in out if cc.comparison is not None and cc.comparison.p is not None)
    assert [cc.verdict for cc in gate(out)[0]] == ["regressed"]


def test_compare_runs_pools_repeated_nodeids_and_rejects_unknown_metrics() -> None:
    rng = np.random.default_rng(10)
    base = [_sustained("t::a", draw(rng, 50, 0.02, 1)) for _ in range(5)]
    cand = [_sustained("t::a", draw(rng, 42, 0.02, 1)) for _ in range(5)]
    (cc,) = compare_runs(base, cand, max_regression=0.05, metrics=("decode_tps",))
    assert cc.comparison is not None and (cc.comparison.n_base, cc.comparison.n_cand) == (5, 5)
    assert cc.verdict == "regressed"
    with pytest.raises(ValueError, match="drift"):
        compare_runs(base, cand, max_regression=0.05, metrics=("drift",))
    assert "drift" not in DIRECTIONS


def test_compare_ab_is_b_against_a() -> None:
    rng = np.random.default_rng(11)
    a = [_two_point("t::burst", draw(rng, 66, 0.02, 6))]
    b = [_two_point("t::burst", draw(rng, 56, 0.02, 6))]
    (cc,) = compare_ab(a, b)
    assert cc.verdict == "regressed" and " vs A (" in cc.reason
    assert cc.comparison is not None and cc.comparison.threshold == 0.05


def test_gate_inconclusive_policy() -> None:
    ccs = [CaseComparison("t::a", None, "decode_tps", "regressed", ""),
           CaseComparison("t::b", None, "decode_tps", "inconclusive", ""),
           CaseComparison("t::c", None, None, "new", "")]
    assert [len(x) for x in gate(ccs, "pass")] == [1, 0]
    assert [len(x) for x in gate(ccs, "warn")] == [1, 1]
    assert [len(x) for x in gate(ccs, "fail")] == [2, 0]
    with pytest.raises(ValueError, match="pass, warn or fail"):
        gate(ccs, "maybe")


def test_reasons_name_the_tail_that_decided() -> None:
    from pytest_specperf.compare.trials import compare_case

    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    better = compare_case(base, [130.0, 131.0, 129.0, 130.5, 129.5], direction="higher", metric="decode_tps")
    assert better.verdict == "improved" and "p(better)=" in better.reason and "p(worse)" not in better.reason
    # an 8% gain that is not significant: passed, but not called "within 5%"
    mixed = compare_case(base, [100.2, 100.8, 108.0, 109.0, 110.0], direction="higher", metric="decode_tps",
                         decide_at=None)
    assert mixed.verdict == "passed" and mixed.change > 0.05
    assert mixed.reason.endswith("no regression beyond 5% (better, but not significantly)")


def test_ab_over_a_prompt_file_pairs_streams_by_prompt() -> None:
    # 12 prompts whose own rates differ 3x (categories), B a fixed 3.5x faster on each, 2% noise per stream
    rng = np.random.default_rng(37)
    own = {f"p{i}": 20.0 * (1 + 2 * (i % 3)) for i in range(12)}

    def arm(factor: float) -> list[Recorded]:
        return [record({"nodeid": "t", "kind": "sustained", "streams": [
            {"prompt_id": k, "decode_tps": v * factor * float(np.exp(rng.normal(0, 0.02)))} for k, v in own.items()]})]

    (cc,) = compare_ab(arm(1.0), arm(3.5), metrics=("decode_tps",))
    c = cc.comparison
    assert c is not None and c.method == "paired" and c.verdict == "improved"
    assert c.change_ci[0] <= 2.5 <= c.change_ci[1] and c.change_ci[1] - c.change_ci[0] < 0.25, c.reason
    assert "12 prompts paired" in c.reason
