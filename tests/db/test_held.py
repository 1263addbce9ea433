"""A unit that failed its history gate is held out of later predictions until its change is accepted, on SQLite and
PostgreSQL (seeded histories with known answers: 8 runs at 100 tok/s, then a deploy 12 % slower)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from test_gate import _meta, _result, _trials, _typed
from test_store_pins import _sweep

from pytest_specperf import cli
from pytest_specperf.cases.results import Result
from pytest_specperf.compare import gates
from pytest_specperf.history import against_history, trend
from pytest_specperf.measure import interleaved
from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target

SLOWER = math.log(0.88)


def _gated(store: Store, rng: np.random.Generator, level: float, i: int) -> tuple[str, str, list[str]]:
    """Judge a run at ``level`` against the history and record it as a gated run does; its verdict, reason, notes."""
    cand = _result(_trials(rng, level))
    notes = against_history.judge(store, cand, {}, max_regression=0.05)
    records.record_run(store, [cand], _meta(i), gated=True)
    return cand.verdict, cand.reason, [*notes, *cand.notes]


def test_a_failed_run_stays_out_of_the_prediction_until_accepted(target: Target, capsys: pytest.CaptureFixture[str]
                                                                 ) -> None:
    rng = np.random.default_rng(21)
    with schema.open_store(Store(target)) as store:
        for i in range(8):
            records.record_run(store, [_result(_trials(rng, 0.0))], _meta(i))
        verdict, reason, notes = _gated(store, rng, 0.0, 8)  # run 9, normal: passes, and says against what
        assert verdict == "passed"
        assert any(n.startswith("history t::a: decode_tps") and "passed, predicted" in n and "from 8 runs" in n
                   for n in notes), notes
        first = _gated(store, rng, SLOWER, 9)  # run 10, slower: fails
        effect = float(re.search(r"([-+]\d+\.\d)% against its history of 9 runs", first[1]).group(1)) / 100
        assert first[0] == "failed" and abs(effect - (math.exp(SLOWER) - 1)) < 0.03, first[1]
        predicted = first[1].split("(predicted ")[1].split(",")[0]
        for i in (10, 11):  # runs 11 and 12, retried on the slower deploy: the same history, the same prediction
            verdict, reason, notes = _gated(store, rng, SLOWER, i)
            assert verdict == "failed" and "against its history of 9 runs" in reason, reason
            assert reason.split("(predicted ")[1].split(",")[0] == predicted
            assert any("held out of its prediction" in n and "accept it: specperf history accept 10" in n
                       for n in notes), notes
        assert [h.run_id for h in records.case_history(store, "t::a") if h.held] == [10, 11, 12]
        given = target.url or str(target.path)  # the real URL: shown() masks a PostgreSQL user name
    assert cli.main(["history", "accept", "11", "--case", "a", "--history", given]) == 0
    assert "accepted the change of t::a at run 11: its history starts anew there; other held run(s) 10, 12 released" \
        in capsys.readouterr().out
    with schema.open_store(Store(target)) as store:
        past = records.case_history(store, "t::a")
        # run 10 is released too: the accepted change is the one it first failed on (it would else stay held for
        # good, its case's history now starting at run 11)
        assert [(h.run_id, h.held, h.failed_gate) for h in past[9:]] == [(10, False, True), (11, False, True),
                                                                         (12, False, True)]
        verdict, reason, notes = _gated(store, rng, SLOWER, 12)  # run 13: judged from run 11 on, it passes
        assert verdict == "passed", reason
        assert any("t::a is judged from run 11 on, where a change was accepted" in n for n in notes), notes
        assert any("fewer than the 5" in n for n in notes) and not any("held out" in n for n in notes), notes


def _session(decode: float, trials: list[float]) -> Result:
    """A session case of 4 users (its comparisons carry ``users``; the history keys it by its node id alone)."""
    return _typed({"nodeid": "t::s", "kind": "session", "model": "m", "server": "sim", "verdict": "passed",
                   "users": 4, "turns": 3, "ctx": 100, "tokens": 50, "decode_tps": decode,
                   "ttft_s": 0.2, "ttft_p50_s": 0.2, "ttft_p90_s": 0.2, "ttft_p99_s": 0.2,
                   "trials": [{"decode_tps": v, "ttft_s": 0.2} for v in trials]})


def test_a_slower_session_with_a_short_history_fails_and_is_held(target: Target) -> None:
    # two runs at 100 tok/s (too few for the history's noise: the baseline rule against the latest), then one at 60
    with schema.open_store(Store(target)) as store:
        for i in range(2):
            records.record_run(store, [_session(100.0, [99.0, 100.0, 101.0])], _meta(i))
        cand = _session(60.0, [59.0, 60.0, 61.0])
        notes = against_history.judge(store, cand, {}, max_regression=0.05)
        assert any("fewer than the 5" in n for n in notes), notes
        regressed = [c for c in cand.comparisons if c.metric == "decode_tps"]
        assert [c.verdict for c in regressed] == ["regressed"] and cand.verdict == "failed", (cand.reason, notes)
        records.record_run(store, [cand], _meta(2), gated=True)
        assert [(h.run_id, h.held) for h in records.case_history(store, "t::s")] == [(1, False), (2, False), (3, True)]


def test_a_short_historys_regression_beside_a_named_baseline_is_kept_apart_and_held(target: Target) -> None:
    # --specperf-compare named a baseline as slow as this run (its comparisons set first, as the plugin does); the
    # history's two runs at 100 tok/s judge it by the baseline rule against the latest: it fails and is held, and the
    # named baseline's comparisons stay the result's
    with schema.open_store(Store(target)) as store:
        for i in range(2):
            records.record_run(store, [_session(100.0, [99.0, 100.0, 101.0])], _meta(i))
        cand = _session(60.0, [59.0, 60.0, 61.0])
        gates.against_baseline(gates.Gate(0.05), cand, [_session(60.0, [59.5, 60.0, 60.5])])
        named = list(cand.comparisons or [])
        assert named and "regressed" not in {c.verdict for c in named}
        against_history.judge(store, cand, {}, max_regression=0.05)
        assert cand.comparisons == named
        kept = [c for c in cand.history_comparisons or [] if c.metric == "decode_tps"]
        assert [c.verdict for c in kept] == ["regressed"] and kept[0].reason.startswith("history, against run 2: ")
        assert cand.verdict == "failed" and kept[0].reason in cand.reason, cand.reason
        assert any("judged against the latest (run 2, " in n and "apart from the --specperf-compare baseline: "
                   "decode_tps -40.0% regressed" in n for n in cand.notes), cand.notes
        records.record_run(store, [cand], _meta(2), gated=True)
        assert [(h.run_id, h.held) for h in records.case_history(store, "t::s")] == [(1, False), (2, False), (3, True)]
        assert trend.run_facts(store, "t::s")[3].failed_metrics == {"decode_tps"}


def test_accept_takes_a_load_sweep_by_its_node_id(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    # 6 runs of a 4-level sweep, then one 20 % slower at every level: each level fails and is held
    rng = np.random.default_rng(23)
    with schema.open_store(Store(target)) as store:
        for i in range(6):
            records.record_run(store, [_sweep(rng, [0.0] * 8, "t::sw")], _meta(i))
        cand = _sweep(rng, [math.log(0.8), 0.0] * 4, "t::sw")
        against_history.judge(store, cand, {}, max_regression=0.05)
        assert cand.verdict == "failed", cand.reason
        records.record_run(store, [cand], _meta(6), gated=True)
        given = target.url or str(target.path)  # the real URL: shown() masks a PostgreSQL user name
    assert cli.main(["history", "accept", "7", "--case", "sw", "--history", given]) == 0
    out = capsys.readouterr().out
    assert [f"accepted the change of t::sw@users={n} at run 7" in out for n in (1, 2, 4, 8)] == [True] * 4, out


def test_a_repeated_sessions_trials_are_its_history(target: Target) -> None:
    # repeat=3 of a session: the history holds each trial's figures, as measured, not the row's median alone
    with schema.open_store(Store(target)) as store:
        records.record_run(store, [_session(100.0, [97.0, 100.0, 104.0])], _meta(0))
        [run] = records.case_history(store, "t::s")
    assert sorted(run.trials["decode_tps"]) == [97.0, 100.0, 104.0], run.trials


def test_b_slower_than_a_is_not_held_by_the_history(target: Target) -> None:
    # --specperf-ab with --specperf-history: B 20 % slower than A fails against A; that is no history gate failure
    rng = np.random.default_rng(25)
    b, _ = interleaved.run_ab(lambda: _result(_trials(rng, 0.0)), lambda: _result(_trials(rng, math.log(0.8))), 3,
                        gates.Gate(0.05))
    assert b.verdict == "failed" and [c.verdict for c in b.comparisons if c.metric == "decode_tps"] == ["regressed"]
    with schema.open_store(Store(target)) as store:
        records.record_run(store, [b], _meta(0), gated=True)
        assert [(h.run_id, h.held) for h in records.case_history(store, "t::a")] == [(1, False)]


def test_trend_counts_the_runs_it_would_predict_from(target: Target) -> None:
    # 3 runs, then 6 slower ones held (each failed against the latest usable run): 3 left to predict from
    rng = np.random.default_rng(27)
    with schema.open_store(Store(target)) as store:
        for i in range(3):
            records.record_run(store, [_result(_trials(rng, 0.0))], _meta(i))
        for i in range(3, 9):
            assert _gated(store, rng, SLOWER, i)[0] == "failed"
        _, notes = trend.trend(store, "t::a")
    assert any(n.startswith("decode_tps: 3 run(s) to judge against (6 more held out") for n in notes), notes


def test_trend_reads_the_figures_of_a_case_whose_node_id_holds_an_at(target: Target) -> None:
    values = [101.0, 99.0, 100.0, 104.0, 97.0]
    nodeid = "t.py::test_user[ci@host]"
    case = _typed({"nodeid": nodeid, "kind": "sustained", "model": "m", "server": "sim", "verdict": "passed",
                   "decode_tps": float(np.median(values)), "ctx": 100, "tokens": 200,
                   "streams": [{"decode_tps": v, "ttft_s": 0.5} for v in values]})
    with schema.open_store(Store(target)) as store:
        records.record_run(store, [case], _meta(0))
        facts = trend.run_facts(store, nodeid)
    assert [f.figures.get("decode_tps") for f in facts.values()] == [100.0], facts
