"""``--specperf-bencher``: the results in Bencher Metric Format (``bencher run --adapter json``).

``{benchmark: {measure: {"value", "lower_value", "upper_value"}}}``; benchmark = nodeid (``nodeid@ctx=N`` for
sweep points, ``@users=N`` for load levels), measures ``MEASURES`` (``decode-tps``, ``ttft-s``, ``drift``, ...);
value = the result's figure, lower/upper = the smallest/largest trial when there are several (a load level's trials,
not its users: the streams of one trial ran at once and share its steps). Errored cases are left out. Never imports
pytest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_specperf.cases.result_parts import case_key
from pytest_specperf.compare.crossover import TRIAL_METRICS, trial_figures
from pytest_specperf.compare.trials import sub_cases, trials
from pytest_specperf.files import write_text_atomic
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.report.table import finite_number as _num

#: result field -> Bencher measure slug
MEASURES = {
    "decode_tps": "decode-tps",
    "ttft_s": "ttft-s",
    "client_tps": "client-tps",
    "early_tps": "early-tps",
    "late_tps": "late-tps",
    "burst_tps": "burst-tps",
    "drift": "drift",
    "total_tps": "total-tps",
    "decode_p10_tps": "decode-p10-tps",
}


def _measure(value: float | None, values: list[float]) -> dict[str, float] | None:
    if value is None:
        if not values:
            return None
        value = float(np.median(values))
    out = {"value": value}
    if len(values) >= 2:
        out["lower_value"] = min(min(values), value)
        out["upper_value"] = max(max(values), value)
    return out


def _trial_values(case: dict[str, Any], metric: str) -> list[float]:
    """The values whose spread the bounds show: one per trial."""
    users = case.get("users", case.get("concurrency"))
    if isinstance(users, int) and not isinstance(users, bool) and users > 1:
        if metric not in TRIAL_METRICS:
            return []  # a trial's own figure is kept only for these; its users' spread is not a trial's
        return [v for f in trial_figures(case) for v in [f.get(metric)] if v is not None]
    return trials(case, metric)


def bencher_json(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Results in Bencher Metric Format (``bencher run --adapter json``)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in results:
        if r.get("verdict") == "error":
            continue
        for nodeid, ctx, case in sub_cases(r):
            measures = {}
            for fieldname, slug in MEASURES.items():
                m = _measure(_num(case.get(fieldname)), _trial_values(case, fieldname))
                if m is not None:
                    measures[slug] = m
            if measures:
                out.setdefault(case_key(nodeid, ctx, case.get("users")), {}).update(measures)
    return out


class BencherFile(Output):
    """``--specperf-bencher``: Bencher Metric Format JSON."""

    name = "bencher"
    option = "--specperf-bencher"
    setting = "bencher"

    def write(self, results: list[dict[str, Any]], meta: Meta, path: Path) -> None:
        """Write the Bencher JSON (atomically)."""
        write_text_atomic(path, json.dumps(bencher_json(results), indent=2))
