"""Results are read by attribute: judging, comparing and the outputs never look a figure up by a string key.

A line may still call ``.get("...")`` only to read data that is not a result (a server's JSON, a run file's
metadata, a kind this version has no record of), saying so in a comment (``# not result data``). Every part of a
result is a record now (the arms table, the crossover, the history entries, the A/B and arms trials among them), so
no line may read one as a plain dict: the ``# untyped part`` marker that let a line do so while it was one is
refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest_specperf

PACKAGE = Path(pytest_specperf.__file__).parent
#: where results are judged, compared and shown
READERS = ("run", "compare", "report")
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

    from pytest_specperf.cases.result_parts import LevelTrial, SweepPoint
    from pytest_specperf.cases.results import LoadLevel, StreamResult
    from pytest_specperf.cases.saved_results import RESULT_TYPES
    from pytest_specperf.compare.trials import FIGURES

    records = [*RESULT_TYPES.values(), LoadLevel, SweepPoint, StreamResult, LevelTrial]
    fields = {f.name for cls in records for f in dataclasses.fields(cls)}
    assert len(FIGURES) >= 15
    assert [name for name in FIGURES if name not in fields] == []
