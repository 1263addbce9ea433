"""The seed profile tells the story over real HTTP: healthy two-point bursts, collapsing sustained rate."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from pytest_specperf.sim import SimServer
from pytest_specperf.sim.textgen import prompt_text

SPEED = 20.0
STORY = {64: 256, 1024: 216, 3072: 113, 5120: 67}


@pytest.fixture(scope="module")
def seed_sim() -> Iterator[SimServer]:
    with SimServer("seed", speed=SPEED) as sim:
        yield sim


def test_two_point_decode_matches_the_story(seed_sim: SimServer) -> None:
    got, client_dt, truth_dt = {}, 0.0, 0.0
    with httpx.Client(base_url=seed_sim.url, timeout=120) as c:
        for ctx in STORY:
            prompt = prompt_text("prose", ctx, seed=ctx)
            client_t, truth_t, model_t = {}, {}, {}
            for n in (8, 264):
                t0 = time.monotonic()
                out = c.post("/v1/completions", json={"model": seed_sim.model, "prompt": prompt, "max_tokens": n,
                                                      "ignore_eos": True}).json()
                client_t[n] = time.monotonic() - t0
                assert out["usage"] == {**out["usage"], "prompt_tokens": ctx, "completion_tokens": n}
                truth = seed_sim.truth(out["id"])
                truth_t[n] = truth["total_s"]
                model_t[n] = truth["steps"][-1]["intended_t_s"]  # the model's own time, free of machine noise
            truth_tps = 256 / (model_t[264] - model_t[8]) / SPEED
            got[ctx] = truth_tps
            assert truth_tps == pytest.approx(STORY[ctx], rel=0.10), (ctx, truth_tps)
            client_dt += client_t[264] - client_t[8]
            truth_dt += truth_t[264] - truth_t[8]
    assert got[64] > got[1024] > got[3072] > got[5120]
    # what a client measures is the truth (real write times), up to the HTTP noise of a busy machine
    assert client_dt == pytest.approx(truth_dt, rel=0.2)


def test_sustained_reasoning_collapses(seed_sim: SimServer) -> None:
    prompt = prompt_text("reasoning", 2700, seed=1)
    body = {"model": seed_sim.model, "prompt": prompt, "max_tokens": 1500, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    rid, usage = "", {}
    with httpx.Client(base_url=seed_sim.url, timeout=300) as c, c.stream("POST", "/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                ev = json.loads(line[6:])
                rid, usage = ev["id"], ev.get("usage") or usage
    truth = seed_sim.truth(rid)
    assert usage["prompt_tokens"] == 2700 and usage["completion_tokens"] == 1500
    assert truth["content_kind"] == "reasoning"
    # on the model's schedule: the real one falls behind it by every wake-up a loaded machine made too late
    assert 1500 / truth["steps"][-1]["intended_t_s"] / SPEED == pytest.approx(33, rel=0.10)
    decode = [s for s in truth["steps"] if s["phase"] == "decode"]
    burst = [s for s in decode if s["ctx"] - 2700 < 264]  # what a two-point run sees
    late = [s for s in decode if s["ctx"] - 2700 >= 1000]
    assert statistics.mean(s["tokens"] for s in burst) == pytest.approx(5.0, abs=0.2)
    assert statistics.mean(s["tokens"] for s in late) == pytest.approx(2.9, abs=0.2)
    assert statistics.mean(s["step_ms"] for s in late) > 3 * statistics.mean(s["step_ms"] for s in burst)
    # each step's time is the YAML's formula at the step's context, written out here from the YAML's fields (the
    # median over each group, as the steps carry a 2% jitter): the step grows with the context as declared
    p = seed_sim.profile

    def declared_ms(st: dict) -> float:
        c, generated = st["ctx"] / 1000.0, st["ctx"] - 2700
        return (p.step_ms + p.step_ms_per_1k_ctx * c + p.step_ms_per_1k_ctx_sq * c * c
                + p.step_ms_per_1k_generated * generated / 1000.0) / SPEED

    for group in (burst, late):
        assert statistics.median(s["step_ms"] / declared_ms(s) for s in group) == pytest.approx(1.0, abs=0.02)
    # prefill is fast (0.06 s for 2700 tokens): the slowness is all in decode
    assert truth["steps"][0]["step_ms"] * SPEED / 1000 == pytest.approx(2700 / 45000)
