"""Acceptance parsers on the documented shapes (docs/servers.md), including sources the simulator does not emit."""

import pytest

from pytest_specperf.run.acceptance import (
    from_llamacpp_timings,
    from_sglang_details,
    from_tgi_summary,
    from_vllm_response,
    snapshot,
)

TGI_BEFORE = """# TYPE tgi_request_skipped_tokens summary
tgi_request_skipped_tokens{quantile="0.5"} 2
tgi_request_skipped_tokens_sum 100
tgi_request_skipped_tokens_count 50
"""
TGI_AFTER = """# TYPE tgi_request_skipped_tokens summary
tgi_request_skipped_tokens{quantile="0.5"} 3
tgi_request_skipped_tokens_sum 400
tgi_request_skipped_tokens_count 150
"""


def test_tgi_summary_delta_gives_mean_length() -> None:
    acc = from_tgi_summary(snapshot(TGI_BEFORE), snapshot(TGI_AFTER))
    assert acc is not None and not acc.exact
    assert acc.steps == 100 and acc.mean_len == 1 + 300 / 100


def test_vllm_per_request_metrics() -> None:
    m = {"speculative_decoding": {"mean_acceptance_length": 3.0, "draft_acceptance_rate": 0.5, "num_spec_steps": 10,
                                  "num_accepted_draft_tokens": 20, "num_draft_tokens": 40, "num_spec_tokens": 4}}
    acc = from_vllm_response([m, m])
    assert acc is not None and acc.source == "response" and acc.exact
    assert (acc.steps, acc.accepted, acc.drafted) == (20, 40, 80)
    assert acc.mean_len == 3.0 and acc.rate == 0.5
    assert from_vllm_response([{"speculative_decoding": None}]) is None


def test_llamacpp_missing_draft_keys_mean_zero() -> None:
    acc = from_llamacpp_timings([{"predicted_n": 100}])
    assert acc is not None and acc.drafted == 0 and acc.rate is None
    acc = from_llamacpp_timings([{"draft_n": 10, "draft_n_accepted": 7}, {"draft_n": 10, "draft_n_accepted": 3}])
    assert acc is not None and acc.rate == 0.5


def test_sglang_spec_tokens_details() -> None:
    # SGLang: histogram index j = verify steps that accepted j drafts; proposed = verify_ct * (draft tokens - 1).
    d = {"spec_accept_rate": 0.475, "spec_accept_length": 3.0, "spec_num_correct_drafts": 19,
         "spec_num_proposed_drafts": 40, "spec_verify_ct": 10, "spec_correct_drafts_histogram": [2, 3, 1, 2, 2]}
    acc = from_sglang_details([d, d])
    assert acc is not None and acc.source == "response" and acc.exact
    assert (acc.steps, acc.accepted, acc.drafted) == (20, 38, 80)
    assert acc.mean_len == 1 + 38 / 20 and acc.rate == 38 / 80
    assert acc.per_position == [0.8, 0.5, 0.4, 0.2]  # position k accepted in the steps that took more than k
    assert sum(acc.per_position) == pytest.approx(38 / 20)
    old = from_sglang_details([{"spec_accept_length": 2.5, "spec_verify_ct": 4}])
    assert old is not None and not old.exact and old.mean_len == 2.5 and old.rate is None
    assert from_sglang_details([{"spec_verify_ct": 0}]) is None
