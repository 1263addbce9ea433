"""Fixtures for the simulator's tests: real simulator processes, shared per session."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from pytest_specperf.sim import SimServer, start_all

DIALECTS = ("vllm", "sglang", "llamacpp")
SPEED = 50.0  # healthy's 20 ms step becomes 0.4 ms: shapes and truth stay, tests stay fast


@pytest.fixture(scope="session")
def dialect_sims() -> Iterator[dict[str, SimServer]]:
    """One healthy simulator subprocess per dialect, jitter off so step times are exact."""
    sims = {d: SimServer("healthy", speed=SPEED, overrides={"dialect": d, "jitter": 0.0}) for d in DIALECTS}
    start_all(sims.values())  # the three children boot in parallel
    try:
        yield sims
    finally:
        for sim in sims.values():
            sim.stop()


@pytest.fixture(params=DIALECTS)
def sim(request: pytest.FixtureRequest, dialect_sims: dict[str, SimServer]) -> SimServer:
    """Each test using this runs once per dialect."""
    return dialect_sims[request.param]


@pytest.fixture(scope="session")
def vllm_sim(dialect_sims: dict[str, SimServer]) -> SimServer:
    return dialect_sims["vllm"]


@pytest.fixture
def client(sim: SimServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=60.0) as c:
        yield c
