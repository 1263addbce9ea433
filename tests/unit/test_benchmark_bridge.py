"""The pytest-benchmark bridge uses two private names: this fails loudly the day they change."""

from __future__ import annotations

import inspect
from importlib.metadata import version

from packaging.specifiers import SpecifierSet
from pytest_benchmark.fixture import BenchmarkFixture

from pytest_specperf.report import pytest_benchmark as benchmark_bridge


def test_installed_pytest_benchmark_is_in_the_supported_range() -> None:
    installed = version("pytest-benchmark")
    assert installed in SpecifierSet(benchmark_bridge.SUPPORTED), (
        f"pytest-benchmark {installed} is outside {benchmark_bridge.SUPPORTED}: check the private names the bridge "
        "uses still work, then widen SUPPORTED")


def test_private_names_the_bridge_uses_still_exist() -> None:
    make = getattr(BenchmarkFixture, benchmark_bridge.PRIVATE_METHOD, None)
    assert callable(make), f"BenchmarkFixture.{benchmark_bridge.PRIVATE_METHOD} is gone: the bridge cannot feed stats"
    assert list(inspect.signature(make).parameters)[1:2] == ["iterations"], inspect.signature(make)
    # _mode is set in __init__ and read when the test ends (an unused fixture warns)
    assert f"self.{benchmark_bridge.PRIVATE_MODE}" in inspect.getsource(BenchmarkFixture)
