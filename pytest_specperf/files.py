"""Output files: written atomically (temp file + rename) with the permissions of an ordinary new file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pytest_specperf.errors import ConfigError


def default_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file here (0o666 less the umask)."""
    mask = os.umask(0)  # the only portable way to read the umask is to set it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def write_temp(folder: Path | str, text: str | bytes, prefix: str) -> Path:
    """``text`` (or bytes) in a new temporary file in ``folder``, flushed to disk, with ``default_mode()``.

    The first half of every atomic write: the caller renames (or links) it into place, and must unlink
    it if that fails. Temp files from ``mkstemp`` are private (0o600); every file the plugin writes gets
    the same ordinary mode, so a JSON report, a Markdown summary and a saved run can be read alike. A missing
    ``folder`` is created with its parents, as pytest's ``--junitxml`` creates its own.
    """
    Path(folder).mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8") if isinstance(text, str) else text)
            fh.flush()
            os.fsync(fh.fileno())  # a crash after the rename must not leave an empty file behind the name
        os.chmod(tmp, default_mode())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_text_atomic(path: Path | str, text: str | bytes) -> None:
    """Write ``text`` (or bytes) so that a reader never sees half of it (temp file, fsync, rename)."""
    path = Path(path)
    tmp = write_temp(path.parent, text, f".{path.name}.")
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_writable(folder: Path, flag: str) -> None:
    """ConfigError naming ``flag`` unless a file can be created in ``folder`` (or, when it does not exist yet, in
    its nearest existing parent, where it would be created). Probed by creating a file: permission bits say
    nothing for root or on read-only and virtual file systems."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{flag}: {probe} is not a folder; choose another path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".specperf-probe-", dir=probe)
    except OSError as exc:
        raise ConfigError(f"{flag}: nothing can be written in {probe} ({exc.strerror or exc}); "
                         "choose a writable path") from None
    os.close(fd)
    os.unlink(tmp)
