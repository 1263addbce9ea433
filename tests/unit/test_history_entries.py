"""A result's history entries are records (``HistoryEntry``, its ``TrendPoint``s and ``ChangePoint``s) that load
from a saved run's JSON and write back exactly the JSON they were read from: keys, their order, values."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import ChangePoint, HistoryEntry, MetricTrend, TrendPoint
from pytest_specperf.cases.saved_results import load_part, load_result
from pytest_specperf.report.views import trend as trend_view

#: an entry as a run judged against its history saved it (a change began 3 runs ago; two runs shown), with an
#: int where a float field holds a whole number, as JSON may have it
ENTRY: dict[str, Any] = {
    "key": "test_perf.py::test_case", "metric": "decode_tps", "verdict": "regressed", "by": "change point",
    "runs": 12, "value": 992.6052168624362, "predicted": 2496.43306197914,
    "interval": [619.9344922869639, 10052.962225011523], "effect": -0.6023906140405336, "p": 0.03213687121964313,
    "between": 0.43060627567028426, "within": 0.028492809035060025,
    "series": [{"run": 11, "commit": "unversioned", "created": "2026-12-06T04:55:23Z", "value": 993,
                "lo": 991.6743597085665, "hi": 994.5834999088278},
               {"run": 12, "commit": "unversioned", "created": "2026-12-06T04:55:27Z", "value": 992.489806993978,
                "lo": 991.1172752436064, "hi": 993.8642394713906}],
    "first_shown": 10,
    "changes": [{"index": 10, "run": 11, "commit": "unversioned", "created": "2026-12-06T04:55:23Z",
                 "before": 3002.0006952300914, "after": 992.740924008949, "effect": -0.669306897368037}],
    "began": {"index": 10, "run": 11, "commit": "unversioned", "created": "2026-12-06T04:55:23Z",
              "before": 3002.0006952300914, "after": 992.740924008949, "effect": -0.669306897368037,
              "level_before": 3002.0006952300914, "level_now": 992.740924008949},
    "since": 3,
    "reason": "test_perf.py::test_case decode_tps: a change began at run 11 (commit unversioned, "
              "2026-12-06T04:55:23Z): 3002 before, 992.7 now (-66.9% over 3 runs)",
}


def _passed() -> dict[str, Any]:
    """The same entry had no change decided it: no ``began``, no ``since`` (the JSON has neither key)."""
    out = {k: v for k, v in copy.deepcopy(ENTRY).items() if k not in ("began", "since")}
    out["verdict"], out["by"] = "passed", ""
    return out


def test_an_entry_with_began_and_changes_loads_as_a_record_and_writes_back_the_same_json() -> None:
    entry = load_part(ENTRY, HistoryEntry)
    assert isinstance(entry.began, ChangePoint) and entry.began.level_before == 3002.0006952300914
    assert isinstance(entry.series[0], TrendPoint) and entry.series[0].run == 11
    assert isinstance(entry.changes[0], ChangePoint) and entry.changes[0].level_now is None
    # the same text: the same keys in the same order with the same values (an int stays an int)
    assert json.dumps(to_dict(entry)) == json.dumps(ENTRY)


def test_an_entry_without_a_change_writes_neither_began_nor_since() -> None:
    data = _passed()
    entry = load_part(data, HistoryEntry)
    assert entry.began is None and entry.since is None
    assert json.dumps(to_dict(entry)) == json.dumps(data)


def test_a_saved_result_with_history_loads_typed_and_writes_back_the_same_json() -> None:
    result = {"kind": "sustained", "endpoint": "http://x", "model": "m", "server": "sim", "ctx": 200,
              "prompt_tokens": 200, "nodeid": "test_perf.py::test_case", "verdict": "failed",
              "reason": ENTRY["reason"], "history": [ENTRY, _passed()]}
    loaded = load_result(result)
    assert loaded.history is not None and all(isinstance(e, HistoryEntry) for e in loaded.history)
    written = to_dict(loaded)
    assert json.dumps(written["history"]) == json.dumps(result["history"])
    assert list(written)[-1] == "history"  # set after measuring: written last, as it always was
    # what the report shows of it, read from the record
    assert trend_view.facts(loaded) == [
        ("history decode_tps", "-60.2% vs 12 runs: regressed; change began at run 11 (unversioned)"),
        ("history decode_tps", "-60.2% vs 12 runs: passed")]
    assert [c.title for c in trend_view.charts(loaded)] == [
        "decode_tps over 12 runs: regressed (-60.2% vs predicted)", "decode_tps over 12 runs: passed (-60.2% vs "
        "predicted)"]


def test_a_trend_without_a_prediction_leaves_its_fields_out() -> None:
    trend = MetricTrend(key="t::a", metric="decode_tps", runs=3, series=[TrendPoint(value=1.0, lo=0.9, hi=1.1)])
    assert list(to_dict(trend)) == ["key", "metric", "runs", "first_shown", "series", "changes"]
    trend.predicted, trend.interval, trend.between, trend.within = 1.0, [0.8, 1.2], 0.01, 0.02
    assert list(to_dict(trend))[-4:] == ["predicted", "interval", "between", "within"]
    (chart,) = trend_view.trend_charts([trend])
    assert [s.name for s in chart.series] == ["earlier runs, 95% interval", "predicted for the next run"]


def test_a_ttft_trend_is_drawn_in_ms_as_the_table_shows_it() -> None:
    """The table shows a TTFT of 0.167 s as 167 ms; the trend chart draws it at 167 on an axis in ms, named as the
    figure the history judges."""
    trend = MetricTrend(key="t::a", metric="ttft_s", runs=2, series=[TrendPoint(value=0.167, lo=0.150, hi=0.180),
                                                                      TrendPoint(value=0.170, lo=0.160, hi=0.181)])
    (chart,) = trend_view.trend_charts([trend])
    assert chart.series[0].y == pytest.approx([167.0, 170.0]) and chart.series[0].low == pytest.approx([150, 160])
    assert chart.ylabel.startswith("ttft, ms") and "geometric mean" in chart.ylabel
