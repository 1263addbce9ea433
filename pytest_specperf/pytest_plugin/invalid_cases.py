"""A perf case that cannot run as written: its own failing item, so the module's other cases still run.

A misspelt keyword, a bad prompt file or a ``deployed=`` arm the run lacks is found at collection. Raising
there would stop the whole collection and show only the first mistake; instead each bad case becomes an
item that fails with its one-line reason, and is never measured.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.prompt_cases import many_trials
from pytest_specperf.cases.registry import SPECS
from pytest_specperf.cases.results import ErrorRecord
from pytest_specperf.errors import ConfigError
from pytest_specperf.pytest_plugin.keys import RESULTS, SpecperfWarning
from pytest_specperf.run.target import arm_name
from pytest_specperf.settings import Settings


class InvalidCase(pytest.Item):
    """A case whose marker or YAML entry is wrong: it fails with its reason and measures nothing; its error record
    (kind, node id, reason) is an error row in the table, the JSON and the saved run, so it never vanishes."""

    def __init__(self, *, reason: str, kind: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason
        self.kind = kind or kind_in(reason)

    def runtest(self) -> None:
        record = ErrorRecord(nodeid=self.nodeid, kind=self.kind, reason=self.reason)
        self.stash.setdefault(RESULTS, []).append(record)  # sent with the report, as a measured case's
        pytest.fail(self.reason, pytrace=False)  # its one line, also in the short summary

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"specperf: {self.name} (invalid case)"


def kind_in(reason: str) -> str:
    """The case kind a usage error names ('sustained(): ...'), or 'invalid' where it names none."""
    found = [k for k in re.findall(r"\b(\w+)\(\)", reason) if k in SPECS]
    return found[0] if found else "invalid"


def invalid_in_place_of(item: pytest.Item, reason: str) -> InvalidCase:
    """An InvalidCase with the node id and marks of the test it replaces (so -k and -m still select it)."""
    assert item.parent is not None
    kinds = [m.name for m in item.iter_markers() if m.name in SPECS]
    bad = InvalidCase.from_parent(item.parent, name=item.name, reason=reason, kind=kinds[0] if kinds else None)
    for mark in item.own_markers:  # the parents' marks reach it through its parent, as for the test itself
        bad.own_markers.append(mark)
        bad.keywords[mark.name] = mark
    return bad


def arm_names(settings: Settings) -> list[str]:
    """The arms this run measures, from --specperf-arms or --specperf-engine-arms; empty outside arms mode."""
    if settings.arms:
        return [name for name, _ in settings.arms]
    return [arm_name(k) for k in settings.engine_arms or ()]


def check_for_run(spec: CaseSpec, settings: Settings) -> None:
    """What a valid spec still gets wrong about this run's options, raised before anything is measured."""
    deployed = getattr(spec, "deployed", None)
    names = arm_names(settings)
    if deployed is not None and names and deployed not in names:
        option = "--specperf-arms" if settings.arms else "--specperf-engine-arms"
        raise ConfigError(f"deployed={deployed!r} is not an arm of {option}; name one of {', '.join(names)}")


def warn_before_running(item: pytest.Item, spec: CaseSpec) -> None:
    """A valid case that will run far longer than its author may think says so at collection."""
    note = many_trials(spec)
    if note:
        item.warn(SpecperfWarning(note))
