"""The history database: one connection to a SQLite file or a PostgreSQL server, one SQL dialect for both.

Never imports pytest. The stdlib ``sqlite3`` serves the default (a file, nothing to install); ``psycopg`` (3)
serves a ``postgresql://`` URL and is imported only then (the ``postgres`` extra). Both are DB-API drivers, so
the queries are written once with ``?`` placeholders and turned into ``%s`` for psycopg; the two DDL
differences (the id column, the lock that serialises migrations) are the dialect's.

Every failure to open, read or write (no such server, wrong password, a file that is not a database, a lock
held past the timeout) is one ``HistoryError`` line that names the target and what to do.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_specperf import stopping
from pytest_specperf.errors import SpecperfError
from pytest_specperf.urls import redact_url

#: the default history file, next to the saved runs under the rootdir
DEFAULT_FILE = Path(".specperf") / "history.sqlite"
#: seconds a writer waits for another writer's lock before the run's history write is given up
LOCK_TIMEOUT_S = 30.0
#: seconds of SQLite's own wait for the lock between two looks at whether the run was asked to stop
LOCK_POLL_S = 0.1
#: seconds a writer still waits for the lock once the run was asked to stop (a writer about to finish lets it in)
STOPPING_WAIT_S = 2.0


class HistoryError(SpecperfError):
    """The history database could not be used (one line: the target, what went wrong, what to do)."""


@dataclass(frozen=True)
class Target:
    """Where the history lives: a SQLite file ``path`` or a PostgreSQL ``url``."""

    path: Path | None = None
    url: str | None = None

    @property
    def dialect(self) -> str:
        return "postgres" if self.url else "sqlite"

    def shown(self) -> str:
        """The target as messages name it (a URL without its password or query values)."""
        return str(self.path) if self.url is None else redact_url(self.url)


def parse_target(text: str, root: Path | str) -> Target:
    """``postgresql://...`` (or ``postgres://``) -> a server; ``sqlite:///PATH`` or a plain path -> a file,
    relative to ``root``; '' -> the default file."""
    text = text.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return Target(url=text)
    if "://" in text and not text.startswith("sqlite://"):
        scheme = text.split("://", 1)[0]
        raise HistoryError(f"history target {redact_url(text)!r}: unknown scheme {redact_url(scheme)!r}; "
                           "give a file path, "
                           "sqlite:///PATH or postgresql://USER@HOST/DB")
    path = Path(text.removeprefix("sqlite://")) if text else DEFAULT_FILE
    return Target(path=path if path.is_absolute() else Path(root) / path)


#: The oldest SQLite the history's SQL runs on (INSERT ... RETURNING came in 3.35).
MIN_SQLITE = (3, 35, 0)


def sqlite_too_old(version: tuple[int, int, int]) -> bool:
    """Whether SQLite ``version`` lacks what the history's SQL uses."""
    return version < MIN_SQLITE


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


class Store:
    """An open history database. Use as a context manager, or call ``close``."""

    def __init__(self, target: Target, *, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.target = target
        self.dialect = target.dialect
        self.timeout = timeout
        try:
            self.conn = self._connect()
        except HistoryError:
            raise
        except Exception as exc:
            raise self.error("cannot open it", exc) from None

    def _connect(self) -> Any:
        if self.target.url is not None:
            try:
                import psycopg
            except ImportError:
                raise HistoryError(f"history {self.target.shown()}: PostgreSQL needs psycopg; "
                                   "pip install 'pytest-specperf[postgres]'") from None
            return psycopg.connect(self.target.url, connect_timeout=max(1, int(self.timeout)), autocommit=True)
        assert self.target.path is not None
        if sqlite_too_old(sqlite3.sqlite_version_info):
            raise HistoryError(f"history {self.target.path}: this Python's SQLite is {sqlite3.sqlite_version}, and the "
                               f"history needs {'.'.join(map(str, MIN_SQLITE))} or later (INSERT ... RETURNING); use a "
                               "Python built with a newer SQLite, or a postgresql:// history")
        if self.target.path.is_dir():
            raise HistoryError(f"history {self.target.path} is a folder; give a file name, e.g. "
                               f"{self.target.path / 'history.sqlite'}")
        self.target.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are opened explicitly (BEGIN IMMEDIATE takes the write lock at once,
        # so two writers queue instead of one failing on a lock upgrade).
        conn = sqlite3.connect(self.target.path, timeout=self.timeout, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def error(self, what: str, exc: BaseException) -> HistoryError:
        """A one-line HistoryError naming the target, what failed and the fix (one already made is kept)."""
        if isinstance(exc, HistoryError):
            return exc
        text = _one_line(exc)
        low = text.lower()
        if "locked" in low or "lock timeout" in low:
            fix = "another process holds the database; retry, or give a separate --specperf-history file"
        elif "not a database" in low or "malformed" in low or "file is encrypted" in low:
            fix = "the file is not a usable SQLite database; move it aside (a new history starts) or give another"
        elif self.target.url is not None:
            fix = "check that the server is up and the URL, user and password are right"
        else:
            fix = "check the path and its permissions"
        return HistoryError(f"history {self.target.shown()}: {what} ({text}); {fix}")

    def sql(self, query: str) -> str:
        """A query written with ``?`` placeholders, in this driver's style."""
        return query.replace("?", "%s") if self.dialect == "postgres" else query

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction (SQLite: the write lock taken at once); rolled back on any error."""
        cur = self.conn.cursor()
        try:
            self._begin(cur)
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                cur.execute("ROLLBACK")
            raise
        finally:
            with contextlib.suppress(Exception):
                cur.close()

    def _begin(self, cur: Any) -> None:
        """Open the transaction. SQLite's wait for another writer's lock runs in C, deaf to signals, for up to
        ``timeout``: it is waited in slices of LOCK_POLL_S, and a run asked to stop (Ctrl-C, SIGTERM) gives up
        STOPPING_WAIT_S later."""
        if self.dialect != "sqlite":
            cur.execute("BEGIN")
            return
        deadline = time.monotonic() + self.timeout
        stop_by: float | None = None
        self.conn.execute(f"PRAGMA busy_timeout = {round(1000 * min(LOCK_POLL_S, self.timeout))}")
        try:
            while True:
                try:
                    cur.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc).lower() or time.monotonic() >= deadline:
                        raise
                    if stop_by is None and stopping.requested():
                        stop_by = time.monotonic() + STOPPING_WAIT_S
                    if stop_by is not None and time.monotonic() >= stop_by:
                        raise HistoryError(f"history {self.target.shown()}: not written, the run was interrupted "
                                           "while another process held the database; add the run later from its "
                                           "saved run (--specperf-save) with 'specperf history --import'") from None
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {round(1000 * self.timeout)}")

    def execute(self, cur: Any, query: str, params: Sequence[Any] = ()) -> Any:
        """Run one ``?``-style query on ``cur``."""
        cur.execute(self.sql(query), tuple(params))
        return cur

    def query(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """All rows of one read query (outside any write transaction)."""
        cur = self.conn.cursor()
        try:
            cur.execute(self.sql(query), tuple(params))
            return list(cur.fetchall())
        finally:
            cur.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
