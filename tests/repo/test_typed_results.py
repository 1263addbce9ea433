"""Results are read by attribute: judging, comparing and the outputs never look a figure up by a string key.

A line may still call ``.get("...")`` only to read data that is not a result (a server's JSON, a run file's
metadata, a kind this version has no record of), saying so in a comment (``# not result data``). Every part of a
result is a record now (the arms table, the crossover, the history entries, the A/B and arms trials among them), so
no line may read one as a plain dict: the ``# untyped part`` marker that let a line do so while it was one is
refused.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest_specperf

PACKAGE = Path(pytest_specperf.__file__).parent
#: where results are judged, compared, kept and shown
READERS = ("run", "compare", "report", "history")
NOT_RESULT_DATA = "# not result data"
UNTYPED_PART = "# untyped part"
_GET = re.compile(r"\.get\([\"']")


def reads(marker: str | None) -> list[str]:
    """``.get("...")`` lines in the readers: unmarked ones (``marker`` None), or those carrying ``marker``."""
    found = []
    for folder in READERS:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if not _GET.search(line):
                    continue
                marked = NOT_RESULT_DATA in line or UNTYPED_PART in line
                if (marker is None and not marked) or (marker is not None and marker in line):
                    found.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    return found


def test_no_result_figure_is_read_by_a_string_key() -> None:
    assert reads(None) == []


def test_no_part_of_a_result_is_read_as_a_dict() -> None:
    assert reads(UNTYPED_PART) == []


def test_the_count_sees_a_string_key_read() -> None:
    """The pattern finds the reads it must refuse, in either quote style."""
    lines = ['x = r.get("decode_tps")', "x = r.get('ttft_s', 0)", "x = getattr(r, 'ttft_s')"]
    assert [ln for ln in lines if _GET.search(ln)] == lines[:2]


def test_every_figure_read_by_its_name_is_a_field_of_a_record() -> None:
    """``compare.trials.figure`` is the one read of a figure by a name held in a variable; each name it takes
    (``FIGURES``) is a field of a result record or of a part a comparison reads (a level, a sweep point, a stream,
    a trial), so a misspelt or removed field cannot read as a quiet None."""
    import dataclasses

    from pytest_specperf.cases.figures import FIGURES
    from pytest_specperf.cases.result_parts import LevelTrial, SweepPoint
    from pytest_specperf.cases.results import LoadLevel, StreamResult
    from pytest_specperf.cases.saved_results import RESULT_TYPES

    records = [*RESULT_TYPES.values(), LoadLevel, SweepPoint, StreamResult, LevelTrial]
    fields = {f.name for cls in records for f in dataclasses.fields(cls)}
    assert len(FIGURES) >= 15
    assert [name for name in FIGURES if name not in fields] == []


#: where results are judged: every signature there takes records, never a result as loose data
JUDGING = ("compare", "history", "cases/figures.py")
#: parameter names that hold a result, a part of one, or several (what a signature must type as records)
RESULT_NAMES = {"result", "results", "case", "cases", "r", "rs", "row", "rows", "record", "records", "base", "cand",
                "baseline", "trials", "arms", "summary", "unit", "units", "mine", "past", "now", "arm", "arm_a",
                "arm_b", "results_a", "results_b", "base_results", "cand_results", "level", "lv"}
LOOSE = ("dict[str, Any]", "Mapping[str, Any]")


def _functions(folders: tuple[str, ...]) -> list[tuple[Path, ast.FunctionDef]]:
    out = []
    for folder in folders:
        paths = [PACKAGE / folder] if folder.endswith(".py") else sorted((PACKAGE / folder).rglob("*.py"))
        for path in paths:
            out += [(path, n) for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)]
    return out


def loose_results(folders: tuple[str, ...] = JUDGING) -> list[str]:
    """Parameters named as results (``RESULT_NAMES``) typed as loose data: a JSON-like mapping, ``Any``, ``object``."""
    found = []
    for path, fn in _functions(folders):
        for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
            text = "" if a.annotation is None else ast.unparse(a.annotation)
            if a.arg in RESULT_NAMES and (any(t in text for t in LOOSE) or text in ("Any", "object")):
                found.append(f"{path.relative_to(PACKAGE)}:{fn.lineno}: {fn.name}({a.arg}: {text})")
    return found


def generic_reads(folders: tuple[str, ...] = (*JUDGING, "report", "run", "cli.py")) -> list[str]:
    """Calls of a generic field reader ``read(x, name)`` (a method's ``.read()`` is not one)."""
    found = []
    for folder in folders:
        paths = [PACKAGE / folder] if folder.endswith(".py") else sorted((PACKAGE / folder).rglob("*.py"))
        for path in paths:
            for n in ast.walk(ast.parse(path.read_text())):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "read":
                    found.append(f"{path.relative_to(PACKAGE)}:{n.lineno}")
    return found


#: the one read of a figure by a name held in a variable (``compare.trials.figure``; its names are checked above)
NAMED_READ = ("cases/figures.py", "figure")


def named_getattrs(folders: tuple[str, ...] = JUDGING) -> list[str]:
    """``getattr(x, name)`` with a name that is not a literal, outside the one named read (``NAMED_READ``)."""
    found = []
    for path, fn in _functions(folders):
        if (str(path.relative_to(PACKAGE)), fn.name) == NAMED_READ:
            continue
        for n in ast.walk(fn):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
                    and len(n.args) >= 2 and not isinstance(n.args[1], ast.Constant)):
                found.append(f"{path.relative_to(PACKAGE)}:{n.lineno}: {fn.name}")
    return found


def test_judging_signatures_take_records() -> None:
    assert loose_results() == []


def test_no_field_is_read_through_a_generic_reader() -> None:
    assert generic_reads() == []


def test_a_name_held_in_a_variable_is_read_in_one_place() -> None:
    assert named_getattrs() == []


def test_the_guards_see_what_they_refuse(tmp_path: Path) -> None:
    """Each guard finds the form it refuses in a module written for it."""
    pkg = tmp_path / "compare"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "from typing import Any\n"
        "def judge(result: dict[str, Any], rows: 'Mapping[str, Any]', meta: dict[str, Any]) -> None:\n"
        "    x = read(result, 'decode_tps')\n"
        "    y = getattr(result, meta['name'])\n"
        "    z = getattr(result, 'ttft_s')\n")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert [s.split(": ", 1)[1] for s in loose_results(("compare",))] == [
            "judge(result: dict[str, Any])", "judge(rows: 'Mapping[str, Any]')"]
        assert generic_reads(("compare",)) == ["compare/m.py:3"]
        assert named_getattrs(("compare",)) == ["compare/m.py:4: judge"]
    finally:
        PACKAGE = saved
