"""Cases over a prompt file against the simulator's truth: per category, the figures are the truth's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import numpy as np
import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.run import drift
from pytest_specperf.sim import SimServer

TOKENS = 400  # well past math_reasoning's shift at 256 generated tokens: its drift is in the truth too


@pytest.fixture(scope="module")
def cat_sim() -> Iterator[SimServer]:
    """The shipped categories profile; mild compression (10 ms steps) so a busy machine's late reads stay small
    against a step, as in test_measure_truth."""
    with SimServer("categories", speed=2.0, overrides={"jitter": 0.0}) as sim:
        yield sim


def _truth_decode(truth: dict) -> float:
    steps = truth["steps"]
    return (sum(s["tokens"] for s in steps) - steps[0]["tokens"]) / (steps[-1]["t_s"] - steps[0]["t_s"])


def _truth_drift(truth: dict) -> float:
    steps = truth["steps"]
    t, k = np.array([s["t_s"] for s in steps]), np.array([s["tokens"] for s in steps])
    return drift.drift(drift.window_rates(t, k)).drift


def _truth_accept_len(truths: list[dict]) -> float:
    decode = [s for t in truths for s in t["steps"][1:]]
    return sum(s["tokens"] for s in decode) / len(decode)


def test_sustained_figures_per_category_are_the_truths(cat_sim: SimServer, runner_for) -> None:
    spec = build_spec("sustained", {"prompts": "builtin:specbench-mini", "tokens": TOKENS,
                                    "categories": ["qa", "tool_call", "math_reasoning"]})
    r = runner_for(cat_sim.url).run(spec, "cats::sustained")
    assert r.repeat == 12 and set(r.categories) == {"qa", "tool_call", "math_reasoning"}
    truths: dict[str, list[dict]] = defaultdict(list)
    for s in r.streams:
        t = cat_sim.truth(s.response_id)
        assert t["category"] == s.category  # the simulator read the category off the text the case sent
        assert s.prompt_tokens == t["prompt_tokens"]  # the server's own count of that prompt
        truths[s.category].append(t)
    for cat, f in r.categories.items():
        ts = truths[cat]
        assert f.n == f.n_prompts == len(ts) == 4
        assert abs(f.accept_len / _truth_accept_len(ts) - 1) < 0.02, (cat, f.accept_len)
        decodes = [_truth_decode(t) for t in ts]
        truth_decode = float(np.median(decodes))
        assert abs(f.decode_tps_p50 / truth_decode - 1) < 0.02, (cat, f.decode_tps_p50, truth_decode)
        truth_p10 = float(np.percentile(decodes, 10))
        assert abs(f.decode_tps_p10 / truth_p10 - 1) < 0.02, (cat, f.decode_tps_p10, truth_p10)
        truth_ttft = float(np.median([t["ttft_s"] for t in ts]))
        # TTFT within what a busy machine's late reads move it (measured with two CPU hogs)
        assert abs(f.ttft_p50_s - truth_ttft) < 0.01, (cat, f.ttft_p50_s, truth_ttft)
    # Drift: math_reasoning's is the profile's (accept 3.0 -> 2.2 after 256 tokens), and the truth's. The
    # stationary categories' drifts are window noise of a few per cent, which a busy machine moves as much
    # in the truth's own step times as in the reads; only their order against math_reasoning is judged.
    ts = truths["math_reasoning"]
    truth_drift = float(np.median([_truth_drift(t) for t in ts]))
    assert truth_drift > 0.15
    assert abs(r.categories["math_reasoning"].drift - truth_drift) < 0.05, (r.categories, truth_drift)
    # the categories differ as the profile says: tool_call accepts most, qa least; math_reasoning drifts
    acc = {c: f.accept_len for c, f in r.categories.items()}
    assert acc["tool_call"] > acc["qa"] > acc["math_reasoning"]  # 5.6; 2.8; 3.0 then 2.2 after 256 tokens
    assert r.categories["math_reasoning"].drift > r.categories["qa"].drift + 0.05


def test_rate_arrivals_draw_every_category_and_record_it(cat_sim: SimServer, runner_for) -> None:
    spec = build_spec("rate", {"prompts": "builtin:specbench-mini", "tokens": 32, "rps": 40, "requests": 30,
                               "slo": {"ttft_s": 5}})
    r = runner_for(cat_sim.url).run(spec, "cats::rate")
    ok = [p for p in r.per_request if p.status == 200]
    assert len(ok) == 30 and len({p.prompt_id for p in ok}) == 30  # 30 arrivals: each prompt once
    for p in ok:
        t = cat_sim.truth(p.response_id)
        assert (t["category"], t["prompt_tokens"]) == (p.category, p.prompt_tokens)
    assert {c: f.requests for c, f in r.categories.items()} == {
        "multi_turn": 4, "translation": 4, "summarization": 3, "qa": 4, "math_reasoning": 4, "rag": 3, "coding": 4,
        "tool_call": 4}


def test_load_users_send_every_prompt_once_on_chat(cat_sim: SimServer, runner_for) -> None:
    spec = build_spec("sustained", {"prompts": "builtin:specbench-mini", "tokens": 64, "concurrency": 8,
                                    "api": "chat"})
    r = runner_for(cat_sim.url).run(spec, "cats::load")
    streams = [*r.streams, *r.warmup_drain_streams]  # judged, and warm-up and drain (run/load.py)
    ids = [s.prompt_id for s in streams]
    assert len(ids) == len(set(ids)) == 30 == r.requests  # 8 users in flight over the whole file, each prompt once
    truths = [cat_sim.truth(s.response_id) for s in streams]
    assert [(t["category"], t["prompt_tokens"]) for t in truths] == [(s.category, s.prompt_tokens) for s in streams]
    assert sum(f.n for f in r.categories.values()) == 30


def test_capacity_reports_categories_at_the_rate_it_found(runner_for) -> None:
    # 30 requests a probe draw each of the file's 30 prompts once, so every category is in every probe (16 could
    # miss all three prompts of one category when a busy machine holds the capacity found to the lowest probes)
    with SimServer("categories", speed=20, overrides={"jitter": 0.0}) as sim:
        spec = build_spec("capacity", {"prompts": "builtin:specbench-mini", "tokens": 32, "slo": {"ttft_s": 0.05},
                                       "start_rps": 20, "probe_s": 0.5, "min_requests": 30, "budget_s": 6,
                                       "precision": 0.5})
        r = runner_for(sim.url).run(spec, "cats::capacity")
    best = next(p for p in r.probes if p.rps == r.max_rps)
    assert r.categories == best.categories and r.content == "builtin:specbench-mini"
    assert sum(f.requests for f in r.categories.values()) == best.requests
    assert len(r.categories) == 8 and all(f.attainment is not None for f in r.categories.values())
