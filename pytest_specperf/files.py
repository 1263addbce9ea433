"""Output files: written atomically (temp file + rename) with the permissions of an ordinary new file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import ConfigError


def default_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file here (0o666 less the umask)."""
    mask = os.umask(0)  # the only portable way to read the umask is to set it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` so that a reader never sees half of it; the file gets ``default_mode()``.

    Temp files from ``mkstemp`` are private (0o600); every file the plugin writes is chmod-ed to the
    same ordinary mode, so a JSON report, a Markdown summary and a saved run can be read alike.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, default_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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
