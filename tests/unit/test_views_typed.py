"""A view takes a typed result or its JSON and shows the same for both: each view types its input once."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.report.views import registry

BASE = {"endpoint": "http://127.0.0.1:1", "model": "m", "server": "sim", "ctx": 100, "prompt_tokens": 90}
STREAM = {"prompt_tokens": 90, "completion_tokens": 96, "ttft_s": 0.05, "total_s": 1.05, "decode_tps": 96.0,
          "client_tps": 91.0, "window_tokens": 16, "window_tps": [100.0, 98.0, 97.0, 96.0, 94.0, 90.0],
          "early_tps": 99.0, "late_tps": 92.0, "drift": 0.07, "trend_p": 0.01,
          "stalls": [{"at_token": 40, "gap_s": 0.3}], "tokens_per_chunk": 1.0, "count_source": "usage",
          "counts_exact": True}
CATS = {"qa": {"n": 2, "n_prompts": 1, "decode_tps_p50": 95.0, "ttft_p50_s": 0.004, "min_tps": 90.0}}
RESULTS: dict[str, dict[str, Any]] = {
    "sustained": {**BASE, "kind": "sustained", "decode_tps": 96.0, "early_tps": 99.0, "late_tps": 92.0, "drift": 0.07,
                  "min_tps": 80.0, "streams": [STREAM], "window_accept_len": [2.0, 1.9, 1.8, 1.8, 1.7, 1.6],
                  "acceptance": {"mean_len": 1.8, "rate": 0.4, "source": "chunks", "exact": False},
                  "attribution": {"accept_early": 2.0, "accept_late": 1.6, "step_ms_early": 20.0,
                                  "step_ms_late": 20.5, "accept_share": 0.9, "step_share": 0.1},
                  "categories": CATS, "burst_tps": 101.0, "burst_gap": 0.05,
                  "history": [{"metric": "decode_tps", "runs": 3, "verdict": "passed", "effect": 0.01,
                               "series": [{"value": 95.0, "lo": 94.0, "hi": 96.0}], "predicted": 95.0,
                               "interval": [93.0, 97.0], "value": 96.0}]},
    "two_point": {**BASE, "kind": "two_point", "decode_tps": 97.0, "samples_tps": [96.0, 97.0, 98.0], "min_tps": 50},
    "ctx_sweep": {**BASE, "kind": "ctx_sweep", "decode_tps": 80.0,
                  "points": [{"ctx": 100, "prompt_tokens": 90, "t_short_s": 0.1, "t_long_s": 2.0, "decode_tps": 95.0},
                             {"ctx": 1000, "prompt_tokens": 990, "t_short_s": 0.2, "t_long_s": 2.4,
                              "decode_tps": 80.0}]},
    "load_sweep": {**BASE, "kind": "load_sweep", "concurrency": [1, 4], "knee": 4, "min_tps": {"4": 20.0},
                   "levels": [{"concurrency": 1, "decode_tps": 96.0, "total_tps": 96.0, "ttft_p90_s": 0.05},
                              {"concurrency": 4, "decode_tps": 60.0, "total_tps": 230.0, "ttft_p90_s": 0.2,
                               "verdict": "failed", "reason": "slow"}]},
    "rate": {**BASE, "kind": "rate", "rps": 2.0, "slo": {"ttft_s": 0.5}, "attainment": 0.5, "met": 1,
             "ttft_p90_s": 0.6, "missed": {"ttft_s": 1},
             "per_request": [{"at_s": 0.0, "sent_s": 0.0, "late_s": 0.0, "status": 200, "ttft_s": 0.1, "e2e_s": 1.0,
                              "met": True},
                             {"at_s": 0.5, "sent_s": 0.5, "late_s": 0.0, "status": 200, "ttft_s": 0.7, "e2e_s": 1.6,
                              "met": False}]},
    "capacity": {**BASE, "kind": "capacity", "slo": {"ttft_s": 0.5}, "max_rps": 2.0, "bracket": [2.0, 4.0],
                 "probes": [{"rps": 2.0, "requests": 8, "counted": 8, "attainment": 1.0, "passed": True,
                             "ttft_p50_s": 0.1, "ttft_p90_s": 0.2, "ttft_p99_s": 0.3},
                            {"rps": 4.0, "requests": 8, "counted": 8, "attainment": 0.5, "passed": False,
                             "ttft_p50_s": 0.4, "ttft_p90_s": 0.9, "ttft_p99_s": 1.2}]},
    "session": {**BASE, "kind": "session", "users": 2, "turns": 2, "min_cache_hit": 0.5,
                "per_turn": [{"turn": 1, "sessions": 2, "ttft_p50_s": 0.05, "ttft_p90_s": 0.06},
                             {"turn": 2, "sessions": 2, "ttft_p50_s": 0.04, "ttft_p90_s": 0.05, "cache_hit": 0.8}],
                "per_request": [{"user": 0, "turn": 1, "sent_s": 0.0, "ttft_s": 0.05, "prompt_tokens": 90},
                                {"user": 0, "turn": 2, "sent_s": 1.0, "ttft_s": 0.04, "prompt_tokens": 200}]},
}


@pytest.mark.parametrize("kind", RESULTS)
def test_a_view_shows_the_same_for_a_typed_result_and_its_json(kind: str) -> None:
    data = RESULTS[kind]
    from_json = registry.view(data)
    assert from_json == registry.view(load_result(data))
    assert from_json.charts and len(from_json.facts) > 3  # drawn from the fields above, not an empty view


def test_the_views_every_kind_shares_read_the_typed_result() -> None:
    # categories, the history's trend: drawn for any kind, each from its own field of the typed result
    v = registry.view(load_result(RESULTS["sustained"]))
    facts = dict(v.facts)
    assert facts["category qa"].startswith("n=2 (1 prompt)") and "TTFT p50 4.0 ms" in facts["category qa"]
    assert facts["history decode_tps"] == "+1.0% vs 3 runs: passed"
    ids = [c.id for c in v.charts]
    assert "categories-decode_tps_p50" in ids and "trend0" in ids
