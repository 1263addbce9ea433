"""One request at a time per endpoint, across processes (xdist workers, parallel CI jobs on one host)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock


def lock_path(url: str) -> Path:
    """The lock file for an endpoint URL (a digest, so the URL itself is not written anywhere)."""
    digest = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
    folder = Path(os.environ.get("SPECPERF_LOCK_DIR") or Path(tempfile.gettempdir()) / "pytest-specperf-locks")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{digest}.lock"


@contextmanager
def endpoint_lock(url: str) -> Iterator[None]:
    """Hold the endpoint's exclusive lock; the OS frees it if the process dies (filelock: flock or msvcrt)."""
    with FileLock(lock_path(url)):
        yield
