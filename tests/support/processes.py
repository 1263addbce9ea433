"""The process table in /proc (Linux), read without psutil: a process's descendants, whether one still runs, and
that none outlives a signalled pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody reaped yet has ended)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of every live process below ``pid`` (children, their children, ...)."""
    parent_of: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is None or fields[0] == "Z":
            continue
        try:
            cmd[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parent_of[int(entry.name)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        for child, parent in parent_of.items():
            if parent == p and child not in found:
                found[child] = cmd[child]
                frontier.append(child)
    return found


def signal_once_started(proc: subprocess.Popen[bytes], flag: Path, sig: signal.Signals) -> dict[int, str]:
    """Wait until the pytest run ``proc`` writes ``flag`` (its inner test has started), note every process below
    it, send it ``sig`` and wait for it to exit (killed after 60 s); returns the processes noted."""
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None, proc.communicate()[0].decode(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"the inner test never wrote {flag.name}"
            time.sleep(0.05)
        below = descendants(proc.pid)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return below


def assert_none_left(watched: dict[int, str], sig: signal.Signals | str) -> None:
    """Fail if any of ``watched`` still runs 30 s after its pytest got ``sig`` (or after what ``sig`` says: "its
    pytest ended"), and kill it, for the next test.

    The kernel's parent-death signal is immediate and a stdin watch takes one event-loop turn; a process that
    survived does so for good, so a generous deadline costs nothing on a passing run."""
    deadline = time.monotonic() + 30
    while (left := {p: c for p, c in watched.items() if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after {sig if isinstance(sig, str) else f'pytest got {sig.name}'}: {left}"
