"""A real llama-server with SmolLM2-135M on CPU: HTTP shapes, exact lengths, speculative-decoding counters."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.engines.process import EngineStartError

StreamFn = Callable[[httpx.Client, dict[str, Any]], list[dict[str, Any]]]  # conftest's stream_completion
ScrapeFn = Callable[[httpx.Client], dict[str, float]]  # conftest's scrape_metrics

# A period-8 token pattern: ngram-mod (24-token match) finds drafts in its own prompt.
REPETITIVE = "apple, banana, cherry, date, " * 8
SHORT = "Say hi."
SPEC = "llamacpp:spec_decode_"


def _final(events: list[dict]) -> dict:
    assert events and "usage" in events[-1], "the last /v1/completions event carries usage"
    return events[-1]


def test_health_models_props(ngram_server: LlamaServer, engine_client: httpx.Client) -> None:
    resp = engine_client.get("/health")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}
    models = engine_client.get("/v1/models").json()["data"]
    assert len(models) == 1 and models[0]["owned_by"] == "llamacpp"
    props = engine_client.get("/props").json()
    assert props["total_slots"] == 1 and props["endpoint_metrics"] is True
    assert ngram_server.model_path.name in props["model_path"]


@pytest.mark.parametrize("max_tokens", [1, 24])
def test_ignore_eos_stream_gives_exact_length(
    max_tokens: int, engine_client: httpx.Client, stream_completion: StreamFn
) -> None:
    events = stream_completion(engine_client, {
        "prompt": SHORT, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
        "timings_per_token": True, "stream_options": {"include_usage": True},
    })
    final = _final(events)
    assert final["usage"]["completion_tokens"] == max_tokens
    assert final["choices"][0]["finish_reason"] == "length"
    counts = [e["timings"]["predicted_n"] for e in events]  # cumulative on every event with timings_per_token
    diffs = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert all(d >= 0 for d in diffs) and sum(diffs) == max_tokens
    assert counts[-1] == max_tokens
    tokens = engine_client.post("/tokenize", json={"content": SHORT}).json()["tokens"]
    assert final["usage"]["prompt_tokens"] == len(tokens)


def test_ignore_eos_non_stream(engine_client: httpx.Client) -> None:
    body = {"prompt": SHORT, "max_tokens": 16, "ignore_eos": True, "temperature": 0}
    out = engine_client.post("/v1/completions", json=body).json()
    assert out["usage"]["completion_tokens"] == 16 and out["timings"]["predicted_n"] == 16
    assert out["choices"][0]["finish_reason"] == "length"


def test_ngram_timings_match_spec_counters(
    engine_client: httpx.Client, stream_completion: StreamFn, scrape_metrics: ScrapeFn
) -> None:
    before = scrape_metrics(engine_client)
    events = stream_completion(engine_client, {
        "prompt": REPETITIVE, "max_tokens": 48, "ignore_eos": True, "temperature": 0, "cache_prompt": False,
        "timings_per_token": True,
    })
    after = scrape_metrics(engine_client)
    timings = _final(events)["timings"]
    assert timings["predicted_n"] == 48
    draft_n, accepted = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
    assert draft_n > 0 and 0 < accepted <= draft_n

    def delta(name: str) -> float:
        return after[SPEC + name] - before.get(SPEC + name, 0.0)

    assert delta("num_draft_tokens_total") == draft_n
    assert delta("num_accepted_tokens_total") == accepted
    assert 0 < delta("num_drafts_total") <= draft_n
    assert engine_client.get("/slots").json()[0]["speculative"] is True


def test_cache_prompt_false_is_honoured(engine_client: httpx.Client) -> None:
    def run(cache: bool) -> dict:
        body = {"prompt": REPETITIVE, "max_tokens": 2, "temperature": 0, "cache_prompt": cache}
        return engine_client.post("/v1/completions", json=body).json()

    first, second = run(False), run(False)
    for out in (first, second):
        assert out["timings"]["cache_n"] == 0 and out["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert out["timings"]["prompt_n"] == out["usage"]["prompt_tokens"]
    run(True)
    cached = run(True)  # the control: with caching on, the repeat reuses all but the last prompt token
    assert cached["timings"]["cache_n"] == cached["usage"]["prompt_tokens"] - 1


def test_stop_mid_stream_leaves_no_process(llama_engine: tuple[Path, Path]) -> None:
    binary, model = llama_engine
    # Short grace: SIGTERM with a stream still connected can take up to --sse-ping-interval (30 s) to act.
    srv = LlamaServer(model, preset="none", binary=binary, ctx_size=512, stop_grace=2.0)
    with srv, srv.client() as client:
        pid = srv.pid
        proc = srv.process
        assert pid is not None and proc is not None
        body = {"prompt": SHORT, "max_tokens": 400, "ignore_eos": True, "stream": True}
        with contextlib.suppress(httpx.HTTPError), client.stream("POST", "/v1/completions", json=body) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    srv.stop()  # while the request is still generating
                    break
    assert proc.returncode is not None and not srv.running()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_bad_engine_flag_reports_log(llama_engine: tuple[Path, Path]) -> None:
    binary, model = llama_engine
    srv = LlamaServer(model, preset="none", binary=binary, extra_args=["--spec-type", "bogus"])
    with pytest.raises(EngineStartError, match="unknown speculative type"):
        srv.start()
    assert not srv.running()


def test_self_draft_synthetic_acceptance_length(
    synth_server: LlamaServer, stream_completion: StreamFn, scrape_metrics: ScrapeFn
) -> None:
    """--spec-synth-len 3 pulls the mean accepted length from ~7 (same model drafts itself) to about 3."""
    with synth_server.client() as client:
        before = scrape_metrics(client)
        events = stream_completion(client, {
            "prompt": SHORT, "max_tokens": 32, "ignore_eos": True, "temperature": 0, "seed": 7,
        })
        after = scrape_metrics(client)
    assert synth_server.log_path is not None
    log = synth_server.log_path.read_text(errors="replace")  # the whole log: the server is shared
    timings = _final(events)["timings"]
    steps = after[SPEC + "num_drafts_total"] - before.get(SPEC + "num_drafts_total", 0.0)
    assert steps > 0 and timings["draft_n"] > 0
    mean_len = 1 + timings["draft_n_accepted"] / steps
    assert 1.5 <= mean_len <= 4.5, mean_len
    assert "synthetic acceptance: n_max = 6, mean length = 3.0" in log


def test_taken_port_reports_bind_error(llama_engine: tuple[Path, Path]) -> None:
    binary, model = llama_engine
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        srv = LlamaServer(model, preset="none", binary=binary, port=sock.getsockname()[1])
        with pytest.raises(EngineStartError, match="couldn't bind"):
            srv.start()  # an explicit port is not retried
    assert not srv.running()
