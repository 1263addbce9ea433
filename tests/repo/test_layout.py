"""The package layout keeps its rules (docs/architecture.md), read from the code's own imports, not a hand-kept list.

grimp builds the import graph from every import statement (module level, inside functions and under
``TYPE_CHECKING`` alike), so a lazy import cannot hide a circle.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

import pytest_specperf

PKG = "pytest_specperf"
#: Top to bottom: a module imports from its own layer or the layers below it, never from one above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pytest_plugin", "cli"),
    ("report",),
    ("history", "measure", "storage"),
    ("compare",),
    ("run",),
    ("endpoint", "sim", "engines", "scale"),
    ("cases",),
    ("prompts",),
    ("settings", "files", "version", "errors", "urls", "stopping"),
)
#: The one folder allowed to import pytest.
PYTEST_LAYER = f"{PKG}.pytest_plugin"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PKG, include_external_packages=True)


def _modules(graph: grimp.ImportGraph) -> list[str]:
    return sorted(m for m in graph.modules if m == PKG or m.startswith(PKG + "."))


def _layer(module: str) -> int | None:
    part = module.split(".")[1] if "." in module else None
    return next((i for i, names in enumerate(LAYERS) if part in names), None)


def _circles(edges: dict[str, set[str]]) -> Iterator[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()

    def visit(v: str) -> Iterator[list[str]]:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                yield from visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                yield sorted(comp)

    for v in sorted(edges):
        if v not in index:
            yield from visit(v)


def test_no_import_circles(graph: grimp.ImportGraph) -> None:
    mods = _modules(graph)
    edges = {m: {x for x in graph.find_modules_directly_imported_by(m) if x in mods} for m in mods}
    assert sum(len(v) for v in edges.values()) > 100  # the graph was read
    assert list(_circles(edges)) == []


def test_no_import_runs_back_up_the_layers(graph: grimp.ImportGraph) -> None:
    mods = _modules(graph)
    unplaced = [m for m in mods if m != PKG and _layer(m) is None]
    assert unplaced == [], "put each top-level module or package in a layer of LAYERS (and docs/architecture.md)"
    upward = [f"{m} -> {x}" for m in mods if m != PKG for x in graph.find_modules_directly_imported_by(m)
              if x in mods and x != PKG and (_layer(x) or 0) < (_layer(m) or 0)]
    assert upward == []


def test_only_the_pytest_layer_imports_pytest(graph: grimp.ImportGraph) -> None:
    importers = {m for ext in ("pytest", "_pytest") if ext in graph.modules
                 for m in graph.find_modules_that_directly_import(ext)}
    assert importers, "the pytest layer imports pytest"
    outside = sorted(m for m in importers if not m.startswith(PYTEST_LAYER))
    assert outside == []


def test_core_modules_import_without_pytest() -> None:
    """Importing every module outside the pytest layer, in a fresh interpreter, loads no pytest."""
    root = Path(pytest_specperf.__file__).parent
    names = sorted(".".join((PKG, *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
                   for p in root.rglob("*.py") if p.stem != "__main__")
    core = [n for n in names if not n.startswith(PYTEST_LAYER)]
    assert len(core) > 40
    code = (f"import importlib, sys\nfor n in {core!r}:\n    importlib.import_module(n)\n"
            "    assert 'pytest' not in sys.modules and '_pytest' not in sys.modules, n + ' imports pytest'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-300:]


def test_the_public_api_is_declared_and_loads_lazily() -> None:
    """``__all__`` names what users use; each name resolves, and importing the package loads none of them."""
    assert sorted(pytest_specperf.__all__) == sorted(["__version__", *pytest_specperf._WHERE])
    for name in pytest_specperf.__all__:
        assert getattr(pytest_specperf, name) is not None, name
    code = ("import sys, pytest_specperf; heavy = [m for m in ('pytest_specperf.run.runner', 'pytest_specperf.sim', "
            "'numpy', 'httpx') if m in sys.modules]; assert not heavy, heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-300:]


def test_no_two_module_names_differ_only_by_a_suffix() -> None:
    """One word, one meaning: ``build`` beside ``builder`` or ``kind`` beside ``kinds`` hides which role each has."""
    root = Path(pytest_specperf.__file__).parent
    stems = sorted({p.stem for p in root.rglob("*.py") if not p.stem.startswith("_")})
    clashes = [(a, b) for a in stems for b in stems
               if a != b and b.startswith(a) and b[len(a):] in ("s", "er", "ers", "ing", "ed")]
    assert clashes == []


def test_the_measuring_loops_are_imported_only_from_above(graph: grimp.ImportGraph) -> None:
    """``measure/`` measures (A/B, arms, whole trials, repeats until decided) and asks ``compare/`` to judge each
    look: judging, the history and the outputs never import it, and it imports neither the history nor an output,
    so no judgement calls back up into a loop."""
    mods = _modules(graph)
    measure = f"{PKG}.measure"
    assert any(m.startswith(measure + ".") for m in mods), "the measuring loops have their package"
    into = sorted(f"{m} -> {x}" for m in mods if not m.startswith((measure, PYTEST_LAYER, f"{PKG}.cli"))
                  for x in graph.find_modules_directly_imported_by(m) if x == measure or x.startswith(measure + "."))
    assert into == []
    out_of = sorted(f"{m} -> {x}" for m in mods if m.startswith(measure)
                    for x in graph.find_modules_directly_imported_by(m)
                    if x.startswith((f"{PKG}.history", f"{PKG}.report")))
    assert out_of == []


def test_judging_imports_no_storage_and_no_json_form(graph: grimp.ImportGraph) -> None:
    """``compare/`` judges records: it never imports where results are kept (``storage/``: saved runs, the history's
    SQL) nor how they are written or read as JSON (``cases.json_form``, ``cases.saved_results``); storage never
    imports a judging rule (``compare/``, ``history/``)."""
    mods = _modules(graph)
    judging = f"{PKG}.compare"
    kept = (f"{PKG}.storage", f"{PKG}.cases.json_form", f"{PKG}.cases.saved_results")
    into = sorted(f"{m} -> {x}" for m in mods if m.startswith(judging + ".")
                  for x in graph.find_modules_directly_imported_by(m) if x.startswith(kept))
    assert into == []
    out_of = sorted(f"{m} -> {x}" for m in mods if m.startswith(f"{PKG}.storage")
                    for x in graph.find_modules_directly_imported_by(m) if x.startswith((judging, f"{PKG}.history")))
    assert out_of == []


def test_outputs_import_no_judging(graph: grimp.ImportGraph) -> None:
    """The outputs (``report/``) read records and their figures (``cases.figures``); they never import a judging
    rule (``compare/``, the history's judge) to recompute a figure their own way."""
    mods = _modules(graph)
    judging = (f"{PKG}.compare", f"{PKG}.history")
    into = sorted(f"{m} -> {x}" for m in mods if m.startswith(f"{PKG}.report")
                  for x in graph.find_modules_directly_imported_by(m) if x.startswith(judging))
    assert into == []
