"""A case's result stays its typed record through gating (issue 36): the baseline gate sets typed comparisons and
the verdict on it, the view users get is its JSON, and a row combined from A/B trials is a record of its kind whose
JSON loads back whole (hand-built results; the figures are the JSON the same gate writes for plain data)."""

from __future__ import annotations

from typing import Any

import numpy as np
from support import judged_json

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import CaseComparison, CategoryFigures
from pytest_specperf.cases.result_view import ResultView
from pytest_specperf.cases.results import RateResult, Result, StreamResult, SustainedResult
from pytest_specperf.cases.saved_results import load_record, load_result
from pytest_specperf.compare import gates
from pytest_specperf.measure import interleaved


def _stream(tps: float, trial: int | None = None) -> StreamResult:
    return StreamResult(prompt_tokens=500, completion_tokens=64, ttft_s=0.1, total_s=1.0, decode_tps=tps,
                        client_tps=tps, window_tokens=None, window_tps=[], early_tps=None, late_tps=None, drift=None,
                        trend_p=None, stalls=[], tokens_per_chunk=1.0, count_source="usage", counts_exact=True,
                        trial=trial)


def _sustained(tps: list[float], users: int = 1, **kw: Any) -> SustainedResult:
    return SustainedResult(kind="sustained", endpoint="http://x", model="m", server="vllm", ctx=500, prompt_tokens=500,
                           nodeid="t::c", decode_tps=float(np.median(tps)), ttft_s=0.1, concurrency=users,
                           total_tps=float(sum(tps)) if users > 1 else None,
                           streams=[_stream(v) for v in tps], repeat=1 if users > 1 else len(tps), **kw)


def test_the_baseline_gate_sets_typed_comparisons_and_the_verdict_as_for_data() -> None:
    rng = np.random.default_rng(7)
    base = _sustained(list(100 * np.exp(rng.normal(0, 0.01, 8))))
    typed = _sustained(list(80 * np.exp(rng.normal(0, 0.01, 8))))  # 20 % slower: regressed
    data = to_dict(typed)
    notes_typed = gates.against_baseline(gates.Gate(), typed, [base])
    notes_data = judged_json.against_baseline(gates.Gate(), data, [to_dict(base)])
    assert typed.verdict == "failed" and "decode_tps" in typed.reason
    assert typed.comparisons and all(isinstance(cc, CaseComparison) for cc in typed.comparisons)
    assert notes_typed == notes_data and to_dict(typed) == data  # the same judgement, typed or as data
    assert gates.comparisons_of([typed]) == gates.comparisons_of([load_record(data)])


def test_the_users_view_is_the_results_json_with_the_late_fields_last() -> None:
    r = _sustained([100.0, 101.0])
    gates.against_baseline(gates.Gate(), r, [_sustained([100.0, 100.5])])
    r.call = 2
    view = ResultView.of(r)
    assert view.as_dict() == to_dict(r) and view.decode_tps == r.decode_tps and view["call"] == 2
    assert list(view.as_dict())[-2:] == ["comparisons", "call"]  # as they were added, after the figures


def _rate(goodput: float) -> RateResult:
    return RateResult(kind="rate", endpoint="http://a", model="m", server="vllm", ctx=200, prompt_tokens=200,
                      nodeid="t::r", rps=2.0, goodput_rps=goodput, attainment=goodput / 2.0, decode_tps=50.0,
                      ttft_p90_s=0.2, tpot_p90_ms=20.0, e2e_p90_s=1.0)


def _round_trip(row: Result) -> tuple[Result, dict[str, Any]]:
    data = to_dict(row)
    return load_result(data), data


def test_a_combined_ab_row_of_every_shape_loads_into_its_record_whole() -> None:
    rng = np.random.default_rng(3)
    cats = {"code": CategoryFigures(n=2, n_prompts=2, decode_tps_p50=120.0), "chat": CategoryFigures(n=2, n_prompts=2,
                                                                                                     decode_tps_p50=90.0)}
    shapes = {
        "rate": lambda: _rate(float(1.8 + rng.normal(0, 0.02))),  # open loop: the row's repeat
        "load": lambda: _sustained(list(100 * np.exp(rng.normal(0, 0.02, 4))), users=4),  # per-trial figures
        "categories": lambda: _sustained([100.0, 110.0], prompts="p.yaml",  # B's speedup per category
                                         categories={k: CategoryFigures(**{**to_dict(v), "decode_tps_p50":
                                                     float(v.decode_tps_p50 or 0) * np.exp(rng.normal(0, 0.02))})
                                                     for k, v in cats.items()}),
    }
    for name, measure in shapes.items():
        row, _ = interleaved.run_ab(measure, measure, 3, gates.Gate())
        typed, data = _round_trip(row)
        assert to_dict(typed) == data and type(typed) is type(row), name  # its JSON loads back into the same
        assert row.ab is not None and row.ab.trials == 3
    rate, _ = interleaved.run_ab(shapes["rate"], shapes["rate"], 3, gates.Gate())
    assert isinstance(rate, RateResult) and rate.repeat == 3
    load, _ = interleaved.run_ab(shapes["load"], shapes["load"], 3, gates.Gate())
    assert isinstance(load, SustainedResult) and load.trials is not None and len(load.trials) == 3
    assert {s.trial for s in load.streams} == {0, 1, 2}
    cat, _ = interleaved.run_ab(shapes["categories"], shapes["categories"], 3, gates.Gate())
    assert isinstance(cat, SustainedResult) and cat.categories is not None
    code = cat.categories["code"]
    assert code.speedup is not None and code.speedup_interval is not None and code.trials == 3
