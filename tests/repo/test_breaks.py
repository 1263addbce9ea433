"""tools/breaks.py and its lists: every listed break still applies (its ``find`` occurs exactly once in its file), every
test it names exists, the quick handful stays small and fast, and the tool tells caught, survived and broken apart."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "breaks.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("breaks", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["breaks"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


breaks = _tool()
LISTED = breaks.load()


@cache
def _test_names(path: Path) -> frozenset[str]:
    """``name`` and ``Class::name`` of every test function the file defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(f"{node.name}::{f.name}" for f in node.body
                         if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef))
    return frozenset(n for n in names if n.split("::")[-1].startswith("test"))


def test_the_lists_are_not_empty() -> None:
    assert len(LISTED) >= 10 and len({b.name for b in LISTED}) == len(LISTED)


@pytest.mark.parametrize("b", LISTED, ids=lambda b: b.name)
def test_each_break_applies_exactly_once_and_names_tests_that_exist(b: object) -> None:
    assert b.matches(ROOT) == 1, f"{b.source}: find must occur exactly once in {b.file} (got {b.matches(ROOT)})"
    for test in b.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file() and path.startswith("tests/"), f"{b.source}: no test file {path}"
        if name:  # a parametrized id names its function before the brackets
            assert name.split("[")[0] in _test_names(ROOT / path), f"{b.source}: {path} has no test {name}"


def test_the_quick_handful_is_small_and_runs_without_a_real_engine() -> None:
    quick = [b for b in LISTED if b.quick]
    assert 3 <= len(quick) <= 10, [b.name for b in quick]
    # CI runs them in under two minutes: unit tests and a few simulator runs, never an engine or a browser
    assert all(t.startswith(("tests/unit/", "tests/http/", "tests/repo/")) for b in quick for t in b.tests)


def test_a_list_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text('[[break]]\nfile = "a.py"\nfind = "1"\nreplace = "2"\nwhy = "w"\n')
    with pytest.raises(breaks.ListError, match=r"x.toml break 1: missing tests; every break needs"):
        breaks.load(tmp_path)
    assert breaks.select(LISTED, ["pins"], quick=False) == [b for b in LISTED if b.name.startswith("pins-")]
    with pytest.raises(breaks.ListError, match="--only nosuch: no such break or list"):
        breaks.select(LISTED, ["nosuch"], quick=False)


def test_the_tool_tells_caught_survived_and_broken_apart(tmp_path: Path) -> None:
    drift = "pytest_specperf/run/drift.py"
    test = "tests/unit/test_drift_edges.py::test_a_late_read_of_five_steps_is_no_burst_and_twelve_are_one"
    (tmp_path / "t.toml").write_text(f"""
[[break]]
file = "{drift}"
find = "BURST_CHUNKS = 8"
replace = "BURST_CHUNKS = 4"
tests = ["{test}"]
why = "caught"

[[break]]
file = "{drift}"
find = "#: Chunks on each side of a stall"
replace = "#: Chunks either side of a stall"
tests = ["{test}"]
why = "a comment: survives"

[[break]]
file = "{drift}"
find = "no such text"
replace = "x"
tests = ["{test}"]
why = "does not apply"
""")
    done = subprocess.run([sys.executable, str(TOOL), "--lists", str(tmp_path), "--no-baseline"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    lines = [line.split(" (")[0].split(":")[0] for line in done.stdout.splitlines() if line[:1] != " "]
    assert lines[:3] == ["caught   t-1", "survived t-2", "broken   t-3"], done.stdout + done.stderr
    assert done.returncode == 1 and "1 of 3 breaks caught" in done.stdout
    # the scratch copy took the break, never the tree itself
    assert "BURST_CHUNKS = 8\n" in (ROOT / drift).read_text(encoding="utf-8")
