"""Judging a result given as JSON: the rules take records only, so a test that builds its rows as JSON loads them
through the edge (``saved_results.load_record``), judges the record, and reads the JSON it writes back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import gates


def against_baseline(gate: gates.Gate, result: dict[str, Any], baseline: Sequence[dict[str, Any]],
                     **kw: Any) -> list[str]:
    """``gates.against_baseline`` on ``result``'s record; ``result`` then holds that record's JSON (its verdict,
    reason and comparisons as judged)."""
    record = load_record(result)
    notes = gates.against_baseline(gate, record, [load_record(b) for b in baseline], **kw)
    result.clear()
    result.update(to_dict(record))
    return notes
