"""Saved JSON runs (``--specperf-save`` files, ``storage/saved_runs.py``'s format) into the history.

Never imports pytest. Each file is imported once: its content hash is the run's ``source``, so importing a
folder again (or a copy of a file) adds nothing. Files that cannot be read are skipped with their reason, the
way ``storage.load_run`` names them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pytest_specperf.errors import ConfigError
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage.records import record_run
from pytest_specperf.storage.store import Store


def run_meta(run: storage.Run) -> dict[str, Any]:
    """A loaded run's metadata in the shape ``record_run`` takes."""
    return {"created": run.created, "name": run.name or run.label, "commit": run.commit, "model": run.model,
            "server": run.server, "server_version": run.server_version, "plugin_version": run.plugin_version,
            "machine": run.machine, "job": run.job, "partial": run.partial}


def import_runs(store: Store, paths: list[Path]) -> tuple[list[str], list[str]]:
    """Import run files in the order given (oldest first); returns (imported labels, 'label: why' skipped)."""
    done: list[str] = []
    skipped: list[str] = []
    for path in paths:
        run, reason = storage.read_run(path)
        if run is None:
            why = reason.split(": ", 2)[-1]
            skipped.append(f"{path.name}: {why}")
            continue
        source = "json:" + hashlib.sha256(path.read_bytes()).hexdigest()[:24]
        try:
            recorded = run.typed_results()
        except ConfigError as exc:  # a kind no version of the plugin wrote: named, the other files imported
            skipped.append(f"{path.name}: {exc}")
            continue
        if record_run(store, recorded, run_meta(run), source=source) is None:
            skipped.append(f"{path.name}: already in the history")
        else:
            done.append(run.label)
    return done, skipped


def import_folder(store: Store, folder: Path) -> tuple[list[str], list[str]]:
    """Every saved run of ``folder`` (by counter, oldest first)."""
    return import_runs(store, storage.list_runs(folder))
