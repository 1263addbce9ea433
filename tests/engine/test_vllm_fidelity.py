"""The simulator's ``vllm`` dialect against a real vLLM: the same requests, the same shapes back.

A shape is the JSON with every value replaced by its type (str, number, bool, null; lists by their first
item), so text, ids and timings may differ but a missing, extra or moved key may not. A stream's shape is the
sequence of its chunks' shapes with repeats collapsed (the real one sends more or fewer middle chunks). The
requests are the ones the plugin itself sends (``Client.body``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from httpx_sse import EventSource
from prometheus_client.parser import text_string_to_metric_families

from pytest_specperf.endpoint.client import Client
from pytest_specperf.engines.vllm import NUM_SPECULATIVE_TOKENS, STARTUP_TIMEOUT_S, VllmServer
from pytest_specperf.run.acceptance import SERIES
from pytest_specperf.sim import SimServer

# The suite's 300 s per test would count the shared server's start-up against the first test that uses it.
VLLM_TIMEOUT_S = STARTUP_TIMEOUT_S + 300
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(VLLM_TIMEOUT_S)]

REPETITIVE = ("1 2 3 4 5 " * 8).strip()  # ngram drafts on it in both completions and chat
TOKENS = 24
TOO_LONG = "word " * 2100  # more than 2048 tokens for both tokenizers


@pytest.fixture(scope="module")
def twin(vllm_ngram: VllmServer) -> Iterator[SimServer]:
    """The simulator configured as the real server was started: vllm, its context, 4 drafts, per-request metrics."""
    overrides = {"dialect": "vllm", "max_model_len": vllm_ngram.max_model_len, "jitter": 0.0,
                 "max_accept": NUM_SPECULATIVE_TOKENS + 1, "spec_metrics": True,
                 "accept_len": {"prose": 1.6, "code": 2.0, "reasoning": 1.5, "repetitive": 4.5}}
    with SimServer("healthy", speed=20, overrides=overrides) as sim:
        yield sim


@pytest.fixture(scope="module")
def pair(vllm_ngram: VllmServer, twin: SimServer) -> Iterator[dict[str, Client]]:
    """A detected plugin client on each: the real one and the simulator."""
    with Client(vllm_ngram.url, timeout=300) as real, Client(twin.url, timeout=60) as sim:
        real.detect()
        sim.detect()
        yield {"real": real, "sim": sim}


def shape(v: Any) -> Any:
    """The value's structure: dict keys kept, scalars replaced by their JSON type, lists by their first item."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    if v is None:
        return None
    if isinstance(v, bool):
        return "bool"
    return "number" if isinstance(v, int | float) else "str"


def _key(v: Any) -> str:
    return json.dumps(shape(v), sort_keys=True)


def stream_shape(c: Client, api: str) -> list[str]:
    """The collapsed chunk shapes of one streamed request as the plugin sends it; [DONE] must end it."""
    path, body = c.body(REPETITIVE, TOKENS, api, True, 0, 0.0)
    out: list[str] = []
    done = False
    with c.http.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200
        for sse in EventSource(resp).iter_sse():
            if sse.data == "[DONE]":
                done = True
                continue
            k = _key(json.loads(sse.data))
            if not out or out[-1] != k:
                out.append(k)
    assert done
    return out


def _both(pair: dict[str, Client], fn: Any) -> tuple[Any, Any]:
    return fn(pair["real"]), fn(pair["sim"])


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_streamed_chunks(pair: dict[str, Client], api: str) -> None:
    """Chunk keys, usage on every chunk (continuous stats), the final chunk: no choices, usage, fingerprint and
    metrics.speculative_decoding."""
    real, sim = _both(pair, lambda c: stream_shape(c, api))
    assert sim == real


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_non_streamed_bodies(pair: dict[str, Client], api: str) -> None:
    real, sim = _both(pair, lambda c: _key(c.complete(REPETITIVE, TOKENS, api=api).body))
    assert json.loads(sim) == json.loads(real)


def _get(c: Client, path: str) -> httpx.Response:
    return c.http.get(path)


@pytest.mark.parametrize("path", ["/v1/models", "/version"])
def test_get_routes(pair: dict[str, Client], path: str) -> None:
    real, sim = _both(pair, lambda c: _get(c, path))
    assert (sim.status_code, _key(sim.json())) == (real.status_code, _key(real.json()))


def test_health(pair: dict[str, Client]) -> None:
    real, sim = _both(pair, lambda c: _get(c, "/health"))
    assert (sim.status_code, sim.content) == (real.status_code, real.content) == (200, b"")


@pytest.mark.parametrize("body", [{"prompt": REPETITIVE}, {"messages": [{"role": "user", "content": "hi"}]}],
                         ids=["prompt", "messages"])
def test_tokenize(pair: dict[str, Client], body: dict[str, Any]) -> None:
    def tok(c: Client) -> tuple[int, str]:
        r = c.http.post("/tokenize", json={"model": c.model, **body})
        return r.status_code, _key(r.json())

    real, sim = _both(pair, tok)
    assert sim == real


def _families(text: str) -> dict[str, tuple[str, frozenset[frozenset[str]]]]:
    """vllm:* families: name -> (type, the label-name sets of their samples)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith("vllm:"):
            out[fam.name] = (fam.type, frozenset(frozenset(s.labels) for s in fam.samples))
    return out


def test_metrics_names_types_and_labels(pair: dict[str, Client]) -> None:
    """Every vllm:* family the simulator writes exists on the real server with the same type and labels."""
    real, sim = _both(pair, lambda c: _families(c.metrics_text() or ""))
    for name in SERIES["vllm"].values():  # what the plugin reads
        assert name.removesuffix("_total") in real, name
    assert set(sim) <= set(real), sorted(set(sim) - set(real))
    assert {n: sim[n] for n in sim} == {n: real[n] for n in sim}


def _error(c: Client, body: dict[str, Any]) -> tuple[int, str, str]:
    r = c.http.post("/v1/completions", json={"model": c.model, "max_tokens": 4, **body})
    err = r.json()
    message = re.sub(r"\d+", "N", err["error"]["message"]) if "error" in err else ""
    return r.status_code, _key(err), message


def test_too_long_prompt_error(pair: dict[str, Client]) -> None:
    real, sim = _both(pair, lambda c: _error(c, {"prompt": TOO_LONG}))
    assert real[0] == 400 and sim == real


def test_unknown_model_error(pair: dict[str, Client]) -> None:
    def err(c: Client) -> tuple[int, str, str]:
        status, key, message = _error(c, {"prompt": "x", "model": "no-such-model"})
        return status, key, message.split(" Valid aliases:")[0]

    real, sim = _both(pair, err)
    assert real[0] == 404 and sim == real


def test_max_tokens_beyond_the_context_is_shortened(pair: dict[str, Client]) -> None:
    """prompt + max_tokens > max_model_len: vLLM 0.32 generates what fits instead of refusing."""
    def room_used(c: Client) -> tuple[int, int]:
        prompt = "word " * 2000  # under 2048 tokens with both tokenizers, and near the limit
        r = c.http.post("/v1/completions", json={"model": c.model, "prompt": prompt, "max_tokens": 200,
                                                 "ignore_eos": True, "temperature": 0})
        assert r.status_code == 200, r.text
        u = r.json()["usage"]
        return u["prompt_tokens"] + u["completion_tokens"], r.status_code

    real, sim = _both(pair, room_used)
    assert real == sim == (2048, 200)
