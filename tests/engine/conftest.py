"""Fixtures for tests against a real llama-server (skipped without the binary unless CI requires it) and a real
vLLM (the ``vllm`` marker: deselected unless ``-m vllm`` asks for them, skipped without ``specperf-build-vllm``
unless $SPECPERF_REQUIRE_VLLM=1)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import EventSource
from prometheus_client.parser import text_string_to_metric_families
from support.engine_threads import THREADS

from pytest_specperf.engines.llamacpp import LlamaServer, default_model, find_binary
from pytest_specperf.engines.process import EngineNotFound
from pytest_specperf.engines.vllm import VllmServer, find_build

REQUIRE_ENV = "SPECPERF_REQUIRE_ENGINE"
#: Its own variable: the default suite requires llama.cpp (SPECPERF_REQUIRE_ENGINE) but not vLLM, whose tests
#: run as a separate CI step (a server start-up alone takes 2-3 minutes on 2 cores).
REQUIRE_VLLM_ENV = "SPECPERF_REQUIRE_VLLM"
VLLM_MARKER = "vllm"

StreamFn = Callable[[httpx.Client, dict[str, Any]], list[dict[str, Any]]]
ScrapeFn = Callable[[httpx.Client], dict[str, float]]


@pytest.fixture(scope="session")
def llama_engine() -> tuple[Path, Path]:
    """(binary, model) of the real engine; skip when absent, fail instead when $SPECPERF_REQUIRE_ENGINE=1."""
    try:
        return find_binary(), default_model()
    except EngineNotFound as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"real engine required ({REQUIRE_ENV}=1) but unavailable: {exc}", pytrace=False)
        pytest.skip(f"real llama-server engine unavailable: {exc}")


@pytest.fixture(scope="session")
def ngram_server(llama_engine: tuple[Path, Path]) -> Iterator[LlamaServer]:
    """One ngram-preset server for the whole session: startup and model load are paid once."""
    binary, model = llama_engine
    with LlamaServer(model, preset="ngram", binary=binary, ctx_size=2048, threads=THREADS) as server:
        yield server


@pytest.fixture(scope="session")
def synth_server(llama_engine: tuple[Path, Path]) -> Iterator[LlamaServer]:
    """One self-draft server with --spec-synth-len 3 (mean accepted length about 3: a known answer), shared
    by the engine's own counters test and the plugin's measurement of them; both read counter deltas."""
    binary, model = llama_engine
    with LlamaServer(model, preset="self-draft", binary=binary, ctx_size=2048, threads=THREADS,
                     extra_args=["--spec-synth-len", "3"]) as server:
        yield server


@pytest.fixture
def engine_client(ngram_server: LlamaServer) -> Iterator[httpx.Client]:
    with ngram_server.client() as client:
        yield client


def _stream(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a streamed /v1/completions; return the JSON events (the [DONE] terminator is checked, not returned)."""
    events: list[dict[str, Any]] = []
    done = False
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as resp:
        resp.raise_for_status()
        for sse in EventSource(resp).iter_sse():
            data = sse.data
            if data == "[DONE]":
                done = True
                continue
            assert not done, "event after [DONE]"
            events.append(json.loads(data))
    assert done, "stream did not end with [DONE]"
    return events


def _scrape(client: httpx.Client) -> dict[str, float]:
    """The llamacpp:* samples of /metrics, by full sample name (labels included)."""
    resp = client.get("/metrics")
    resp.raise_for_status()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            if s.name.startswith("llamacpp:"):
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}" if labels else s.name] = float(s.value)
    return out


@pytest.fixture
def stream_completion() -> StreamFn:
    return _stream


@pytest.fixture
def scrape_metrics() -> ScrapeFn:
    return _scrape


# -- real vLLM ---------------------------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{VLLM_MARKER}: needs a real vLLM (specperf-build-vllm); runs only "
                                       f"with -m {VLLM_MARKER}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the vLLM tests unless a -m expression names them: they take minutes, so not in `pytest tests/`."""
    if VLLM_MARKER in (config.getoption("markexpr", "") or ""):
        return
    keep = [i for i in items if i.get_closest_marker(VLLM_MARKER) is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker(VLLM_MARKER) is not None])
        items[:] = keep


@pytest.fixture(scope="session")
def vllm_build() -> tuple[Path, Path]:
    """(python, model folder) of the vLLM build; skip when absent, fail instead when $SPECPERF_REQUIRE_VLLM=1."""
    try:
        return find_build()
    except EngineNotFound as exc:
        if os.environ.get(REQUIRE_VLLM_ENV) == "1":
            pytest.fail(f"real vLLM required ({REQUIRE_VLLM_ENV}=1) but unavailable: {exc}", pytrace=False)
        pytest.skip(f"real vLLM unavailable: {exc}")


@pytest.fixture(scope="session")
def vllm_ngram(vllm_build: tuple[Path, Path]) -> Iterator[VllmServer]:
    """One ngram-preset vLLM (per-request spec-decode metrics on) for the whole session: start-up is paid once.
    --max-num-seqs 4 so the load tests batch four users on it."""
    with VllmServer(preset="ngram", max_num_seqs=4) as server:
        yield server
