"""A/B and arms trials combine as typed records (issue 36): ``gates.aggregate`` of typed trials writes the JSON
the combine rules say, key for key and type for type (medians as floats, stalls summed, the worst verdict, the
drift of the trial that decided it, each distinct reason naming arm and trial, every stream tagged with its
trial, each trial's figures in ``trials``; per prompt category: counts summed, medians, B's speedup over A).
The expected JSON is built here from those rules, by hand."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import CategoryFigures
from pytest_specperf.cases.results import LoadLevel, LoadSweepResult, Result, StreamResult, SustainedResult
from pytest_specperf.compare import categories, gates
from pytest_specperf.measure import combine, interleaved


def _stream(tps: float, rid: str) -> StreamResult:
    return StreamResult(prompt_tokens=500, completion_tokens=64, ttft_s=0.1, total_s=1.0, decode_tps=tps,
                        client_tps=tps, window_tokens=None, window_tps=[], early_tps=None, late_tps=None, drift=None,
                        trend_p=None, stalls=[], tokens_per_chunk=1.0, count_source="usage", counts_exact=True,
                        response_id=rid)


def _load_trial(i: int, decode: float, ttft: float, total: float, stalls: int, verdict: str, reason: str,
                drift: float, warnings: list[str]) -> SustainedResult:
    """One trial of sustained(concurrency=2): two streams, its own figures."""
    return SustainedResult(kind="sustained", endpoint="http://b", model="m", server="vllm", ctx=500, prompt_tokens=500,
                           nodeid="t::load", verdict=verdict, reason=reason, started_at=10.0 - i, finished_at=20.0 + i,
                           warnings=warnings, notes=["n"], completion_tokens=64, ttft_s=ttft, total_s=1.0 + i,
                           decode_tps=decode, client_tps=decode - 1, drift=drift, early_tps=decode + 10,
                           late_tps=decode - 10, drift_verdict="failed" if drift > 0.1 else "passed",
                           drift_gate=f"drift {drift:.2f}", stalls=stalls, stall_s=0.5 * stalls, tokens_per_chunk=1.0,
                           concurrency=2, decode_p10_tps=decode - 5, total_tps=total, common_window_s=2.0,
                           ttft_p50_s=ttft, ttft_p90_s=ttft * 2,
                           streams=[_stream(decode, f"{i}a"), _stream(decode, f"{i}b")])


def _dumps(x: Any) -> str:
    return json.dumps(x, indent=1)  # keys in order, 500 and 500.0 told apart


def test_a_sustained_load_case_combines_by_the_rules() -> None:
    trials = [_load_trial(0, 100.0, 0.1, 200.0, 0, "passed", "", 0.01, ["w"]),
              _load_trial(1, 90.0, 0.3, 180.0, 1, "failed", "p10 user decode 85.0 < 88", 0.30, ["w", "x"]),
              _load_trial(2, 140.0, 0.2, 280.0, 0, "passed", "", 0.02, [])]
    row = combine.aggregate(trials, arm="B")
    assert isinstance(row, SustainedResult)
    expected = to_dict(trials[-1])
    expected.update(
        prompt_tokens=500.0, completion_tokens=64.0,  # medians are floats, whatever the field held
        ttft_s=0.2, total_s=2.0, decode_tps=100.0, client_tps=99.0, tokens_per_chunk=1.0,
        # the drift figures are the trial whose drift failed (trial 2), not the medians
        drift=0.30, early_tps=100.0, late_tps=80.0, drift_gate="drift 0.30", drift_verdict="failed",
        verdict="failed", reason="arm B, trial 2 of 3: p10 user decode 85.0 < 88",
        warnings=["w", "x"], notes=["n"],  # distinct, in order
        repeat=3, started_at=8.0,
        stalls=1.0, stall_s=0.5,  # summed (as numbers: 0 or 1.0)
        decode_p10_tps=95.0, total_tps=200.0, common_window_s=2.0, ttft_p50_s=0.2, ttft_p90_s=0.4,
        streams=[{**to_dict(s), "trial": i} for i, t in enumerate(trials) for s in t.streams],
        trials=[{"decode_tps": 100.0, "total_tps": 200.0, "ttft_s": 0.1}, {"decode_tps": 90.0, "total_tps": 180.0,
                "ttft_s": 0.3}, {"decode_tps": 140.0, "total_tps": 280.0, "ttft_s": 0.2}])
    assert _dumps(to_dict(row)) == _dumps(expected)
    assert trials[-1].streams[0].trial is None and trials[-1].decode_tps == 140.0  # the trials are left as measured


def _level(users: int, decode: float, verdict: str = "passed", reason: str = "") -> LoadLevel:
    return LoadLevel(concurrency=users, prompt_tokens=500, completion_tokens=64, decode_tps=decode,
                     decode_p10_tps=decode - 5, total_tps=decode * users, ttft_s=0.1 * users, stalls=1, stall_s=0.25,
                     tokens_per_chunk=1.0, verdict=verdict, reason=reason, warnings=[], notes=[],
                     streams=[_stream(decode, f"{users}-{decode}-{u}") for u in range(users)], accept_len=None)


def _sweep(i: int, one: float, four: float, verdict: str = "passed", reason: str = "") -> LoadSweepResult:
    return LoadSweepResult(kind="load_sweep", endpoint="http://b", model="m", server="vllm", ctx=500,
                           prompt_tokens=500, nodeid="t::sweep", verdict=verdict, reason=reason, started_at=float(i),
                           tokens=64, concurrency=[1, 4], levels=[_level(1, one), _level(4, four, verdict, reason)],
                           decode_tps=four, total_tps=four * 4, notes=[f"trial {i}"])


def _level_json(lv: LoadLevel, **figures: Any) -> dict[str, Any]:
    return {**to_dict(lv), **figures}


def test_a_load_sweeps_levels_combine_every_trial_and_the_row_takes_the_best_level() -> None:
    why = "p10 user decode 5.0 tok/s < min_tps 8 with 4 users"
    trials = [_sweep(0, 100.0, 20.0), _sweep(1, 120.0, 10.0, "failed", why), _sweep(2, 90.0, 15.0)]
    row = combine.aggregate(trials, arm="B")
    assert isinstance(row, LoadSweepResult)

    def trial_figures(lvs: list[LoadLevel]) -> list[dict[str, Any]]:
        return [{"decode_tps": lv.decode_tps, "total_tps": lv.total_tps, "ttft_s": lv.ttft_s} for lv in lvs]

    ones, fours = [t.levels[0] for t in trials], [t.levels[1] for t in trials]
    level_one = _level_json(  # every trial passed: its rows' first (the worst, none worse) under the medians
        ones[0], prompt_tokens=500.0, completion_tokens=64.0, decode_tps=100.0, decode_p10_tps=95.0, total_tps=100.0,
        ttft_s=0.1, tokens_per_chunk=1.0, accept_len=None, stalls=3.0, stall_s=0.75,
        streams=[{**to_dict(s), "trial": i} for i, lv in enumerate(ones) for s in lv.streams],
        trials=trial_figures(ones))
    level_four = _level_json(  # the failed trial's row (its verdict and reason, arm and trial named), the medians
        fours[1], prompt_tokens=500.0, completion_tokens=64.0, decode_tps=15.0, decode_p10_tps=10.0, total_tps=60.0,
        ttft_s=0.4, tokens_per_chunk=1.0, accept_len=None, stalls=3.0, stall_s=0.75,
        reason=f"arm B, trial 2 of 3: {why}",
        streams=[{**to_dict(s), "trial": i} for i, lv in enumerate(fours) for s in lv.streams],
        trials=trial_figures(fours))
    expected = {**to_dict(trials[-1]), "verdict": "failed", "reason": why, "started_at": 0.0, "repeat": 3,
                "prompt_tokens": 500.0, "decode_tps": 15.0,  # the medians of the trials' own
                "notes": ["trial 0", "trial 1", "trial 2"],  # the row's own notes: every trial's, kept
                "levels": [level_one, level_four],
                "total_tps": 100.0}  # the best combined level (1 x 100), as for one trial; not the top one's 60
    expected = {k: expected[k] for k in to_dict(row)}  # the record's order (repeat is written where it is a field)
    assert set(expected) == set(to_dict(row))
    assert _dumps(to_dict(row)) == _dumps(expected)


def _single(endpoint: str, decode: float, ttft: float) -> SustainedResult:
    return SustainedResult(kind="sustained", endpoint=endpoint, model="m", server="vllm", ctx=500, prompt_tokens=500,
                           nodeid="t::one", completion_tokens=64, ttft_s=ttft, total_s=1.0, decode_tps=decode,
                           client_tps=decode, tokens_per_chunk=1.0, repeat=2,
                           streams=[_stream(decode, f"{endpoint}-{decode}")])


def test_the_ab_summary_is_bs_row_with_as_figures_in_ab() -> None:
    a = iter([_single("http://a", v, t) for v, t in ((100.0, 0.1), (80.0, 0.3), (110.0, 0.2))])
    b = iter([_single("http://b", v, t) for v, t in ((101.0, 0.1), (81.0, 0.3), (111.0, 0.2))])
    summary, _ = interleaved.run_ab(lambda: next(a), lambda: next(b), 3, gates.Gate())
    assert isinstance(summary, SustainedResult) and summary.ab is not None
    # ABBA: A's trials in the order measured; a sustained case's streams are its trials, kept untagged
    assert [s.trial for s in summary.streams] == [None] * 3 and summary.repeat == 6
    assert _dumps(to_dict(summary.ab)) == _dumps({
        "trials": 3, "a_endpoint": "http://a", "b_endpoint": "http://b",
        "a": {"prompt_tokens": 500.0, "completion_tokens": 64.0, "ttft_s": 0.2, "total_s": 1.0, "decode_tps": 100.0,
              "client_tps": 100.0, "early_tps": None, "late_tps": None, "drift": None, "tokens_per_chunk": 1.0,
              "burst_tps": None, "burst_gap": None},
        "a_decode_tps": [100.0, 80.0, 110.0], "b_decode_tps": [101.0, 81.0, 111.0]})
    assert list(to_dict(summary))[-2:] == ["ab", "comparisons"]


def test_a_combined_row_is_a_record_of_the_trials_kind() -> None:
    trials: list[Result] = [_single("http://b", 100.0, 0.1)]
    assert type(combine.aggregate(trials)) is SustainedResult


def _with_categories(cats: dict[str, CategoryFigures]) -> SustainedResult:
    return SustainedResult(kind="sustained", endpoint="http://b", model="m", server="vllm", ctx=500, prompt_tokens=500,
                           prompts="p.yaml", categories=cats)


def test_an_arms_categories_combine_by_the_rules_and_carry_bs_speedup() -> None:
    def trial(v: float, accept: float | None, n: int = 2) -> SustainedResult:
        return _with_categories({"qa": CategoryFigures(n=n, n_prompts=2, decode_tps_p50=v, accept_len=accept),
                                 "code": CategoryFigures(n=1, n_prompts=1, decode_tps_p50=v / 2)})

    a = [trial(v, None) for v in (10.0, 30.0, 20.0)]
    b = [trial(v, acc, n) for v, acc, n in ((40.0, 3.0, 2), (20.0, 2.0, 3), (90.0, 2.5, 2))]
    combined = combine.combine_categories(b)
    assert combined is not None and list(combined) == ["qa", "code"]
    # counts summed, figures the median over trials (as floats), None where no trial has one; trials counted;
    # an optional figure no trial has (attainment: open loop) stays out
    qa = {**to_dict(b[-1].categories["qa"]), "n": 7, "decode_tps_p50": 40.0, "accept_len": 2.5, "trials": 3}  # type: ignore[index]
    assert _dumps(to_dict(combined["qa"])) == _dumps(qa)
    summary = _with_categories({})
    summary.categories = combined
    categories.apply(summary, a, b)
    assert summary.categories is not None
    got = summary.categories["qa"]
    geo = math.exp(sum(map(math.log, (40.0, 20.0, 90.0))) / 3 - sum(map(math.log, (10.0, 30.0, 20.0))) / 3)
    assert got.speedup == pytest.approx(geo) and got.a_decode_tps == pytest.approx((10.0 * 30.0 * 20.0) ** (1 / 3))
    assert (got.speedup_n_a, got.speedup_n_b, got.speedup_family, got.n, got.trials) == (3, 3, 2, 7, 3)
    assert got.speedup is not None and got.speedup_interval is not None
    assert got.speedup_interval[0] <= got.speedup <= got.speedup_interval[1]
    assert list(to_dict(got))[-8:] == ["trials", "speedup", "speedup_interval", "speedup_method", "speedup_n_a",
                                       "speedup_n_b", "a_decode_tps", "speedup_family"]
