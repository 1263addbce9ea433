"""Apply each listed one-line break in a scratch copy of the repository and check that its tests go red.

Every ``tools/breaks/*.toml`` lists breaks as ``[[break]]`` tables::

    [[break]]
    file = "pytest_specperf/run/drift.py"       # from the repository root
    find = "BURST_CHUNKS = 8"                     # occurs exactly once in the file
    replace = "BURST_CHUNKS = 4"
    tests = ["tests/unit/test_drift_edges.py::test_a_late_read_of_five_steps_is_no_burst_and_twelve_are_one"]
    why = "a late read of five steps named a burst"
    quick = true                                  # optional: one of the handful ``--quick`` runs (CI)

A break is named ``<file stem>-<n>`` (its place in its file, from 1). For each one this copies the working tree
(without ``.git``, ``.venv`` and caches) to a scratch folder, applies the replacement there, runs its tests with
``PYTHONPATH`` on the copy and reports ``caught`` (a test went red), ``survived`` (every test passed: the break is
not pinned), ``broken`` (``find`` is not exactly one match, or the file is missing) or ``error`` (pytest could not
run the tests: a test id that no longer exists, a collection error). The listed tests are first run once on an
unbroken copy (``--no-baseline`` skips it): a test that is already red would count every break as caught.

    python tools/breaks.py              # every break
    python tools/breaks.py --quick      # the breaks marked quick (CI: under two minutes on two cores)
    python tools/breaks.py --only pins  # one file's breaks, or one break: --only pins-3 (repeatable)
    python tools/breaks.py --list       # what is listed

Exit status 0 when every break run was caught, 1 otherwise, 2 for a bad list or option.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LISTS = ROOT / "tools" / "breaks"
#: What a scratch copy leaves out: version control, virtual environments, caches and build outputs.
SKIP = (".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".specperf",
        ".benchmarks", ".tox", "node_modules")
#: Seconds one break's tests may take; past it the break counts as caught (its tests did not pass) and says so.
TIMEOUT_S = 900


class ListError(ValueError):
    """A break list that cannot be read as written; the message is one line."""


@dataclass(frozen=True)
class Break:
    """One one-line break and the tests that must catch it."""

    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    why: str
    quick: bool
    source: str  # "tools/breaks/pins.toml break 3", for messages

    def matches(self, root: Path) -> int:
        """How often ``find`` occurs in the file under ``root`` (-1: the file is missing)."""
        path = root / self.file
        return path.read_text(encoding="utf-8").count(self.find) if path.is_file() else -1


def load(folder: Path = LISTS) -> list[Break]:
    """Every break of every ``*.toml`` in ``folder``, in file then list order."""
    out: list[Break] = []
    for path in sorted(folder.glob("*.toml")):
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ListError(f"{shown}: not valid TOML ({e}); fix the file") from None
        entries = data.get("break", [])
        if not isinstance(entries, list):
            raise ListError(f"{shown}: write each break as a [[break]] table")
        for n, e in enumerate(entries, 1):
            where = f"{shown} break {n}"
            missing = [k for k in ("file", "find", "replace", "tests", "why") if k not in e]
            if missing:
                raise ListError(f"{where}: missing {', '.join(missing)}; every break needs file, find, replace, "
                                "tests and why")
            tests = e["tests"]
            if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
                raise ListError(f"{where}: tests must be a non-empty list of test ids")
            if e["find"] == e["replace"]:
                raise ListError(f"{where}: replace equals find, so nothing breaks; write the broken text")
            out.append(Break(name=f"{path.stem}-{n}", file=e["file"], find=e["find"], replace=e["replace"],
                             tests=tuple(tests), why=e["why"], quick=bool(e.get("quick", False)), source=where))
    return out


def select(breaks: list[Break], only: list[str], quick: bool) -> list[Break]:
    """The breaks to run: those named by ``only`` (a file stem or a break name), the quick ones, or all."""
    picked = [b for b in breaks if b.quick] if quick else breaks
    if only:
        unknown = [o for o in only if not any(o in (b.name, b.name.rsplit("-", 1)[0]) for b in breaks)]
        if unknown:
            raise ListError(f"--only {', '.join(unknown)}: no such break or list; see --list for the names")
        picked = [b for b in picked if b.name in only or b.name.rsplit("-", 1)[0] in only]
    return picked


def scratch_copy(dest: Path) -> Path:
    """A copy of the working tree (uncommitted edits included) at ``dest``."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*SKIP), symlinks=True)
    return dest


def run_tests(copy: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[int | None, str]:
    """(pytest's exit status or None on timeout, its last lines) for ``tests`` run in ``copy``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), *filter(None, [os.environ.get("PYTHONPATH")])])}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", "-q", "--no-header", *tests]
    try:
        done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout_s:g} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, "\n".join(lines[-15:])


def write_source(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` and drop its compiled bytecode: a pyc is checked by the source's size and mtime
    in whole seconds, so a same-length break written within a second of the last could run the old code."""
    path.write_text(text, encoding="utf-8")
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink()


def check_copy_imports(copy: Path) -> None:
    """Fail loudly if the copy's tests would import the package from somewhere else (an installed copy)."""
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run([sys.executable, "-c", "import pytest_specperf; print(pytest_specperf.__file__)"],
                         cwd=copy, env=env, capture_output=True, text=True, check=True).stdout.strip()
    if not Path(out).resolve().is_relative_to(copy.resolve()):
        raise ListError(f"the scratch copy imports pytest_specperf from {out}, not from itself; "
                        "uninstall the non-editable copy or run from a virtualenv with an editable install")


def verdict(rc: int | None) -> str:
    """caught / survived / error from pytest's exit status (1: tests failed; None: timed out)."""
    if rc is None or rc == 1:
        return "caught"
    return "survived" if rc == 0 else "error"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only the breaks marked quick = true (CI)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="a list's stem (pins) or one break (pins-3); repeatable")
    ap.add_argument("--list", action="store_true", help="list the breaks and exit")
    ap.add_argument("--show", action="store_true", help="print the end of pytest's output for every break")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the tests on an unbroken copy first")
    ap.add_argument("--lists", type=Path, default=LISTS, help="the folder of break lists (default tools/breaks)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per break's tests (default %(default)s)")
    args = ap.parse_args(argv)
    try:
        chosen = select(load(args.lists), args.only, args.quick)
    except ListError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for b in chosen:
            print(f"{b.name}{' (quick)' if b.quick else ''}: {b.file}: {b.why}\n    {b.find!r} -> {b.replace!r}")
            for t in b.tests:
                print(f"    {t}")
        return 0
    if not chosen:
        print("error: no break selected", file=sys.stderr)
        return 2
    failures = 0
    with tempfile.TemporaryDirectory(prefix="breaks-") as tmp:
        base = scratch_copy(Path(tmp) / "base")
        try:
            check_copy_imports(base)
        except ListError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for b in chosen if b.matches(base) == 1 for t in b.tests))
            rc, tail = run_tests(base, tests, args.timeout)
            if rc != 0:
                print(f"error: the listed tests are not green on the unbroken tree (pytest exit {rc}), so no break "
                      f"can be judged; fix them first:\n{tail}", file=sys.stderr)
                return 1
        for b in chosen:
            t0 = time.monotonic()
            n = b.matches(base)
            if n != 1:
                what = "the file is missing" if n < 0 else f"find matches {n} times, not once"
                print(f"broken   {b.name}: {b.file}: {what} ({b.source}); update the entry")
                failures += 1
                continue
            path = base / b.file
            original = path.read_text(encoding="utf-8")
            write_source(path, original.replace(b.find, b.replace))
            try:
                rc, tail = run_tests(base, b.tests, args.timeout)
            finally:
                write_source(path, original)
            result = verdict(rc)
            print(f"{result:<8} {b.name} ({time.monotonic() - t0:.0f} s): {b.file}: {b.why}", flush=True)
            if result == "caught" and args.show:
                shown = [line for line in tail.splitlines() if line.startswith(("E ", "FAILED"))]
                print("\n".join(f"         | {line}" for line in shown))
            if result != "caught":
                failures += 1
                why = ("its tests all passed with the break applied: add a test that fails on it"
                       if result == "survived" else f"pytest exit {rc}: the tests could not run")
                print(f"         {why}\n" + "\n".join(f"         | {line}" for line in tail.splitlines()))
    print(f"{len(chosen) - failures} of {len(chosen)} breaks caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
