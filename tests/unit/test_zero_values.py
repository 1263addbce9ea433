"""Zero is a value, the worst one: attainment, goodput or max_rps falling to 0 against a baseline is a regression."""

from __future__ import annotations

from pytest_specperf.compare import gates as gating
from pytest_specperf.compare import trials as compare
from tests.support import judged_json
from tests.support.records import record, records
from tests.support.result_json import full


def _rate(**figures: float) -> dict:
    """A rate result's JSON (as a saved run or the history holds it: every field its record requires)."""
    return full({"nodeid": "t::rate", "kind": "rate", "verdict": "passed", "reason": "", "ttft_p90_s": 0.4,
                 "tpot_p90_ms": 30.0, "e2e_p90_s": 8.0, **figures})


def test_rate_figures_falling_to_zero_regress_and_fail_the_case() -> None:
    # Every request refused or late: nothing met the SLO, while the latencies of the answered ones held.
    base, cand = _rate(goodput_rps=3.8, attainment=0.97), _rate(goodput_rps=0.0, attainment=0.0)
    judged_json.against_baseline(gating.Gate(0.05, "warn"), cand, [base])
    verdicts = {c["metric"]: c["verdict"] for c in cand["comparisons"]}
    assert verdicts["goodput_rps"] == verdicts["attainment"] == "regressed"
    assert cand["verdict"] == "failed" and "attainment fell to 0 from 0.97" in cand["reason"]


def test_capacity_falling_to_zero_regresses() -> None:
    cap = full({"nodeid": "t::cap", "kind": "capacity", "verdict": "passed", "reason": "", "max_rps": 0.0})
    judged_json.against_baseline(gating.Gate(0.05, "warn"), cap, [{**cap, "max_rps": 4.0}])
    assert [(c["metric"], c["verdict"]) for c in cap["comparisons"]] == [("max_rps", "regressed")]
    assert cap["verdict"] == "failed" and "max_rps fell to 0 from 4" in cap["reason"]


def test_zero_on_either_side_is_compared_not_skipped() -> None:
    def verdict(base: list[float], cand: list[float]) -> str:
        # several results with one nodeid are pooled, as A/B records one per trial
        b, c = ([record({"nodeid": "t::r", "kind": "rate", "verdict": "passed", "attainment": v}) for v in side]
                for side in (base, cand))
        [cc] = compare.compare_runs(b, c, metrics=("attainment",))
        return cc.verdict

    assert verdict([0.9], [0.0]) == "regressed"
    assert verdict([0.0], [0.9]) == "improved"
    assert verdict([0.0], [0.0]) == "passed"
    # zero trials among positive ones take the lowest ranks: five of six candidate trials at 0 is a regression
    assert verdict([0.9, 0.91, 0.92, 0.9, 0.93, 0.9], [0.0, 0.0, 0.0, 0.0, 0.0, 0.9]) == "regressed"
    assert verdict([0.9, 0.91, 0.92, 0.9, 0.93, 0.9], [0.9, 0.0, 0.91, 0.92, 0.9, 0.93]) != "regressed"


def test_a_latency_of_zero_is_no_measurement() -> None:
    # lower-is-better figures are never 0 when measured; a 0 there stays out of the comparison
    b = [_rate(goodput_rps=3.8, attainment=0.97)]
    c = [_rate(goodput_rps=3.8, attainment=0.97, tpot_p90_ms=0.0)]
    out = {cc.metric: cc for cc in compare.compare_runs(records(b), records(c), metrics=("tpot_p90_ms",))}
    assert out["tpot_p90_ms"].verdict == "skipped" and "no values in the candidate" in out["tpot_p90_ms"].reason
