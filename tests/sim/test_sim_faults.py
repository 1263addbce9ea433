"""Each fault happens as asked, by header or by profile, and counters stay scoped."""

from __future__ import annotations

import itertools
import json
import time
import uuid

import httpx
import pytest
from support.sim_helpers import chunk_tokens, stream, stream_body

from pytest_specperf.sim import FAULT_HEADER, FaultError, SimServer, parse_faults

PROMPT = "Tell me a long story about the sea."


def fault(spec: str) -> dict[str, str]:
    return {FAULT_HEADER: spec}


def tokens_seen(dialect: str, events: list[dict]) -> int:
    cum = 0
    for ev in events:
        _, cum = chunk_tokens(dialect, ev, cum)
    return cum


def test_parse_faults() -> None:
    f = parse_faults("stall=2.5@100; disconnect@40, malformed@7, status=429*3, retry_after=4, first_byte=0.5, key=t")
    assert f.stalls == ((100, 2.5),) and f.disconnect_at == 40 and f.malformed_at == 7
    assert (f.status, f.status_count, f.retry_after, f.first_byte_s, f.key) == (429, 3, 4.0, 0.5, "t")
    assert parse_faults("").empty
    assert parse_faults("first_byte=0.5*3").first_byte_count == 3
    assert parse_faults("first_byte=0.5").first_byte_count is None
    assert (parse_faults("first_byte=0.5*2%4").first_byte_count, parse_faults("first_byte=0.5*2%4").first_byte_every) \
        == (2, 4)
    for bad in ("stall=x@3", "status=200", "status=503*0", "explode@3", "first_byte=-1", "first_byte=1*0",
                "disconnect", "first_byte=1*2%2", "first_byte=1%4"):
        with pytest.raises(FaultError):
            parse_faults(bad)


def test_bad_fault_header_is_400(client: httpx.Client) -> None:
    resp = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4}, headers=fault("stall=@"))
    assert resp.status_code == 400 and FAULT_HEADER in resp.text


def test_stall_at_token(sim: SimServer, client: httpx.Client) -> None:
    body = stream_body(sim.dialect, prompt=PROMPT, max_tokens=60)
    s = stream(client, "/v1/completions", body, fault("stall=2.0@30"))
    assert s.done
    truth = sim.truth(s.id)
    [stall] = truth["faults"]
    assert stall["kind"] == "stall" and stall["after_tokens"] >= 30
    # the step after the stall is due a stall later than its own step time
    steps = truth["steps"]
    i = next(k for k, st in enumerate(steps) if sum(x["tokens"] for x in steps[:k + 1]) >= 30)
    gap = steps[i + 1]["intended_t_s"] - steps[i]["intended_t_s"]
    assert gap == pytest.approx(2.0 / sim.speed + steps[i + 1]["step_ms"] / 1000)
    # and the client saw the stream's longest silence, as long as the truth says it was
    gaps = [b - a for a, b in zip(s.times, s.times[1:], strict=False)]
    assert max(gaps) == pytest.approx(steps[i + 1]["t_s"] - steps[i]["t_s"], abs=0.05)
    assert max(gaps) > 5 * sorted(gaps)[len(gaps) // 2]


def test_disconnect_at_token(sim: SimServer, client: httpx.Client) -> None:
    s = stream(client, "/v1/completions", stream_body(sim.dialect, prompt=PROMPT, max_tokens=80),
               fault("disconnect@25"))
    assert s.error and not s.done
    truth = sim.truth(s.id)
    assert truth["finish_reason"] == "fault_disconnect"
    assert 25 <= tokens_seen(sim.dialect, s.events) == truth["completion_tokens"] < 80
    assert client.get("/health").status_code == 200  # the server carries on


def test_disconnect_non_streamed(client: httpx.Client) -> None:
    with pytest.raises(httpx.TransportError):
        client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 50, "ignore_eos": True},
                    headers=fault("disconnect@10"))


def test_one_malformed_line(sim: SimServer, client: httpx.Client) -> None:
    s = stream(client, "/v1/completions", stream_body(sim.dialect, prompt=PROMPT, max_tokens=40),
               fault("malformed@10"))
    assert len(s.malformed) == 1 and s.done
    assert tokens_seen(sim.dialect, s.events) == 40


@pytest.mark.parametrize("code", [503, 429])
def test_status_for_the_first_k_requests_of_a_scope(sim: SimServer, client: httpx.Client, code: int) -> None:
    key = uuid.uuid4().hex
    spec = fault(f"status={code}*2, retry_after=3, key={key}")
    body = {"prompt": PROMPT, "max_tokens": 4}
    first = [client.post("/v1/completions", json=body, headers=spec) for _ in range(2)]
    assert [r.status_code for r in first] == [code, code]
    assert first[0].headers["retry-after"] == "3" and "message" in first[0].text
    # another scope has its own count
    assert client.post("/v1/completions", json=body, headers=fault(f"status={code}*2, key=x{key}")).status_code == code
    assert client.post("/v1/completions", json=body, headers=spec).status_code == 200
    # a reset starts every scope again
    client.post("/sim/reset")
    assert client.post("/v1/completions", json=body, headers=spec).status_code == code


def test_slow_first_byte(sim: SimServer, client: httpx.Client) -> None:
    t0 = time.monotonic()
    with client.stream("POST", "/v1/completions", json={"prompt": PROMPT, "max_tokens": 8, "stream": True},
                       headers=fault("first_byte=4")) as resp:
        headers_after = time.monotonic() - t0
        resp.read()
        rid = next(line for line in resp.text.splitlines() if line.startswith("data: {"))[6:].split('"')[3]
    truth = sim.truth(rid)
    delay = 4 / sim.speed
    assert headers_after >= 0.9 * delay  # nothing at all came back before the delay
    assert truth["faults"][0]["kind"] == "first_byte" and truth["ttft_s"] >= delay


def test_first_byte_with_a_count_holds_only_the_first_answered_requests() -> None:
    # status refusals come first and are not held; then the first 2 answered wait, the rest do not
    with SimServer("healthy", speed=50, in_process=True,
                   overrides={"faults": "status=503*1, first_byte=5*2"}) as sim:
        body = {"prompt": PROMPT, "max_tokens": 4, "ignore_eos": True}
        with httpx.Client(base_url=sim.url) as c:
            assert c.post("/v1/completions", json=body).status_code == 503
            ids = [c.post("/v1/completions", json=body).json()["id"] for _ in range(4)]
            held = [any(f["kind"] == "first_byte" for f in sim.truth(i)["faults"]) for i in ids]
            ttft = [sim.truth(i)["ttft_s"] for i in ids]
            assert held == [True, True, False, False]
            assert min(ttft[:2]) >= 5 / 50 > max(ttft[2:])
            sim.reset()  # a reset starts the count again
            again = c.post("/v1/completions", json=body)
            assert again.status_code == 503


def test_first_byte_on_a_cycle_holds_the_first_of_every_n() -> None:
    with SimServer("healthy", speed=50, in_process=True, overrides={"faults": "first_byte=5*1%3"}) as sim:
        body = {"prompt": PROMPT, "max_tokens": 4, "ignore_eos": True}
        with httpx.Client(base_url=sim.url) as c:
            ids = [c.post("/v1/completions", json=body).json()["id"] for _ in range(7)]
            held = [any(f["kind"] == "first_byte" for f in sim.truth(i)["faults"]) for i in ids]
    assert held == [True, False, False, True, False, False, True]


def test_profile_faults_apply_to_every_request() -> None:
    with SimServer("healthy", speed=50, in_process=True, overrides={"faults": "status=503*1, malformed@3"}) as sim:
        body = {"prompt": PROMPT, "max_tokens": 10, "ignore_eos": True}
        with httpx.Client(base_url=sim.url) as c:
            assert c.post("/v1/completions", json=body).status_code == 503
            s = stream(c, "/v1/completions", body)
            assert s.status == 200 and len(s.malformed) == 1
            sim.reset()
            assert c.post("/v1/completions", json=body).status_code == 503


def test_client_going_away_mid_stream_is_recorded_and_harmless(sim: SimServer, client: httpx.Client) -> None:
    body = {"prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True, "stream": True}
    with client.stream("POST", "/v1/completions", json=body, headers=fault("stall=10@20")) as resp:
        first = next(line for line in resp.iter_lines() if line.startswith("data: {"))
    rid = first[6:].split('"')[3]
    # the server notices at its next write, after the stall; wait for that by polling the truth
    deadline = time.monotonic() + 30
    truth = sim.truth(rid)
    while not truth["done"] and time.monotonic() < deadline:
        time.sleep(0.02)
        truth = sim.truth(rid)
    assert truth["done"] and truth["finish_reason"] == "client_disconnected"
    assert truth["completion_tokens"] < 2000
    assert client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 3}).status_code == 200


def test_parse_hold() -> None:
    f = parse_faults("hold=12@40")
    assert (f.hold_events, f.hold_at) == (12, 40) and not f.empty
    for bad in ("hold=1@40", "hold=x@40", "hold=12", "hold=@3"):
        with pytest.raises(FaultError, match="hold"):
            parse_faults(bad)


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp"])
def test_hold_is_a_buffering_proxy(dialect: str) -> None:
    # 4 ms steps: twelve of them held are far above a busy machine's wake-up noise
    with SimServer("healthy", speed=5, overrides={"dialect": dialect, "jitter": 0.0}) as sim, \
            httpx.Client(base_url=sim.url, timeout=60) as client:
        body = stream_body(sim.dialect, prompt=PROMPT, max_tokens=120)
        s = stream(client, "/v1/completions", body, fault("hold=12@30"))
        truth = sim.truth(s.id)
    assert s.done and tokens_seen(sim.dialect, s.events) == 120
    [hold] = truth["faults"]
    assert hold["kind"] == "hold" and hold["events"] == 12
    steps = truth["steps"]
    i = next(k for k, st in enumerate(steps) if sum(x["tokens"] for x in steps[:k]) >= 30)
    held = steps[i:i + 12]
    # the engine stepped on undisturbed; the proxy wrote the twelve steps' events at once when it let go
    step = steps[-1]["step_ms"] / 1000  # a decode step
    writes = [st["t_s"] for st in held]
    assert max(writes) - min(writes) < step / 4 and writes[0] == pytest.approx(hold["t_s"])
    assert hold["held_s"] > 10 * step
    assert steps[i + 12]["t_s"] > max(writes) and steps[i - 1]["t_s"] < min(writes)
    # and the client got them together: its longest silence ended with the burst, the burst took no step time
    gaps = [b - a for a, b in zip(s.times, s.times[1:], strict=False)]
    assert max(gaps) >= hold["held_s"] - 2 * step
    assert sum(g < step / 4 for g in gaps) >= 11


def test_a_late_wake_up_delays_what_follows_instead_of_bursting() -> None:
    # The server's own loop is blocked for 50 steps (a late wake-up); an engine then goes on a step at a time
    # from where it is (absolute deadlines sent the 50 held steps at once).
    with SimServer("healthy", speed=10, in_process=True, overrides={"jitter": 0.0}) as sim, \
            httpx.Client(base_url=sim.url, timeout=60) as c:
        body = stream_body(sim.dialect, prompt=PROMPT, max_tokens=400)
        times: list[float] = []
        with c.stream("POST", "/v1/completions", json={**body, "stream": True}) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    times.append(time.monotonic())
                    rid = json.loads(line[6:])["id"]
                    if len(times) == 20:
                        assert sim._loop is not None
                        sim._loop.call_soon_threadsafe(time.sleep, 50 * sim.profile.step_ms / 1000 / sim.speed)
        truth = sim.truth(rid)
    steps = truth["steps"]
    step = steps[-1]["step_ms"] / 1000
    # Writes within a quarter step of the last one, in a row: the schedule catches up at most CATCH_UP_S (20 steps
    # here) of a busy machine's jitter; the 50 held steps were one run of 50
    run, longest = 0, 0
    for a, b in itertools.pairwise(steps):
        run = run + 1 if b["t_s"] - a["t_s"] < step / 4 else 0
        longest = max(longest, run)
    assert longest < 30, longest
    assert any(s["due_t_s"] - s["intended_t_s"] > 20 * step for s in steps), "the blocked wake-up was caught up"
