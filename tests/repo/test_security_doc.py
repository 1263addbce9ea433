"""docs/security.md names every field a saved run and a history row take from the user's machine, checkout and CI.

The fields are read from what the code writes (a run saved into a temporary folder, the history's own tables),
not from a list kept beside the doc: a field added to either without a line in the doc fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage import schema
from pytest_specperf.storage.store import Store, Target

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")


def named(name: str) -> bool:
    return f"`{name}`" in DOC


def test_every_field_of_a_saved_run_is_in_the_security_doc(tmp_path: Path) -> None:
    path = storage.save_run(tmp_path, [], storage.run_meta(endpoint="http://host:8000"), "main", root=ROOT)
    doc = json.loads(path.read_text())
    top = set(doc) - {"format", "version", "results", "meta"}  # the file's own format and the results
    missing = [k for k in sorted(top) if not named(k)]
    missing += [f"commit.{k}" for k in sorted({*doc["commit"], "error"}) if not named(f"commit.{k}")]
    missing += [f"machine: {k}" for k in sorted(doc["machine"]) if not named(k)]
    missing += [f"job: {k}" for k in storage.JOB_ENV if not named(k)]
    assert named("meta.run")
    assert missing == [], f"docs/security.md does not name {missing}"


def test_every_column_of_the_history_is_in_the_security_doc(tmp_path: Path) -> None:
    with schema.open_store(Store(Target(path=tmp_path / "h.sqlite"))) as store:
        tables = [t for (t,) in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                   "AND name NOT LIKE 'sqlite_%' AND name != 'specperf_schema'")]
        columns = {t: [c[1] for c in store.conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    assert {"runs", "cases", "results", "trials"} <= set(columns)
    missing = [t for t in columns if not named(t)]
    # ids and the links between tables are the database's own; every other column is named
    missing += [f"{t}.{c}" for t, cs in columns.items() for c in cs
                if c not in ("id", "run_id", "case_id", "result", "trial", "value", "metric") and not named(c)]
    assert missing == [], f"docs/security.md does not name {missing}"
