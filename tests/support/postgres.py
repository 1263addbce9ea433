"""A throwaway PostgreSQL cluster from Debian's ``postgresql`` package, started the way its users start one.

``initdb`` into a fresh folder, then ``pg_ctl start`` on a free TCP port of 127.0.0.1 (and a private unix
socket folder); trust authentication for the one user ``specperf``. As root (CI containers) the server runs as
the ``postgres`` user, which the package creates: PostgreSQL refuses to run as root. Without the package the
tests skip, unless ``SPECPERF_REQUIRE_POSTGRES=1`` (``.ci/run`` sets it), where they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE_ENV = "SPECPERF_REQUIRE_POSTGRES"


@dataclass
class Cluster:
    """A running server: ``url`` to connect as ``specperf`` to database ``postgres``."""

    url: str
    port: int
    folder: Path

    def url_for(self, database: str) -> str:
        return self.url.rsplit("/", 1)[0] + "/" + database


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian keeps them under /usr/lib/postgresql/N/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a cluster, yield it, stop it and remove its files."""
    bindir = binaries()
    if bindir is None:
        why = "PostgreSQL is not installed (apt-get install postgresql)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why}, and {REQUIRE_ENV}=1 requires it")
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="specperf-pg-"))
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (folder, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = _free_port()
    try:
        subprocess.run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U", "specperf", "--auth=trust",
                                        "-E", "UTF8", "--no-sync"]),
                       check=True, capture_output=True, timeout=120)
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"),
                                        "-o", options, "-w", "-t", "60", "start"]),
                       check=True, capture_output=True, timeout=90)
    except subprocess.CalledProcessError as exc:
        log = (folder / "log").read_text() if (folder / "log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {exc.stderr.decode(errors='replace')[-800:]} {log[-800:]}")
    try:
        yield Cluster(url=f"postgresql://specperf@127.0.0.1:{port}/postgres", port=port, folder=folder)
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
