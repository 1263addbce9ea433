"""No cyclic garbage collection while a stream is read: a full collection pauses the process for long
enough (tens of ms with numpy and scipy loaded) to stamp every event arriving meanwhile late."""

from __future__ import annotations

import gc
import ssl
from typing import Any

import pytest

from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamRequest, run_streams


def test_collector_is_paused_during_a_stream_and_restored_after(healthy_sim: Any,
                                                                request: pytest.FixtureRequest) -> None:
    client = Client(healthy_sim.url, timeout=30)
    request.addfinalizer(client.close)
    seen: list[bool] = []
    assert gc.isenabled()
    trace = client.stream("Tell a story.", 800, on_progress=lambda n, s: seen.append(gc.isenabled()))
    assert trace.completion_tokens == 800
    assert seen and not any(seen)  # progress is reported from inside the read loop
    assert gc.isenabled()
    gc.disable()  # a caller that had it off keeps it off
    try:
        client.stream("Tell a story.", 20)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collector_is_restored_after_concurrent_streams(healthy_sim: Any, request: pytest.FixtureRequest) -> None:
    client = Client(healthy_sim.url, timeout=30)
    request.addfinalizer(client.close)
    outs = run_streams(client, [StreamRequest("Tell a story.", 40, seed=i) for i in range(4)])
    assert all(o.trace is not None for o in outs)
    assert gc.isenabled()


def test_concurrent_calls_build_no_tls_context_after_the_first(healthy_sim: Any, request: pytest.FixtureRequest,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Building a TLS context reads the CA bundle (~20 ms CPU); httpx builds one per client unless given one, and
    # a load sweep or a capacity search makes two clients per call, so they share one.
    client = Client(healthy_sim.url, timeout=30)
    request.addfinalizer(client.close)
    reqs = [StreamRequest(prompt="Tell a story.", max_tokens=4, seed=i) for i in range(2)]
    run_streams(client, reqs)
    built: list[object] = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: built.append(a) or real(*a, **k))
    for _ in range(3):
        assert all(o.trace is not None for o in run_streams(client, reqs))
    assert built == []
