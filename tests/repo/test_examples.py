"""The README shows the shipped example perf cases as they are."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_example_is_the_shipped_perf_cases() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = re.search(r"`perf_cases/test_decode\.py`[^\n]*\n\n```python\n(.*?)```", readme, re.S)
    assert shown is not None, "README lost its perf_cases/test_decode.py example"
    shipped = (REPO / "perf_cases" / "test_decode.py").read_text(encoding="utf-8")
    assert shown.group(1).strip() in shipped
    assert shipped.count("\ndef test_") == shown.group(1).count("\ndef test_") == 4
