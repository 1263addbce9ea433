"""The case kinds' registry: one kind per spec, named alike, and no kind importing what dispatches to it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from pytest_specperf.cases.registry import SPECS
from pytest_specperf.run import case_kind as kind_module
from pytest_specperf.run.registry import KINDS

RUN = Path(kind_module.__file__).parent
DISPATCH = {"pytest_specperf.run.runner", "pytest_specperf.run.registry"}


def test_every_spec_has_one_kind_of_its_name_keeping_the_protocol() -> None:
    assert list(KINDS) == list(SPECS)
    protocol = {n for n in vars(kind_module.CaseKind) if not n.startswith("_")} - {"name", "spec_type"}
    for name, cls in KINDS.items():
        assert cls.name == name and cls.spec_type is SPECS[name], name
        for method in protocol:
            params = list(inspect.signature(getattr(cls, method)).parameters)
            assert params == list(inspect.signature(getattr(kind_module.CaseKind, method)).parameters), (name, method)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function bodies and TYPE_CHECKING blocks included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


def test_no_kind_imports_the_code_that_dispatches_to_it_and_only_the_registry_imports_kinds() -> None:
    kinds = {cls.__module__ for cls in KINDS.values()}
    for path in sorted(RUN.glob("*.py")):
        module = f"pytest_specperf.run.{path.stem}"
        imported = _imports(path)
        if module in kinds:
            assert not imported & DISPATCH, f"{module} imports {imported & DISPATCH}"
        elif module != "pytest_specperf.run.registry":
            assert not imported & kinds, f"{module} imports the kind module(s) {imported & kinds}"
