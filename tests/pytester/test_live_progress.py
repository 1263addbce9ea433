"""Live progress: a line per case with tokens so far and the current rate on a terminal, nothing otherwise.

pytest runs a real sustained case on the simulator under a pseudo-terminal (the pty module), and again
with its output piped.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

CASE = '''
import pytest

@pytest.mark.sustained(tokens=800, ctx=200, content="prose")
def test_long_one(specperf):
    pass
'''
LIVE = re.compile(r"\x1b7 \[test_long_one: (\d+) tokens, (\d+) tok/s\]\x1b\[K\x1b8")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("CI", "GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS", "TERM", "NO_COLOR")} | {"TERM": "xterm"}


def _args(folder: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "test_live.py", "-p", "no:cacheprovider",
            f"--specperf-json={folder / 'r.json'}"]


def _under_pty(folder: Path) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen(_args(folder), cwd=folder, stdin=slave, stdout=slave, stderr=slave, env=_env())
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        proc.wait(timeout=120)
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "test_live.py").write_text(CASE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def test_live_line_on_a_terminal(folder: Path) -> None:
    out = _under_pty(folder)
    assert "1 passed" in out, out[-2000:]
    shown = [(int(n), int(r)) for n, r in LIVE.findall(out)]
    assert len(shown) >= 3, out[-2000:]  # updated as the case ran, every half second or so
    tokens = [n for n, _ in shown]
    assert tokens == sorted(tokens) and 0 < tokens[-1] <= 800
    # the rate shown is the rate the case measured (the simulator is steady on this profile)
    decode = json.loads((folder / "r.json").read_text())["results"][0]["decode_tps"]
    rates = sorted(r for _, r in shown)
    assert 0.5 * decode < rates[len(rates) // 2] < 2 * decode
    # wiped before the outcome is written, so pytest's line ends clean
    last = out.rindex("tok/s]")
    assert "\x1b7\x1b[K\x1b8" in out[last:]


def test_quiet_when_not_a_terminal(folder: Path) -> None:
    done = subprocess.run(_args(folder), cwd=folder, capture_output=True, text=True, timeout=120, env=_env())
    assert "1 passed" in done.stdout
    assert "tok/s]" not in done.stdout + done.stderr and "\x1b7" not in done.stdout
