"""The history store's databases: a SQLite file per test, and one PostgreSQL server for the session (a fresh
database per test), started from Debian's package as its users start it (tests/support/postgres.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.postgres import Cluster, cluster

from pytest_specperf.storage.store import Target


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    with cluster() as running:
        yield running


@pytest.fixture
def pg_url(postgres: Cluster) -> str:
    """A new, empty database on the session's server."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres.url_for(name)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """An empty history on each database."""
    if request.param == "sqlite":
        return Target(path=tmp_path / "history.sqlite")
    return Target(url=request.getfixturevalue("pg_url"))
