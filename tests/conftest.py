"""Shared fixtures: real simulators over HTTP, and runners measuring them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_specperf.client import Client
from pytest_specperf.runner import Runner
from pytest_specperf.sim import SimServer

# Time compression for the simulator: shapes stay, every rate scales by exactly this factor.
SPEED = 8.0


@pytest.fixture(scope="session")
def healthy_sim() -> Iterator[SimServer]:
    """The default profile, compressed in time."""
    with SimServer("healthy", speed=SPEED) as sim:
        yield sim


@pytest.fixture(scope="session")
def seed_sim() -> Iterator[SimServer]:
    """The story's profile: healthy bursts, collapsing sustained reasoning."""
    with SimServer("seed", speed=SPEED) as sim:
        yield sim


def _runner_for(url: str, **kw: object) -> Runner:
    client = Client(url, timeout=30)
    client.detect()
    return Runner(client, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def runner_for() -> object:
    """A factory: a runner over a fresh client of a URL (detection included)."""
    return _runner_for


@pytest.fixture(scope="session")
def speed() -> float:
    """The simulator time compression used across the suite."""
    return SPEED
