"""``--specperf-json``: every result with the run's metadata, written atomically after every case.

A reader never sees half of the file (temp file + rename), and a run killed mid-way keeps what it measured.
Never imports pytest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.results import Recorded
from pytest_specperf.files import write_text_atomic
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.version import __version__

FORMAT = "pytest-specperf/1"


def write_json_atomic(path: Path, results: Sequence[Recorded | Mapping[str, Any]], meta: dict[str, Any],
                      redact: Iterable[str] = ()) -> None:
    """Write the results file so that a reader never sees half of it (temp file + rename); a result record is
    written as its JSON (``to_dict``), a result given as JSON (a saved run's) as it is, keys in its order."""
    doc = {"format": FORMAT, "plugin_version": __version__,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **meta,
           "results": [dict(r) if isinstance(r, Mapping) else to_dict(r) for r in results]}
    text = json.dumps(doc, indent=2, sort_keys=False, default=str)
    for secret in redact:
        if secret:
            text = text.replace(secret, "***")
    write_text_atomic(path, text + "\n")


class JsonFile(Output):
    """``--specperf-json``: the results file."""

    name = "json"
    option = "--specperf-json"
    setting = "json_path"
    done = "results written to {path}"
    live = True

    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Write all results so far with the endpoint and the project's run metadata."""
        write_json_atomic(path, results, {"endpoint": meta.endpoint, "run": meta.run}, redact=meta.redact)
