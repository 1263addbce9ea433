"""How a case is measured is picked once per case from what the run was given (``measure.modes.mode_of``)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import Result
from pytest_specperf.compare.gates import Gate
from pytest_specperf.errors import ConfigError
from pytest_specperf.measure import modes


def _never(case: CaseSpec, until: object) -> Result:
    raise AssertionError("mode_of measures nothing")


def _plan(kind: str, params: dict[str, Any], *, a: bool = False, arms: bool = False) -> modes.Plan:
    return modes.Plan(nodeid="t", spec=build_spec(kind, params), gate=Gate(), here=_never,
                      a=_never if a else None, arms={"x": _never, "y": _never} if arms else None)


@pytest.mark.parametrize(("kind", "params", "a", "arms", "mode"), [
    ("sustained", {"tokens": 64}, False, False, "single"),
    ("sustained", {"tokens": 64, "repeat": "auto"}, False, False, "single"),  # its streams are its trials
    ("sustained", {"tokens": 64, "concurrency": 4, "repeat": 3}, False, False, "trials"),
    ("load_sweep", {"concurrency": [1, 2], "repeat": 3}, False, False, "trials"),
    ("sustained", {"tokens": 64}, True, False, "ab"),
    ("sustained", {"tokens": 64, "repeat": "auto"}, True, False, "ab"),
    ("load_sweep", {"concurrency": [1, 2], "repeat": "auto"}, False, True, "arms"),
    ("sustained", {"tokens": 64}, True, True, "arms"),  # arms name every endpoint, A/B's among them
])
def test_the_mode_follows_the_options_and_the_case(kind: str, params: dict[str, Any], a: bool, arms: bool,
                                                   mode: str) -> None:
    name = modes.mode_of(_plan(kind, params, a=a, arms=arms))
    assert name == mode and name in modes.MODES


def test_only_the_stored_modes_are_judged_against_stored_runs() -> None:
    assert {n for n, cls in modes.MODES.items() if cls.stored} == {"single", "trials"}


def test_an_auto_load_sweep_in_ab_is_a_one_line_error_naming_arms() -> None:
    with pytest.raises(ConfigError, match=r"repeat='auto' on a load sweep .*--specperf-arms=A=URL_A,B=URL_B"):
        modes.mode_of(_plan("load_sweep", {"concurrency": [1, 2], "repeat": "auto"}, a=True))
