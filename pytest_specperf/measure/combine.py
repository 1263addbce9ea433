"""An arm's (or a case's) trials combined into one record of their kind: medians of the figures, every stream and
sample kept, the worst verdict with each distinct reason, each trial's compared figures in ``trials``. What the
measuring loops (``repeats``, ``interleaved``) hand the judging (``compare.gates``) as the case's row."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from pytest_specperf.cases.figures import CASE_TRIAL_METRICS, figure, rows_of, trial_figures
from pytest_specperf.cases.json_form import OMIT
from pytest_specperf.cases.result_parts import CategoryFigures, LevelTrial
from pytest_specperf.cases.results import (
    AbSummary,
    CapacityResult,
    LoadLevel,
    LoadSweepResult,
    RateResult,
    Result,
    SustainedResult,
)
from pytest_specperf.compare import categories, samples

_T = TypeVar("_T", SustainedResult, LoadLevel)
_R = TypeVar("_R", bound=Result)


#: Scalar figures an A/B row shows as the median over an arm's trials.
AGGREGATED = ("decode_tps", "client_tps", "ttft_s", "total_s", "early_tps", "late_tps", "drift", "tokens_per_chunk",
              "burst_tps", "burst_gap", "t_short_s", "t_long_s", "prompt_tokens", "completion_tokens")


def _json_fields(record: object) -> list[str]:
    """The fields of ``record`` its JSON carries, in order: an optional field (``OMIT``) only while it is set."""
    return [f.name for f in dataclasses.fields(record)  # type: ignore[arg-type]  # every caller passes a record
            if getattr(record, f.name) is not None or not all(f.metadata.get(k) for k in OMIT)]


@functools.cache
def _optional(cls: Hashable) -> dict[str, bool]:
    """A record class's fields, each with whether its JSON leaves it out while None (``OMIT``)."""
    return {f.name: all(f.metadata.get(k) for k in OMIT)
            for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # every caller passes a record's class


def _carries(records: Iterable[object], key: str) -> bool:
    """Whether any of ``records`` carries the field ``key`` in its JSON (what the combine rules go by); as
    ``_json_fields``, without listing every field for each key (seeded simulations combine thousands of rows)."""
    for r in records:
        optional = _optional(cast(Hashable, type(r)))
        if key in optional and (getattr(r, key) is not None or not optional[key]):
            return True
    return False


def aggregate(trials: Sequence[_R], arm: str | None = None) -> _R:
    """One row for several trials of a case: medians of the figures, every stream and sample kept, the worst
    verdict with every distinct reason. A load sweep's level rows combine every trial the same way
    (``combine_levels``); a load case keeps each trial's figures in ``trials``, its streams say their trial.
    ``arm`` names the arm the trials measured in the reasons that say which trial gave them. The row is a record
    of the trials' kind, its other fields the last trial's."""
    changes: dict[str, Any] = {}  # the fields that differ from the last trial's
    for key in AGGREGATED:
        values = [v for r in trials for v in [getattr(r, key, None)] if isinstance(v, int | float)
                  and not isinstance(v, bool)]
        if values:
            changes[key] = float(np.median(values))
    for key in ("streams", "samples_tps", "server_samples_tps", "warnings", "notes"):
        if _carries(trials, key):
            changes[key] = [x for r in trials for x in getattr(r, key, None) or []]
    for key in ("warnings", "notes"):  # said once for the row, however many trials said it
        if key in changes:
            changes[key] = list(dict.fromkeys(changes[key]))
    if any(r.verdict == "failed" for r in trials):
        changes["verdict"] = "failed"
    changes["reason"] = "; ".join(dict.fromkeys(r.reason for r in trials if r.reason))
    if hasattr(trials[-1], "repeat"):  # every kind's trials count
        changes["repeat"] = sum(int(getattr(r, "repeat", None) or 1) for r in trials)
    changes["started_at"] = min(r.started_at for r in trials)
    kept = CASE_TRIAL_METRICS.get(trials[-1].kind)
    if kept and len(trials) > 1:  # a rate case or a session: each trial's compared figures, the row their medians
        figures = [{m: _number(getattr(r, m, None)) for m in kept} for r in trials]
        # a replay's trials keep their answered rows: comparisons take both sides' figures over the same rows
        changes["trials"] = [LevelTrial(**f, rows=rows_of(r)) for f, r in zip(figures, trials, strict=True)]
        for m in kept:
            present = [v for f in figures if (v := f[m]) is not None]
            if present:
                changes[m] = float(np.median(present))
    out = dataclasses.replace(trials[-1], **changes)
    if len(trials) > 1 and samples.is_load(out):
        if isinstance(out, LoadSweepResult):
            out.levels = combine_levels([r for r in trials if isinstance(r, LoadSweepResult)], arm)
            totals = [t for t in (lv.total_tps for lv in out.levels) if t is not None and _number(t) is not None]
            out.total_tps = max(totals) if totals else None  # the best level, as for one trial
        elif isinstance(out, SustainedResult):
            load = _combined_load(out, list(enumerate(t for t in trials if isinstance(t, SustainedResult))), arm)
            return cast(_R, load)  # a SustainedResult, as the trials are
    return out


#: Per-level figures a combined level row shows as the median over trials (counts are summed).
LEVEL_MEDIANS = ("prompt_tokens", "completion_tokens", "decode_tps", "decode_p10_tps", "total_tps", "common_window_s",
                 "ttft_s", "ttft_p50_s", "ttft_p90_s", "step_ms", "drift", "early_tps", "late_tps",
                 "tokens_per_chunk", "accept_len")
_SEVERITY = {"error": 3, "failed": 2, "inconclusive": 1}


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
        return None
    return float(v)


#: The drift figures a row shows from the trial whose drift verdict decided it, so the row and its reason agree.
DRIFT_FIELDS = ("drift", "early_tps", "late_tps", "drift_gate", "drift_verdict")


def _combined_load(base: _T, entries: list[tuple[int, _T]], arm: str | None = None) -> _T:
    """``base`` with the fields of one load row (a level, or a sustained load case) over trials ``(index, row)``:
    medians, summed stalls, every stream tagged with its trial, the worst verdict with each distinct reason (and
    which arm and trial gave it), and each trial's own figures in ``trials``. Where a trial's drift failed or was
    inconclusive the row shows that trial's drift (the worst), not the median of all: one level, one drift."""
    n = len(entries)
    rows = [row for _, row in entries]
    changes: dict[str, Any] = {"verdict": max(rows, key=lambda r: _SEVERITY.get(r.verdict, 0)).verdict}
    for key in LEVEL_MEDIANS:
        values = [x for row in rows for x in [_number(getattr(row, key, None))] if x is not None]
        if _carries(rows, key):
            changes[key] = float(np.median(values)) if values else None
    bad = ("failed", "inconclusive")
    drifted = [row for row in rows if row.drift_verdict in bad]
    if drifted:
        def severity(r: _T) -> tuple[int, float]:
            return _SEVERITY.get(r.drift_verdict, 0), _number(r.drift) or 0.0

        decided = max(drifted, key=severity)
        changes.update({key: getattr(decided, key) for key in DRIFT_FIELDS})
    for key in ("stalls", "stall_s"):
        if _carries(rows, key):
            changes[key] = sum(_number(getattr(row, key, None)) or 0 for row in rows)
    changes["streams"] = [dataclasses.replace(s, trial=i) for i, row in entries for s in row.streams]
    for key in ("warnings", "notes"):
        changes[key] = list(dict.fromkeys(x for row in rows for x in getattr(row, key) or []))
    who = f"arm {arm}, " if arm else ""
    changes["reason"] = "; ".join(dict.fromkeys(f"{who}trial {i + 1} of {n}: {row.reason}" for i, row in entries
                                                if row.reason))
    changes["trials"] = [LevelTrial(**cast(dict[str, Any], trial_figures(row)[0])) for row in rows]
    return dataclasses.replace(base, **changes)


def combine_levels(trials: Sequence[LoadSweepResult], arm: str | None = None) -> list[LoadLevel]:
    """A load sweep's level rows over every trial, in the sweep's order: each shows what all trials measured
    (medians), under the worst of their verdicts, never one trial's figures under another's verdict."""
    by_users: dict[int, list[tuple[int, LoadLevel]]] = {}
    for i, r in enumerate(trials):
        for lv in r.levels:
            by_users.setdefault(lv.concurrency, []).append((i, lv))
    return [_combined_load(max((lv for _, lv in entries), key=lambda lv: _SEVERITY.get(lv.verdict, 0)), entries, arm)
            for entries in by_users.values()]


#: Figures a combined row shows per category as the median over an arm's trials.
MEDIANS = ("decode_tps_p50", "decode_tps_p10", "ttft_p50_s", "accept_len", "accept_rate", "drift",
           "prompt_tokens_p50", "attainment")


def _carried(figures: CategoryFigures, key: str) -> bool:
    """Whether ``figures`` carries ``key`` in its JSON (an optional figure, ``OMIT``, only while it is set)."""
    f = next(f for f in dataclasses.fields(figures) if f.name == key)
    return getattr(figures, key) is not None or not all(f.metadata.get(k) for k in OMIT)


def combine_categories(arm: Sequence[Result]) -> dict[str, CategoryFigures] | None:
    """One arm's categories over its trials: counts summed, figures the median over trials."""
    rows = [c for r in arm if (c := categories.categories_of(r)) is not None]
    if not rows:
        return None
    out: dict[str, CategoryFigures] = {}
    for cat in dict.fromkeys(c for row in rows for c in row):  # a category's name is data: a key
        got = [f for row in rows if isinstance(f := row.get(cat), CategoryFigures)]
        changes: dict[str, Any] = {"n": sum(int(g.n or 0) for g in got), "trials": len(got)}
        for key in MEDIANS:
            if not any(_carried(g, key) for g in got):
                continue  # a figure no trial has (an open-loop one of a closed-loop case): the record leaves it out
            values = [v for g in got for v in [getattr(g, key)]
                      if isinstance(v, int | float) and not isinstance(v, bool)]
            changes[key] = float(np.median(values)) if values else None
        out[cat] = dataclasses.replace(got[-1], **changes)
    return out


def ab_row(arms: dict[str, list[Result]]) -> Result:
    """B's row of an A/B case: its trials combined (``aggregate``), A's combined figures in ``ab``, and B's
    categories over its trials (what ``gates.ab_summary`` judges)."""
    summary = aggregate(arms["B"], arm="B")
    a_row = aggregate(arms["A"], arm="A")
    # ``a`` stays a mapping of scalars on purpose: A's aggregated figures under B's field names, whichever kind
    summary.ab = AbSummary(trials=len(arms["B"]), a_endpoint=arms["A"][0].endpoint, b_endpoint=summary.endpoint,
                           a={k: getattr(a_row, k) for k in _json_fields(a_row) if k in AGGREGATED},
                           a_decode_tps=[v for r in arms["A"] for v in [figure(r, "decode_tps")] if v is not None],
                           b_decode_tps=[v for r in arms["B"] for v in [figure(r, "decode_tps")] if v is not None])
    if isinstance(summary, LoadSweepResult) and isinstance(a_row, LoadSweepResult):
        summary.ab.a_levels = a_row.levels  # A's rows, every trial (the speedups' divisor)
    combined = combine_categories(arms["B"])
    if combined is not None and isinstance(summary, SustainedResult | LoadSweepResult | RateResult | CapacityResult):
        summary.categories = combined
    return summary
