"""Benchmarks cannot rot unseen: each script takes ``--quick`` and CI runs every one that way.

The scripts print figures nothing asserts on, so only running them shows they still work against the
code (an import the restructure removed once crashed one). This checks the wiring: each script's
``--quick`` and the CI loop over the folder; CI itself runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_takes_quick(script: Path) -> None:
    assert '"--quick"' in script.read_text(), f"{script.name} has no --quick; add one that runs in under a minute"


def test_ci_runs_every_benchmark_quickly() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'for script in benchmarks/*.py' in ci and '"$script" --quick' in ci
