"""Truth records: consistent with what the client saw, exact model times, speed scaling (batching: test_sim_batch)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import httpx
import pytest
from support.sim_helpers import chunk_tokens, stream, stream_body

from pytest_specperf.sim import SimServer, classify
from pytest_specperf.sim.model import RequestModel
from pytest_specperf.sim.textgen import prompt_text

PROMPT = prompt_text("prose", 200)


def test_truth_record_is_consistent(sim: SimServer, client: httpx.Client) -> None:
    s = stream(client, "/v1/completions", stream_body(sim.dialect, prompt=PROMPT, max_tokens=90))
    truth = sim.truth(s.id)
    steps = truth["steps"]
    assert truth["done"] and truth["finish_reason"] == "length" and truth["prompt_tokens"] == 200
    assert steps[0]["phase"] == "prefill" and steps[0]["tokens"] == 1 and truth["ttft_s"] == steps[0]["t_s"]
    assert sum(st["tokens"] for st in steps) == truth["completion_tokens"] == 90
    assert all(st["tokens"] == st["accepted"] + 1 for st in steps[1:])
    t = [st["t_s"] for st in steps]
    assert t == sorted(t) and truth["total_s"] >= t[-1]
    # a chunk is never written before its time: truth t_s never precedes the schedule
    assert all(st["t_s"] >= st["intended_t_s"] - 1e-6 for st in steps)
    assert truth["content_kind"] == classify(PROMPT) == "prose"
    # what the client counted per chunk, in order, is what the truth says was written per step
    cum, seen = 0, []
    for ev in s.events:
        n, cum = chunk_tokens(sim.dialect, ev, cum)
        seen.append(n)
    expected = [st["tokens"] for st in steps]
    if sim.dialect == "llamacpp":
        expected = [1] * 90
    assert [n for n in seen if n] == expected


def test_truth_404_for_unknown_id(vllm_sim: SimServer) -> None:
    assert httpx.get(vllm_sim.url + "/sim/truth/cmpl-nope").status_code == 404
    with pytest.raises(KeyError):
        vllm_sim.truth("cmpl-nope")


def test_intended_step_times_are_the_model(vllm_sim: SimServer) -> None:
    out = httpx.post(vllm_sim.url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 120,
                                                             "ignore_eos": True, "seed": 4}).json()
    truth = vllm_sim.truth(out["id"])
    model = RequestModel(vllm_sim.profile, truth["prompt_tokens"], truth["content_kind"], seed=0)
    generated = 1
    for st in truth["steps"][1:]:
        assert st["batch"] == 1
        assert st["step_ms"] == pytest.approx(model.base_step_ms(generated) / vllm_sim.speed)
        assert st["ctx"] == truth["prompt_tokens"] + generated
        generated += st["tokens"]
    gaps = [b["intended_t_s"] - a["intended_t_s"] for a, b in zip(truth["steps"], truth["steps"][1:], strict=False)]
    assert gaps == pytest.approx([st["step_ms"] / 1000 for st in truth["steps"][1:]])


@pytest.fixture(scope="module")
def speed_pair(vllm_sim: SimServer) -> Iterator[tuple[SimServer, SimServer]]:
    """The session server's profile at two speeds, one half the other, both slow enough (a 200-token
    schedule of 0.4 and 0.9 s) that a busy machine's wake-ups, tens of ms, are small beside it."""
    with SimServer(vllm_sim.profile, speed=0.25) as slow, SimServer(vllm_sim.profile, speed=0.5) as fast:
        yield slow, fast


def test_speed_divides_every_time(speed_pair: tuple[SimServer, SimServer]) -> None:
    truths = []
    for sim in speed_pair:
        out = httpx.post(sim.url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 200, "ignore_eos": True,
                                                            "seed": 11}, timeout=60).json()
        truths.append(sim.truth(out["id"]))
    slow, fast = truths
    assert [s["tokens"] for s in slow["steps"]] == [s["tokens"] for s in fast["steps"]]
    for a, b in zip(slow["steps"], fast["steps"], strict=True):
        assert a["step_ms"] == pytest.approx(2 * b["step_ms"])
        assert a["intended_t_s"] == pytest.approx(2 * b["intended_t_s"])
    # Real write times follow each server's own schedule: never early, and late only by a wake-up
    # (each step is planned from the last one's planned end, so lateness does not add up). A busy
    # machine's wake-ups are tens of ms, so the check is that the typical step is late by a small
    # share of the schedule, not a ratio of two wall-clock spans; a server whose waits ignored its
    # speed would be late by a growing share of it.
    for truth in truths:
        steps = truth["steps"]
        late = [st["t_s"] - st["intended_t_s"] for st in steps]
        assert min(late) >= -1e-6
        assert statistics.median(late) < 0.25 * steps[-1]["intended_t_s"], (statistics.median(late), steps[-1])


@pytest.mark.parametrize(("kind", "mean"), [("prose", 3.0), ("code", 4.0), ("repetitive", 6.0)])
def test_acceptance_follows_the_prompt_kind(vllm_sim: SimServer, kind: str, mean: float) -> None:
    out = httpx.post(vllm_sim.url + "/v1/completions", json={"prompt": prompt_text(kind, 400, seed=2),
                                                             "max_tokens": 600, "ignore_eos": True}).json()
    truth = vllm_sim.truth(out["id"])
    assert truth["content_kind"] == kind
    tokens = [st["tokens"] for st in truth["steps"][1:-1]]  # the last step may be cut short
    assert statistics.mean(tokens) == pytest.approx(mean, abs=0.5)


def test_in_process_truth_matches_http_truth() -> None:
    with SimServer("healthy", speed=50, in_process=True) as sim:
        out = httpx.post(sim.url + "/v1/completions", json={"prompt": "hello", "max_tokens": 9}).json()
        assert sim.truth(out["id"]) == httpx.get(f"{sim.url}/sim/truth/{out['id']}").json()


def test_seen_records_what_each_request_carried_and_reset_clears_it() -> None:
    for in_process in (True, False):  # SimServer.seen() reads the engine in-process, GET /sim/seen otherwise
        with SimServer("healthy", speed=50, in_process=in_process) as sim:
            httpx.get(sim.url + "/v1/models?api-version=2024-06-01&k=", auth=("ci", "pw"))
            httpx.post(sim.url + "/v1/completions", json={"prompt": "hello", "max_tokens": 2})
            httpx.get(sim.url + "/sim/info")  # the simulator's own routes are not recorded
            assert sim.seen()[-2:] == [
                {"method": "GET", "path": "/v1/models", "query": "api-version=2024-06-01&k=",
                 "authorization": "Basic Y2k6cHc="},  # base64 of ci:pw
                {"method": "POST", "path": "/v1/completions", "query": "", "authorization": ""}]
            sim.reset(truth=True)
            assert sim.seen() == []
