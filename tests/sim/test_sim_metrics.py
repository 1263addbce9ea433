"""Prometheus /metrics per dialect: names, update timing, and agreement with truth."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_specperf.sim import SimServer
from pytest_specperf.sim.textgen import prompt_text

PROMPT = prompt_text("prose", 80)


def scrape(url: str) -> dict[str, float]:
    """Sample name (with sorted labels) -> value, skipping _created."""
    out: dict[str, float] = {}
    text = httpx.get(url + "/metrics").text
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k not in ("engine", "model_name"))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def delta(after: dict[str, float], before: dict[str, float], key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def decode_steps(truth: dict) -> list[dict]:
    return [s for s in truth["steps"] if s["phase"] == "decode"]


def drafted_steps(truth: dict) -> list[dict]:
    """Steps that verified a draft (a last step with room for one token drafts nothing)."""
    return [s for s in decode_steps(truth) if s["drafted"] > 0]


def run_stream_with_midpoint_scrape(url: str, tokens: int) -> tuple[dict, dict, dict, str]:
    """(scrape before, scrape mid-stream, scrape after, response id)."""
    before = scrape(url)
    mid: dict[str, float] = {}
    rid = ""
    body = {"prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True, "stream": True, "timings_per_token": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    # the server pauses after 30 tokens, so the mid-stream scrape surely lands while it runs
    headers = {"X-Specperf-Fault": "stall=25@30"}
    with httpx.Client(base_url=url, timeout=60) as c, \
            c.stream("POST", "/v1/completions", json=body, headers=headers) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data: {"):
                continue
            ev = json.loads(line[6:])
            rid = ev["id"]
            done = ev["usage"]["completion_tokens"] if ev.get("usage") else 0
            if "timings" in ev:
                done = ev["timings"]["predicted_n"]
            if done >= 30 and not mid:
                mid = scrape(url)
    assert mid, "the stream never reached 30 tokens"
    return before, mid, scrape(url), rid


def test_vllm_counters_move_per_step_and_match_truth(dialect_sims: dict[str, SimServer]) -> None:
    sim = dialect_sims["vllm"]
    before, mid, after, rid = run_stream_with_midpoint_scrape(sim.url, 300)
    truth = sim.truth(rid)
    steps = drafted_steps(truth)
    assert 0 < delta(mid, before, "vllm:spec_decode_num_drafts_total") < len(steps)  # updated while running
    assert mid["vllm:num_requests_running"] >= 1
    assert delta(after, before, "vllm:spec_decode_num_drafts_total") == len(steps)
    accepted = sum(s["accepted"] for s in steps)
    assert delta(after, before, "vllm:spec_decode_num_accepted_tokens_total") == accepted
    assert delta(after, before, "vllm:spec_decode_num_draft_tokens_total") == sum(s["drafted"] for s in steps)
    per_pos = [delta(after, before, f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={i}}}")
               for i in range(sim.profile.max_accept - 1)]
    assert sum(per_pos) == accepted and per_pos == sorted(per_pos, reverse=True)
    # mean acceptance length from the counters equals tokens per decode step in the truth, and what the
    # profile declares (bonus token included): healthy prose, min-variance, is 3 tokens a step
    mean_len = 1 + accepted / len(steps)
    assert mean_len == pytest.approx(sum(s["tokens"] for s in steps) / len(steps))
    assert mean_len == pytest.approx(sim.profile.accept_len["prose"], rel=0.02)
    assert delta(after, before, "vllm:generation_tokens_total") == 300


def test_llamacpp_counters_fold_in_at_request_end(dialect_sims: dict[str, SimServer]) -> None:
    sim = dialect_sims["llamacpp"]
    before, mid, after, rid = run_stream_with_midpoint_scrape(sim.url, 300)
    steps = drafted_steps(sim.truth(rid))
    assert delta(mid, before, "llamacpp:spec_decode_num_drafts_total") == 0
    assert delta(mid, before, "llamacpp:tokens_predicted_total") == 0
    assert delta(after, before, "llamacpp:spec_decode_num_drafts_total") == len(steps)
    assert delta(after, before, "llamacpp:spec_decode_num_accepted_tokens_total") == sum(s["accepted"] for s in steps)
    assert delta(after, before, "llamacpp:tokens_predicted_total") == 300
    assert after["llamacpp:predicted_tokens_seconds"] > 0
    assert scrape(sim.url)["llamacpp:predicted_tokens_seconds"] == 0  # the window resets on every scrape


def test_sglang_verify_calls_and_accept_length(dialect_sims: dict[str, SimServer]) -> None:
    sim = dialect_sims["sglang"]
    before, mid, after, rid = run_stream_with_midpoint_scrape(sim.url, 300)
    steps = decode_steps(sim.truth(rid))
    assert delta(mid, before, "sglang:spec_verify_calls_total") == 0  # per finished request
    assert delta(after, before, "sglang:spec_verify_calls_total") == len(steps)
    assert delta(after, before, "sglang:generation_tokens_total{is_streaming=true}") == 300
    assert after["sglang:spec_accept_length"] == pytest.approx(sim.profile.accept_len["prose"], abs=1.0)
    assert 0 < after["sglang:spec_accept_rate"] < 1


@pytest.fixture(scope="module")
def fresh_llamacpp() -> Iterator[SimServer]:
    with SimServer("healthy", speed=50, in_process=True, overrides={"dialect": "llamacpp"}) as sim:
        yield sim


def test_llamacpp_per_position_appears_after_first_speculative_request(fresh_llamacpp: SimServer) -> None:
    assert not any("per_pos" in k for k in scrape(fresh_llamacpp.url))
    httpx.post(fresh_llamacpp.url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 20, "ignore_eos": True})
    assert any("per_pos" in k for k in scrape(fresh_llamacpp.url))


@pytest.mark.parametrize(("dialect", "status"), [("llamacpp", 501), ("sglang", 404)])
def test_metrics_off(dialect: str, status: int) -> None:
    with SimServer("healthy", in_process=True, overrides={"dialect": dialect, "metrics": False}) as sim:
        resp = httpx.get(sim.url + "/metrics")
    assert resp.status_code == status
    if dialect == "llamacpp":
        assert "--metrics" in resp.text


def test_llamacpp_headers(dialect_sims: dict[str, SimServer]) -> None:
    resp = httpx.get(dialect_sims["llamacpp"].url + "/metrics")
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert int(resp.headers["process-start-time-unix"]) > 0
