"""Shared fixtures: real simulators over HTTP, and runners measuring them."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

# httpx imports httpcore on first use. Imported here, before any test: when the first use falls in a test
# with the pytester fixture, its sys.modules snapshot drops httpcore afterwards, the next import makes a
# second copy, and httpx no longer recognises (nor translates) that copy's errors.
import httpcore  # noqa: F401
import pytest
from support import forked_pytest, solo

from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer

# Where PYTHONDONTWRITEBYTECODE is set (some CI images set it), every simulator child and pytest subprocess of the
# suite would compile the plugin's sources anew (0.2 CPU s a process, hundreds of times on two cores); the suite
# lets them cache bytecode (__pycache__ is ignored by git and left out of the wheel).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# A suite started in the background of a non-interactive shell inherits SIGINT ignored, and so would every pytest
# and simulator it starts: the interrupt tests would then wait on an exit that never comes. Take the default back
# (a Python handler is reset to the default in each child, where Python installs its own).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Time compression for the simulator: shapes stay, every rate scales by exactly this factor.
SPEED = 8.0


#: Warnings this suite tolerates, each with its reason; every other warning fails the test that raised it.
TOLERATED_WARNINGS = (
    # pytest-benchmark turns itself off under xdist (tox's xdist env) and says so once per run.
    "ignore::pytest_benchmark.logger.PytestBenchmarkWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs with warnings as errors (set here, not in pyproject: the ini there also serves
    ``pytest perf_cases/``, where a perf warning must stay a warning)."""
    config.addinivalue_line("filterwarnings", "error")
    for line in TOLERATED_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    config.addinivalue_line("markers", "solo: no other test of the suite runs meanwhile (support/solo.py)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test marked ``solo`` runs with no other test running on another xdist worker (support/solo.py)."""
    with solo.held(item.config, item.get_closest_marker("solo") is not None):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of this suite gets a 300 s limit from pytest-timeout. It is set here, not as the ini key
    ``timeout``, because pytest-timeout is only a test extra: the ini key would make pytest warn
    "Unknown config option: timeout" in every other run from the repo root (the README's first command)."""
    if config.pluginmanager.hasplugin("timeout"):
        for item in items:
            item.add_marker(pytest.mark.timeout(300), append=True)  # a test's own timeout mark comes first


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester, whose `python -m pytest` runs are forks of a process that imported pytest and the plugin once
    (support/forked_pytest.py: half the CPU of a fresh interpreter; SPECPERF_TEST_FORK=0 gives plain subprocesses)."""
    forked_pytest.install(pytester)
    return pytester


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


@pytest.fixture(scope="session")
def runner_for() -> Iterator[object]:
    """A factory: a runner over a fresh client of a URL (detection included); clients close at the end."""
    clients: list[Client] = []

    def make(url: str, **kw: object) -> Runner:
        client = Client(url, timeout=30)
        clients.append(client)
        client.detect()
        return Runner(client, **kw)  # type: ignore[arg-type]

    yield make
    for client in clients:
        client.close()


@pytest.fixture(scope="session")
def speed() -> float:
    """The simulator time compression used across the suite."""
    return SPEED
