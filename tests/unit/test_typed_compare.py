"""The compare package reads a typed result exactly as it reads the same result's JSON (issue 36).

Every statistic here was written for the JSON form; reading records by attribute must not change one figure.
Each kind that splits into sub-cases (a sweep's points, a load sweep's levels, a combined row's trials, a
session's users) is built once, and every entry point is run on the record and on ``to_dict`` of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from support import judged_json

from pytest_specperf.cases import figures
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.results import Recorded
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import arms, crossover, gates, samples, sequential
from pytest_specperf.compare import trials as compare
from tests.support.result_json import full

METRICS = ("decode_tps", "ttft_s", "total_tps", "tokens_per_chunk", "attainment", "goodput_rps", "ttft_p90_s")


def _streams(rng: np.random.Generator, n: int, decode: float) -> list[dict[str, Any]]:
    return [{"decode_tps": float(decode * rng.lognormal(0, 0.03)), "ttft_s": float(0.05 * rng.lognormal(0, 0.1)),
             "tokens_per_chunk": 1.0, "prompt_id": f"p{i % 3}", "text_sha": f"t{i}"} for i in range(n)]


def _trials(rng: np.random.Generator, n: int, decode: float) -> list[dict[str, Any]]:
    return [{"decode_tps": float(decode * rng.lognormal(0, 0.03)),
             "total_tps": float(4 * decode * rng.lognormal(0, 0.03)),
             "ttft_s": float(0.05 * rng.lognormal(0, 0.1))} for _ in range(n)]


def _level(rng: np.random.Generator, users: int, decode: float, with_trials: bool) -> dict[str, Any]:
    lv: dict[str, Any] = {"concurrency": users, "decode_tps": decode, "ttft_s": 0.05, "total_tps": users * decode,
                          "streams": _streams(rng, users, decode)}
    if with_trials:
        lv["trials"] = _trials(rng, 3, decode)
    return lv


def _json(r: Recorded) -> Recorded:
    """``r`` as the rules read its JSON: the record loaded back from ``to_dict`` of it (they take records only)."""
    return load_record(to_dict(r))


def _run(seed: int, scale: float) -> list[Recorded]:
    """One run of every kind, decode scaled by ``scale`` (records, parts typed: as a run hands them on)."""
    rng = np.random.default_rng(seed)
    rows = [
        {"kind": "sustained", "nodeid": "t::seq", "decode_tps": 50 * scale, "ttft_s": 0.05,
         "streams": _streams(rng, 6, 50 * scale), "temperature": 0.0},
        {"kind": "sustained", "nodeid": "t::load", "concurrency": 4, "decode_tps": 40 * scale, "ttft_s": 0.05,
         "total_tps": 160 * scale, "streams": _streams(rng, 4, 40 * scale), "trials": _trials(rng, 4, 40 * scale)},
        {"kind": "sustained", "nodeid": "t::load1", "concurrency": 4, "decode_tps": 40 * scale, "ttft_s": 0.05,
         "streams": _streams(rng, 4, 40 * scale)},
        {"kind": "load_sweep", "nodeid": "t::sweep", "concurrency": [1, 4], "decode_tps": 30 * scale,
         "levels": [_level(rng, 1, 60 * scale, True), _level(rng, 4, 30 * scale, True)]},
        {"kind": "load_sweep", "nodeid": "t::sweep1", "concurrency": [2], "decode_tps": 30 * scale,
         "levels": [_level(rng, 2, 45 * scale, False)]},
        {"kind": "ctx_sweep", "nodeid": "t::ctx",
         "points": [{"ctx": c, "prompt_tokens": c, "t_short_s": 0.1, "t_long_s": 1.0, "decode_tps": 50 * scale,
                     "samples_tps": [float(50 * scale * rng.lognormal(0, 0.03)) for _ in range(4)]}
                    for c in (64, 256)]},
        {"kind": "two_point", "nodeid": "t::two", "decode_tps": 50 * scale,
         "samples_tps": [float(50 * scale * rng.lognormal(0, 0.03)) for _ in range(5)]},
        {"kind": "session", "nodeid": "t::session", "users": 2, "decode_tps": 45 * scale, "ttft_s": 0.07},
        {"kind": "rate", "nodeid": "t::rate", "attainment": 0.9 * min(scale, 1.0), "goodput_rps": 3.0 * scale,
         "ttft_p90_s": 0.2},
        {"kind": "sustained", "nodeid": "t::err", "verdict": "error", "reason": "boom"},
    ]
    return [load_record(full({"endpoint": "e", "model": "m", "server": "s", "ctx": 256, "prompt_tokens": 8, **r}))
            for r in rows]


def test_sub_cases_and_trials_read_a_record_as_its_json() -> None:
    for r in _run(1, 1.0):
        typed, data = figures.sub_cases(r), figures.sub_cases(_json(r))
        assert [(n, c) for n, c, _ in typed] == [(n, c) for n, c, _ in data], r.nodeid
        for (_, _, tc), (_, _, dc) in zip(typed, data, strict=True):
            assert figures.users_of(tc) == figures.users_of(dc), r.nodeid
            for m in METRICS:
                assert figures.trials(tc, m) == figures.trials(dc, m), (r.nodeid, m)


def test_compare_runs_and_the_gate_read_a_record_as_its_json() -> None:
    base, cand = _run(2, 1.0), _run(3, 0.8)
    as_data = compare.compare_runs([_json(b) for b in base], [_json(c) for c in cand], metrics=METRICS)
    assert compare.compare_runs(base, cand, metrics=METRICS) == as_data
    assert any(cc.verdict == "regressed" for cc in as_data)  # the runs differ: the comparison is not vacuous
    per_trial = samples.per_trial([_json(c) for c in cand])  # a saved run's, read back
    assert [figures.trials(c, "decode_tps") for r in samples.per_trial(cand) for _, _, c in figures.sub_cases(r)] == \
        [figures.trials(c, "decode_tps") for r in per_trial for _, _, c in figures.sub_cases(r)]
    gate = gates.Gate(max_regression=0.05)
    for c in cand:
        row = to_dict(c)
        warned = judged_json.against_baseline(gate, row, [to_dict(b) for b in base])
        assert gates.against_baseline(gate, c, base) == warned, c.nodeid
        assert to_dict(c)["comparisons"] == row["comparisons"], c.nodeid
        assert (c.verdict, c.reason) == (row["verdict"], row["reason"]), c.nodeid


def test_arms_crossover_and_sequential_read_a_record_as_its_json() -> None:
    a, b = _run(4, 1.0), _run(5, 0.9)
    arm_a, arm_b = [r for r in a if r.kind == "load_sweep"], [r for r in b if r.kind == "load_sweep"]
    plain_a, plain_b = [_json(r) for r in arm_a], [_json(r) for r in arm_b]
    for users in (1, 2, 4):
        assert crossover.trial_values(arm_a, users) == crossover.trial_values(plain_a, users)
        assert arms.values(arm_b, users, "total_tps") == arms.values(plain_b, users, "total_tps")
    assert crossover.crossover(arm_a[:1], arm_b[:1]) == crossover.crossover(plain_a[:1], plain_b[:1])
    assert arms.levels_of(arm_a) == arms.levels_of(plain_a) == [1, 2, 4]
    assert samples.text_keys(a) == samples.text_keys([_json(r) for r in a])
    assert sequential.gated_metrics(a, b, METRICS) == sequential.gated_metrics(
        [_json(r) for r in a], [_json(r) for r in b], METRICS)
    seq = a[0]
    assert sequential.saved_notes(seq, max_repeat=5, max_regression=0.01) == \
        sequential.saved_notes(_json(seq), max_repeat=5, max_regression=0.01)
