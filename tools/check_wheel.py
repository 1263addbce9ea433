"""Checks a built wheel against the source tree: every package file shipped, build-time tools left out.

Usage: ``python tools/check_wheel.py dist/pytest_specperf-*.whl``. Exits 1 with the missing or stray
paths, so a package-data glob that forgets a new corpus, profile or ``py.typed`` fails CI.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_specperf"


def source_files() -> set[str]:
    """Package files as wheel member names (no bytecode caches)."""
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / PACKAGE).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def problems(wheel: Path) -> list[str]:
    """What is wrong with ``wheel``: missing package files, files from outside the package, no plugin entry point."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next((z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")), "")
    out = [f"missing from the wheel: {name}" for name in sorted(source_files() - names)]
    stray = sorted(n for n in names if not n.startswith(f"{PACKAGE}/") and ".dist-info/" not in n)
    out += [f"not part of the package: {name}" for name in stray]
    if "[pytest11]" not in entry_points:
        out.append("no [pytest11] entry point: pytest would not load the plugin")
    return out


def main(argv: list[str]) -> int:
    """Check each wheel named on the command line; print what is wrong."""
    if not argv:
        print("usage: python tools/check_wheel.py WHEEL...", file=sys.stderr)
        return 2
    bad = [f"{w}: {p}" for w in argv for p in problems(Path(w))]
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
