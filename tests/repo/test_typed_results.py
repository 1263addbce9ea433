"""Results are read by attribute: judging, comparing and the outputs never look a figure up by a string key.

Two kinds of line may still call ``.get("...")``, each saying so in a comment: one reading data that is not a
result (a server's JSON, a run file's metadata: ``# not result data``), and one reading a part of a result that is
still a plain dict (the arms table, the crossover, a history entry: ``# untyped part``). The second kind is
counted against a ceiling that only ever falls, as those parts become records.
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
#: lines still reading a dict part of a result; lower it as parts become records, never raise it
UNTYPED_CEILING = 1
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


def test_the_untyped_parts_only_shrink() -> None:
    assert len(reads(UNTYPED_PART)) <= UNTYPED_CEILING, "\n".join(reads(UNTYPED_PART))


def test_the_count_sees_a_string_key_read() -> None:
    """The pattern finds the reads it must refuse, in either quote style."""
    lines = ['x = r.get("decode_tps")', "x = r.get('ttft_s', 0)", "x = getattr(r, 'ttft_s')"]
    assert [ln for ln in lines if _GET.search(ln)] == lines[:2]
