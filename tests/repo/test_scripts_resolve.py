"""The benchmarks and tools read the package by name: every ``module.NAME`` they use on one of its modules exists.

CI runs each benchmark's ``--quick`` form, minutes after the suite; a name moved in the package (a refactor) would
only show there. This reads the scripts' source and checks each such name against the imported module, in a second.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tools").glob("*.py")])


def _aliases(tree: ast.Module) -> dict[str, ModuleType]:
    """Names bound to a module of the package: ``import pytest_specperf.x as m``, ``from pytest_specperf import x``."""
    found: dict[str, ModuleType] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("pytest_specperf") and a.asname:
                    found[a.asname] = importlib.import_module(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pytest_specperf"):
            for a in node.names:
                try:
                    found[a.asname or a.name] = importlib.import_module(f"{node.module}.{a.name}")
                except ModuleNotFoundError:
                    continue  # a function or class imported from a module, not a module
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_name_a_script_reads_from_the_package_exists(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    modules = _aliases(tree)
    missing = sorted({f"{node.value.id}.{node.attr} (line {node.lineno})" for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id in modules and not hasattr(modules[node.value.id], node.attr)})
    assert not missing, f"{script.name} reads names its package modules lack: {missing}"


def test_the_check_sees_a_moved_name() -> None:
    tree = ast.parse("from pytest_specperf.compare import gates\ngates.NO_SUCH_NAME\n")
    modules = _aliases(tree)
    assert "gates" in modules and not hasattr(modules["gates"], "NO_SUCH_NAME")
