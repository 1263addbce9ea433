"""Routes and their shapes per dialect, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.sim_helpers import chunk_tokens, stream, stream_body

from pytest_specperf.sim import SimServer, detokenize
from pytest_specperf.sim.textgen import prompt_text

PROMPT = prompt_text("prose", 120)
REASONING_KEY = {"vllm": "reasoning", "sglang": "reasoning_content", "llamacpp": "reasoning_content"}


def test_models_tell_the_dialect(sim: SimServer, client: httpx.Client) -> None:
    data = client.get("/v1/models").json()["data"]
    assert [(m["id"], m["owned_by"], m["object"]) for m in data] == [(sim.model, sim.dialect, "model")]


def test_health(sim: SimServer, client: httpx.Client) -> None:
    resp = client.get("/health")
    assert resp.status_code == 200
    if sim.dialect == "llamacpp":
        assert resp.json() == {"status": "ok"}
        assert client.get("/v1/health").status_code == 200
    else:
        assert resp.content == b""


def test_completion_non_streamed(sim: SimServer, client: httpx.Client) -> None:
    body = {"model": sim.model, "prompt": PROMPT, "max_tokens": 40, "ignore_eos": True, "return_token_ids": True}
    out = client.post("/v1/completions", json=body).json()
    assert out["object"] == "text_completion" and out["id"].startswith("cmpl-")
    choice = out["choices"][0]
    assert choice["finish_reason"] == "length" and choice["text"]
    assert out["usage"] == {**out["usage"], "prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160}
    assert detokenize(choice["token_ids"]) == choice["text"] and len(choice["token_ids"]) == 40
    truth = sim.truth(out["id"])
    assert truth["completion_tokens"] == 40 and truth["done"] and truth["route"] == "completions"
    if sim.dialect == "llamacpp":
        t = out["timings"]
        # earlier tests sent this prompt too: llama.cpp evaluates what its cache did not hold (cache_n)
        assert (t["prompt_n"] + t["cache_n"], t["predicted_n"]) == (120, 40) and t["cache_n"] == truth["cached_tokens"]
        assert t["draft_n_accepted"] == sum(s["accepted"] for s in truth["steps"])
        assert t["draft_n"] == sum(s["drafted"] for s in truth["steps"])


@pytest.mark.parametrize("route", ["/v1/completions", "/v1/chat/completions"])
def test_stream_chunk_counts_sum_to_usage_and_truth(sim: SimServer, client: httpx.Client, route: str) -> None:
    body = stream_body(sim.dialect, model=sim.model, max_tokens=57)
    if route.endswith("completions") and "chat" not in route:
        body["prompt"] = PROMPT
    else:
        body["messages"] = [{"role": "user", "content": PROMPT}]
        body.setdefault("stream_options", {})["include_usage"] = True
    s = stream(client, route, body)
    assert s.status == 200 and s.done and not s.malformed and not s.error
    assert s.headers["content-type"].startswith("text/event-stream")
    cum, per_event = 0, []
    for ev in s.events:
        n, cum = chunk_tokens(sim.dialect, ev, cum)
        per_event.append(n)
    truth = sim.truth(s.id)
    assert sum(per_event) == s.usage()["completion_tokens"] == truth["completion_tokens"] == 57
    token_events = [n for n in per_event if n]
    if sim.dialect == "llamacpp":
        assert set(token_events) == {1}  # one event per token, bursts per step
    else:
        assert token_events == [st["tokens"] for st in truth["steps"]]  # one chunk per step
        assert max(token_events) > 1  # speculative steps carry several tokens
    if "chat" in route:
        first = s.events[0]["choices"][0]["delta"]
        assert first.get("role") == "assistant" and not first.get("content")
    finals = [ev for ev in s.events if ev.get("choices") and ev["choices"][0].get("finish_reason")]
    assert [ev["choices"][0]["finish_reason"] for ev in finals] == ["length"]


def test_vllm_return_token_ids_per_chunk(vllm_sim: SimServer) -> None:
    with httpx.Client(base_url=vllm_sim.url) as c:
        s = stream(c, "/v1/completions", {"prompt": PROMPT, "max_tokens": 30, "ignore_eos": True,
                                          "return_token_ids": True})
    ids = [t for ev in s.events for t in ev["choices"][0]["token_ids"]]
    assert len(ids) == 30 and detokenize(ids) == "".join(ev["choices"][0]["text"] for ev in s.events)
    assert s.usage() is None  # no include_usage: no usage chunk


def test_llamacpp_completion_stream_always_ends_with_usage(dialect_sims: dict[str, SimServer]) -> None:
    with httpx.Client(base_url=dialect_sims["llamacpp"].url) as c:
        s = stream(c, "/v1/completions", {"prompt": PROMPT, "n_predict": 12, "ignore_eos": True})
    last = s.events[-1]
    assert last["usage"]["completion_tokens"] == 12 and last["timings"]["predicted_n"] == 12
    assert "timings" not in s.events[0]  # per-token timings only when asked


@pytest.fixture(scope="module")
def reasoning_sims() -> Iterator[dict[str, SimServer]]:
    sims = {d: SimServer("healthy", speed=50, in_process=True, overrides={"dialect": d, "reasoning_tokens": 10})
            for d in ("vllm", "llamacpp")}
    for s in sims.values():
        s.start()
    yield sims
    for s in sims.values():
        s.stop()


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp"])
def test_chat_reasoning_goes_to_the_dialects_field(reasoning_sims: dict[str, SimServer], dialect: str) -> None:
    sim = reasoning_sims[dialect]
    body = {"messages": [{"role": "user", "content": "Why?"}], "max_tokens": 25, "ignore_eos": True}
    with httpx.Client(base_url=sim.url) as c:
        msg = c.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
        s = stream(c, "/v1/chat/completions", body)
    key = REASONING_KEY[dialect]
    assert msg[key] and msg["content"]
    streamed_reasoning = "".join(ev["choices"][0]["delta"].get(key) or "" for ev in s.events if ev["choices"])
    streamed_content = "".join(ev["choices"][0]["delta"].get("content") or "" for ev in s.events if ev["choices"])
    assert streamed_reasoning and streamed_content
    assert len(streamed_reasoning) < len(streamed_reasoning + streamed_content)


@pytest.mark.parametrize("route", ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"])
def test_bad_json_is_400_with_a_message(sim: SimServer, client: httpx.Client, route: str) -> None:
    resp = client.post(route, content=b"{not json", headers={"Content-Type": "application/json"})
    assert resp.status_code == 400
    assert "Invalid JSON" in resp.text


@pytest.mark.parametrize(("body", "needle"), [
    ({"prompt": PROMPT, "max_tokens": 0}, "max_tokens"),
    ({"prompt": PROMPT, "max_tokens": "many"}, "max_tokens"),
    ({"prompt": PROMPT, "stream": "yes"}, "stream"),
    ({"prompt": 5}, "prompt"),
    ({"max_tokens": 3}, "prompt"),
    ({"prompt": PROMPT, "temperature": -1}, "temperature"),
    ({"prompt": PROMPT, "n": 2}, "n=1"),
    ([1, 2], "JSON object"),
])
def test_bad_fields_are_400(client: httpx.Client, body: object, needle: str) -> None:
    resp = client.post("/v1/completions", json=body)
    assert resp.status_code == 400 and needle in resp.text


def test_context_overflow(sim: SimServer, client: httpx.Client) -> None:
    """prompt + max_tokens beyond the context: SGLang and llama.cpp refuse; vLLM (0.32, checked against the real
    one in tests/engine/test_vllm_fidelity.py) generates what fits; a prompt beyond it is a 400 everywhere."""
    limit = 200
    with SimServer("healthy", speed=50, overrides={"dialect": sim.dialect, "max_model_len": limit}) as small:
        resp = httpx.post(small.url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 300, "ignore_eos": True})
        if sim.dialect == "vllm":
            assert resp.status_code == 200, resp.text
            assert resp.json()["usage"]["total_tokens"] == limit
        else:
            assert resp.status_code == 400 and "maximum context length" in resp.text
        resp = httpx.post(small.url + "/v1/completions", json={"prompt": PROMPT * 3, "max_tokens": 4})
        assert resp.status_code == 400 and "maximum context length" in resp.text


def test_bad_chat_messages_are_400(client: httpx.Client) -> None:
    for messages in (None, [], [{"role": "wizard", "content": "x"}], [{"role": "user", "content": 3}]):
        assert client.post("/v1/chat/completions", json={"messages": messages}).status_code == 400


def test_min_tokens_above_max_tokens_is_400(vllm_sim: SimServer) -> None:
    resp = httpx.post(vllm_sim.url + "/v1/completions", json={"prompt": "x", "max_tokens": 4, "min_tokens": 9})
    assert resp.status_code == 400 and "min_tokens" in resp.text


def test_unknown_model(sim: SimServer, client: httpx.Client) -> None:
    resp = client.post("/v1/completions", json={"model": "gpt-nope", "prompt": "x", "max_tokens": 2})
    if sim.dialect == "llamacpp":
        assert resp.status_code == 200  # llama-server ignores the model name
    else:
        assert resp.status_code == 404 and "gpt-nope" in resp.text


def test_vllm_stream_options_need_stream(vllm_sim: SimServer) -> None:
    body = {"prompt": "x", "max_tokens": 2, "stream_options": {"include_usage": True}}
    assert httpx.post(vllm_sim.url + "/v1/completions", json=body).status_code == 400


def test_sglang_rejects_chat_stream_token_ids(dialect_sims: dict[str, SimServer]) -> None:
    body = {"messages": [{"role": "user", "content": "x"}], "stream": True, "return_token_ids": True}
    assert httpx.post(dialect_sims["sglang"].url + "/v1/chat/completions", json=body).status_code == 400


def test_seed_makes_output_deterministic(sim: SimServer, client: httpx.Client) -> None:
    def run(seed: int) -> tuple[str, list[int]]:
        out = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 30, "seed": seed,
                                                   "ignore_eos": True}).json()
        return out["choices"][0]["text"], [st["tokens"] for st in sim.truth(out["id"])["steps"]]

    assert run(7) == run(7)
    assert run(7) != run(8)


@pytest.fixture(scope="module")
def eos_sims() -> Iterator[dict[str, SimServer]]:
    sims = {d: SimServer("healthy", speed=50, in_process=True, overrides={"dialect": d, "eos_after_tokens": 10})
            for d in ("vllm", "llamacpp")}
    for s in sims.values():
        s.start()
    yield sims
    for s in sims.values():
        s.stop()


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp"])
def test_natural_eos_ignore_eos_and_min_tokens(eos_sims: dict[str, SimServer], dialect: str) -> None:
    url = eos_sims[dialect].url

    def finish(**extra: object) -> tuple[int, str]:
        out = httpx.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 30, **extra}).json()
        return out["usage"]["completion_tokens"], out["choices"][0]["finish_reason"]

    assert finish() == (10, "stop")
    assert finish(ignore_eos=True) == (30, "length")
    # vLLM honours min_tokens; llama-server has no such field and ignores it
    assert finish(min_tokens=20) == ((20, "stop") if dialect == "vllm" else (10, "stop"))


def test_dialect_specific_routes(dialect_sims: dict[str, SimServer]) -> None:
    get = lambda d, path: httpx.get(dialect_sims[d].url + path)  # noqa: E731
    assert get("llamacpp", "/props").json()["model_alias"] == dialect_sims["llamacpp"].model
    assert get("sglang", "/model_info").json()["served_model_name"] == dialect_sims["sglang"].model
    assert "internal_states" in get("sglang", "/server_info").json()
    assert httpx.post(dialect_sims["sglang"].url + "/v1/tokenize", json={"prompt": "a b"}).json()["count"] == 3
    assert get("vllm", "/props").status_code == 404
    assert get("vllm", "/sim/info").json()["dialect"] == "vllm"
