"""The arms table and the crossover are records whose JSON is what the dicts were (issue 36).

A saved run's ``arms`` and ``crossover`` load as records (``saved_results.load_result``) and write back the same
JSON, key order included; runs saved before a key existed load too and gain no key on the way back. The inputs
are shaped like a saved A/B sweep and arms run (simulator arms), built here.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import ArmsGateLevel, ArmsTable, Crossover, SpeedupLevel
from pytest_specperf.cases.results import LoadSweepResult, Recorded
from pytest_specperf.cases.saved_results import load_part, load_record, load_result
from pytest_specperf.compare import arms, crossover
from tests.support.records import record
from tests.support.result_json import full


def _figures(tps: float, trials: list[float], total: float | None) -> dict[str, Any]:
    return {"decode_tps": tps, "decode_interval": [tps * 0.99, tps * 1.01], "n": len(trials),
            "total_tps": total, "total_interval": None if total is None else [total * 0.99, total * 1.01],
            "trials": trials}


def _arms_table() -> dict[str, Any]:
    """An arms table as an arms run with ``max_loss_vs_best`` and known speculative tokens writes it."""
    level = [
        {"users": 1, "arms": {"off": _figures(50.2, [50.1, 50.4, 50.0], 50.2),
                              "k2": _figures(98.1, [98.0, 98.4, 97.9], 98.1)},
         "best": "k2", "vs_best": {"off": {"ratio": 0.51, "interval": [0.50, 0.52], "method": "welch",
                                           "case_high": 0.525}},
         "alpha": 0.01, "tied": [], "decided": True},
        {"users": 4, "arms": {"off": _figures(45.0, [45.0, 45.2, 44.9], 180.0),
                              "k2": _figures(44.9, [44.8, 45.1, 44.7], 179.6)},
         "best": "off", "vs_best": {"k2": {"ratio": 0.998, "interval": [0.99, 1.006], "method": "welch",
                                           "case_high": 1.009}},
         "alpha": 0.01, "tied": ["k2"], "decided": True},
        # one trial of k2 only: no interval, its figures null, not judged
        {"users": 16, "arms": {"off": _figures(23.0, [23.1, 22.9, 23.0], 368.0),
                               "k2": {"decode_tps": None, "decode_interval": None, "n": 0, "total_tps": None,
                                      "total_interval": None, "trials": []}},
         "best": "off", "vs_best": {}, "alpha": 0.01, "tied": [], "decided": True},
    ]
    return {"names": ["off", "k2"], "baseline": "off", "deployed": "k2", "trials": {"off": 3, "k2": 3},
            "levels": level, "schedule": {"1": "k2", "4": "off", "16": "off"}, "max_loss_vs_best": 0.05,
            "tokens": {"off": 0, "k2": 2}, "num_speculative_tokens": {"1": 2, "4": 0, "16": 0},
            "gate": {"deployed": "k2", "max_loss_vs_best": 0.05, "levels": [
                # the deployed arm is the best: four keys only
                {"users": 1, "verdict": "holds", "ratio": 1.0, "interval": [1.0, 1.0]},
                # judged against another arm: every key, noise and trials_needed null where unknown
                {"users": 4, "verdict": "holds", "ratio": 0.998, "interval": [0.99, 1.006], "best": "off",
                 "deployed_tps": 44.9, "best_tps": 45.0, "noise": None, "trials_needed": None}]},
            "text": "best arm per level: 1 user -> k2, 4 users -> off (tied: k2), 16 users -> off; "
                    'num_speculative_tokens by batch size: {"1": 2, "4": 0, "16": 0}',
            "endpoints": {"off": "http://127.0.0.1:18101", "k2": "http://127.0.0.1:18102"}}


def _crossover() -> dict[str, Any]:
    """A gated A/B sweep's crossover, as ``crossover.apply`` writes it."""
    def level(users: int, speedup: float, verdict: str) -> dict[str, Any]:
        return {"users": users, "speedup": speedup, "interval": [speedup * 0.99, speedup * 1.01],
                "verdict": verdict, "method": "welch", "a_decode_tps": 149.5, "b_decode_tps": 149.5 * speedup,
                "n_a": 3, "n_b": 3, "a_trials": [150.1, 149.6, 148.9], "b_trials": [149.6, 148.4, 149.0],
                "family": 2, "case_high": speedup * 1.013}
    first = level(1, 0.996, "inconclusive")
    return {"floor": 1.0, "gated": True, "levels": [first, level(2, 0.9996, "inconclusive")], "users": 1,
            "speedup": first["speedup"], "interval": first["interval"], "verdict": "inconclusive",
            "text": "B not shown faster for users from 1 user: speedup 1.00 [0.99, 1.01]"}


def _saved(arms_table: dict[str, Any], cross: dict[str, Any]) -> dict[str, Any]:
    """A load sweep's saved JSON, every key in its place, with this arms table and crossover."""
    rest = to_dict(load_result(full({"kind": "load_sweep", "nodeid": "test_ab.py::test_ab_sweep",
                                     "concurrency": [1, 4, 16], "min_speedup": 1.0, "repeat": 3})))
    assert "crossover" in rest and "arms" not in rest  # crossover null until A/B, arms absent until compared
    return {**rest, "crossover": cross, "arms": arms_table}


def test_a_saved_arms_table_and_crossover_load_as_records_and_write_back_the_same_json() -> None:
    data = _saved(_arms_table(), _crossover())
    r = load_result(data)
    assert isinstance(r, LoadSweepResult) and isinstance(r.arms, ArmsTable) and isinstance(r.crossover, Crossover)
    assert isinstance(r.crossover.levels[0], SpeedupLevel) and isinstance(r.arms.gate.levels[0], ArmsGateLevel)
    # read by attribute: an arm's name and a level's users-as-string stay keys (they are data)
    assert r.arms.levels[1].vs_best["k2"].case_high == 1.009 and r.arms.schedule["16"] == "off"
    assert r.arms.levels[2].arms["k2"].decode_tps is None and r.crossover.levels[1].family == 2
    # the same JSON text: keys, their order and values
    assert json.dumps(to_dict(r)) == json.dumps(data)
    # an A/B sweep's arms table: no gate, no tokens, no endpoints (those keys absent, gate null)
    plain = {k: v for k, v in _arms_table().items() if k not in ("tokens", "num_speculative_tokens", "endpoints")}
    plain.update(gate=None, max_loss_vs_best=None)
    assert json.dumps(to_dict(load_part(plain, ArmsTable))) == json.dumps(plain)


def test_a_run_saved_before_the_later_keys_loads_and_gains_none() -> None:
    t = _arms_table()
    for lv in t["levels"]:
        del lv["alpha"]
        for vs in lv["vs_best"].values():
            del vs["case_high"]
        for a in lv["arms"].values():
            del a["trials"]
    for name in ("tokens", "num_speculative_tokens", "endpoints"):
        del t[name]
    cross = _crossover()
    for lv in cross["levels"]:
        for name in ("method", "a_trials", "b_trials", "family", "case_high"):
            del lv[name]
    data = _saved(t, cross)
    r = load_result(data)
    assert isinstance(r, LoadSweepResult) and r.arms is not None and r.crossover is not None
    assert json.dumps(to_dict(r)) == json.dumps(data)
    # what reads them falls back as the dict readers did: the gate on interval[1], no method named
    assert r.arms.levels[1].vs_best["k2"].case_high is None
    assert crossover.level_text(r.crossover.levels[0]).endswith("3 vs 3 trials)")


def test_a_built_table_writes_the_gate_keys_a_saved_run_has() -> None:
    # one trial per arm: no noise to measure, so a judged level writes noise and trials_needed as null
    rng = np.random.default_rng(2)

    def trial(rate: float) -> Recorded:
        return record({"kind": "load_sweep", "concurrency": [1, 4], "levels": [
            {"concurrency": u, "streams": [{"decode_tps": float(rate / u * x)} for x in rng.lognormal(0, 0.01, 4)]}
            for u in (1, 4)]})

    t = arms.table({"off": [trial(50.0)], "k2": [trial(100.0)]}, baseline="off", max_loss=0.05,
                   tokens={"off": 0, "k2": 2})
    data = to_dict(t)
    assert list(data) == ["names", "baseline", "deployed", "trials", "levels", "schedule", "max_loss_vs_best",
                          "tokens", "num_speculative_tokens", "gate", "text"]
    assert list(data["levels"][0]) == ["users", "arms", "best", "vs_best", "alpha", "tied", "decided"]
    for judged in data["gate"]["levels"]:  # off, deployed, is the slower arm at both levels
        assert list(judged) == ["users", "verdict", "ratio", "interval", "best", "deployed_tps", "best_tps",
                                "noise", "trials_needed"]
        assert judged["noise"] is None and judged["trials_needed"] is None
    assert load_part(data, ArmsTable) == t
    t_best = arms.table({"off": [trial(50.0)], "k2": [trial(100.0)]}, baseline="off", deployed="k2", max_loss=0.05)
    assert t_best.gate is not None
    assert [list(lv) for lv in to_dict(t_best)["gate"]["levels"]] == [["users", "verdict", "ratio", "interval"]] * 2
    cross = crossover.crossover([trial(50.0)], [trial(100.0)], min_speedup=1.0)
    assert list(to_dict(cross)) == ["floor", "gated", "levels", "users", "speedup", "interval", "verdict", "text"]
    assert load_part(to_dict(cross), Crossover) == cross


def test_the_table_and_the_crossover_read_typed_trials_as_they_read_their_json() -> None:
    # the trials helper's rows become records: the same figures whichever form the trials come in
    rng = np.random.default_rng(5)

    def trial(rate: float) -> dict[str, Any]:
        return full({"kind": "load_sweep", "concurrency": [1, 4], "levels": [
            {"concurrency": u, "streams": [{"decode_tps": float(rate / u * x)} for x in rng.lognormal(0, 0.02, 4)]}
            for u in (1, 4)]})

    saved = {"off": [trial(50.0) for _ in range(3)], "k2": [trial(90.0) for _ in range(3)]}
    typed = {name: [load_result(r) for r in rs] for name, rs in saved.items()}
    # the rules take records only: the JSON form is read as the record loaded back from it (the round trip)
    plain = {name: [load_record(to_dict(r)) for r in rs] for name, rs in typed.items()}
    t = arms.table(typed, baseline="off", max_loss=0.05)
    assert t == arms.table(plain, baseline="off", max_loss=0.05) and [lv.users for lv in t.levels] == [1, 4]
    assert crossover.crossover(typed["off"], typed["k2"]) == crossover.crossover(plain["off"], plain["k2"])
    assert crossover.crossover(typed["off"], typed["k2"]).levels[0].n_a == 3
