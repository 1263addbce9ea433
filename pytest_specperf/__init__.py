"""pytest-specperf: gate deploys of speculative-decoding LLM inference services on sustained performance.

The public API: what perf cases, a project's ``conftest.py`` and scripts that drive the core without pytest use.
Every other module is internal and may move. Names load on first use, so ``import pytest_specperf`` (which
pytest does for every run of a project with the plugin installed) costs nothing; the version too is read on
first use (its metadata read costs about 0.05-0.08 s of CPU, paid otherwise by every simulator child).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_specperf.cases.registry import build_spec
    from pytest_specperf.cases.result_view import ResultView
    from pytest_specperf.endpoint.client import Client
    from pytest_specperf.errors import ConfigError, MeasurementError, SpecperfError
    from pytest_specperf.prompts.files import load_prompts
    from pytest_specperf.pytest_plugin.fixture import SpecperfFixture
    from pytest_specperf.run.runner import Runner
    from pytest_specperf.sim import SimServer, load_profile
    from pytest_specperf.version import __version__

#: public name -> the module that defines it
_WHERE = {
    "ResultView": "pytest_specperf.cases.result_view",  # what specperf.result and a direct call return
    "SpecperfFixture": "pytest_specperf.pytest_plugin.fixture",  # the specperf fixture's type, for annotations
    "SpecperfError": "pytest_specperf.errors",
    "ConfigError": "pytest_specperf.errors",
    "MeasurementError": "pytest_specperf.errors",
    "build_spec": "pytest_specperf.cases.registry",  # marker keywords -> a validated case spec
    "Runner": "pytest_specperf.run.runner",  # measures and judges specs on one endpoint, without pytest
    "Client": "pytest_specperf.endpoint.client",
    "SimServer": "pytest_specperf.sim",  # the embedded simulator, as a context manager
    "load_profile": "pytest_specperf.sim",
    "load_prompts": "pytest_specperf.prompts.files",  # prompt files in the common dataset formats
}
__all__ = [
    "Client",
    "ConfigError",
    "MeasurementError",
    "ResultView",
    "Runner",
    "SimServer",
    "SpecperfError",
    "SpecperfFixture",
    "__version__",
    "build_spec",
    "load_profile",
    "load_prompts",
]


def __getattr__(name: str) -> Any:
    where = "pytest_specperf.version" if name == "__version__" else _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'pytest_specperf' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
