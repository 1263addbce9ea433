"""``--specperf-bencher``: the results in Bencher Metric Format (``bencher run --adapter json``).

``{benchmark: {measure: {"value", "lower_value", "upper_value"}}}``; benchmark = nodeid (``nodeid@ctx=N`` for
sweep points, ``@users=N`` for load levels), measures ``MEASURES`` (``decode-tps``, ``ttft-s``, ``drift``, ...);
value = the result's figure, lower/upper = the smallest/largest trial when there are several (a load level's trials,
not its users: the streams of one trial ran at once and share its steps). Errored cases are left out. Never imports
pytest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_specperf.cases.figures import TRIAL_METRICS, trial_figures, trials
from pytest_specperf.cases.result_parts import SweepPoint, case_key
from pytest_specperf.cases.results import LoadLevel, LoadSweepResult, Recorded, Result, SessionResult, SweepResult
from pytest_specperf.files import write_text_atomic
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.report.table import as_case
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


#: one comparable unit of a result (as ``cases.figures.sub_cases`` splits it): the case, a level or a point
Unit = Result | LoadLevel | SweepPoint


def units(r: Result) -> list[tuple[str, int | None, int | None, Unit]]:
    """``(nodeid, ctx, users, unit)`` per comparable unit: a load sweep's levels, a context sweep's points, else
    the case itself (a session case's users are its sessions at once)."""
    if isinstance(r, LoadSweepResult):
        return [(r.nodeid, None, lv.concurrency, lv) for lv in r.levels]
    if isinstance(r, SweepResult):
        return [(r.nodeid, int(p.ctx), None, p) for p in r.points]
    return [(r.nodeid, None, r.users if isinstance(r, SessionResult) else None, r)]


def _trial_values(unit: Unit, users: int | None, metric: str) -> list[float]:
    """The values whose spread the bounds show: one per trial."""
    if users is None:
        users = getattr(unit, "concurrency", None)
    if isinstance(users, int) and not isinstance(users, bool) and users > 1:
        if metric not in TRIAL_METRICS:
            return []  # a trial's own figure is kept only for these; its users' spread is not a trial's
        return [v for f in trial_figures(unit) for v in [f[metric]] if v is not None]
    return trials(unit, metric)


def bencher_json(results: Iterable[Recorded | Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Results in Bencher Metric Format (``bencher run --adapter json``)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in map(as_case, results):
        if not isinstance(r, Result) or r.verdict == "error":
            continue  # nothing measured
        for nodeid, ctx, users, unit in units(r):
            measures = {}
            for fieldname, slug in MEASURES.items():
                m = _measure(_num(getattr(unit, fieldname, None)), _trial_values(unit, users, fieldname))
                if m is not None:
                    measures[slug] = m
            if measures:
                out.setdefault(case_key(nodeid, ctx, users), {}).update(measures)
    return out


class BencherFile(Output):
    """``--specperf-bencher``: Bencher Metric Format JSON."""

    name = "bencher"
    option = "--specperf-bencher"
    setting = "bencher"

    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Write the Bencher JSON (atomically)."""
        write_text_atomic(path, json.dumps(bencher_json(results), indent=2))
