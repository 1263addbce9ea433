"""One side of a comparison as the rules read it: each unit's trial values, read from the records once.

Pure. ``per_trial`` turns results into what comparisons count as trials (a load case's trials, not its streams);
``Side.of`` reads every compared figure of every unit (``(nodeid, ctx, users)``: a case, a sweep point, a load
level) through ``cases.figures`` once, so the rules after it (``trials``, ``sequential``, ``verdicts``, ``cause``)
read values and never a record's figure by name again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from pytest_specperf.cases import figures
from pytest_specperf.cases.figures import CASE_TRIAL_METRICS, DIRECTIONS, Case
from pytest_specperf.cases.result_parts import RowFigures
from pytest_specperf.cases.results import (
    ErrorRecord,
    LoadLevel,
    LoadSweepResult,
    RateResult,
    Recorded,
    ReplayResult,
    Result,
    SessionResult,
    SustainedResult,
)

_T = TypeVar("_T", SustainedResult, LoadLevel)

#: a unit of a comparison: (nodeid, sweep ctx, load level's users)
Key = tuple[str, int | None, int | None]


def is_load(result: Case) -> bool:
    """A load sweep, or a sustained case whose streams ran at once (concurrency > 1)."""
    return isinstance(result, LoadSweepResult) or (isinstance(result, SustainedResult) and result.concurrency > 1)


def _one_typed_trial(case: _T, values: dict[str, float | None]) -> _T:
    """A result or level as one of its trials: that trial's figures, no streams or trials left."""
    changes: dict[str, Any] = {"streams": [], "trials": None, **values}
    return dataclasses.replace(case, **changes)


def _per_typed_trial(r: Result) -> list[Result]:
    """``per_trial`` of one typed load result (a sustained load case, or a load sweep)."""
    if isinstance(r, LoadSweepResult):
        levels = [(lv, figures.trial_figures(lv)) for lv in r.levels if isinstance(lv, LoadLevel)]
        return [dataclasses.replace(r, levels=[_one_typed_trial(lv, f[i]) for lv, f in levels if i < len(f)])
                for i in range(max((len(f) for _, f in levels), default=1))]
    if isinstance(r, SustainedResult):
        return [_one_typed_trial(r, f) for f in figures.trial_figures(r)]
    return [r]


def per_trial(results: Sequence[Recorded]) -> list[Recorded]:
    """Results as comparisons see them: a load case gives one value per trial per level (that trial's median
    user, its aggregate), not one per stream, since the streams of one trial share the engine's batched steps.

    A row that combines trials (an A/B arm, ``aggregate``) becomes one result per trial; other results
    pass unchanged (a sustained case's sequential streams are its trials, an error record is plain data).
    """
    out: list[Recorded] = []
    for r in results:
        if isinstance(r, Result) and r.verdict != "error" and is_load(r) and r.kind in ("sustained", "load_sweep"):
            out += _per_typed_trial(r)
        elif isinstance(r, RateResult | SessionResult) and r.verdict != "error" and r.trials:
            # each trial as a result of its own, its compared figures as that trial measured them
            for t in r.trials:
                values: dict[str, Any] = {m: figures.figure(t, m) for m in CASE_TRIAL_METRICS[r.kind]}
                if isinstance(r, ReplayResult):  # and its answered rows ([]: a row saved before trials kept them)
                    values["row_figures"] = t.rows or []
                out.append(dataclasses.replace(r, trials=None, **values))
        else:
            out.append(r)
    return out


@dataclass
class Entry:
    """One unit of a side: its records (a case per trial or repeat), each compared metric's values over them (every
    finite value, as ``figures.trials`` gives it), and each metric's positive stream values by prompt, kept only
    while every stream names its prompt (a case over a prompt file: ``prompted``)."""

    cases: list[Case] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)
    medians: dict[str, float] = field(default_factory=dict)  # each metric's median over ``values``, where it has any
    by_prompt: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    prompted: bool = True
    rows: list[list[RowFigures]] = field(default_factory=list)  # per case, a replay trial's answered rows
    rowed: bool = True  # every case so far kept its rows

    def add(self, case: Case) -> None:
        self.cases.append(case)
        for m in DIRECTIONS:
            self.values.setdefault(m, []).extend(figures.trials(case, m))
        answered = figures.rows_of(case)
        if answered:
            self.rows.append(answered)
        else:
            self.rowed = False
        for st in case.streams if isinstance(case, SustainedResult | LoadLevel) else []:
            if not st.prompt_id:
                self.prompted = False
            if not self.prompted or not st.prompt_id:
                continue
            for m in DIRECTIONS:
                v = figures.figure(st, m)
                if v is not None and v > 0:
                    self.by_prompt.setdefault(m, {}).setdefault(st.prompt_id, []).append(v)

    def trial_rows(self) -> list[list[RowFigures]] | None:
        """Each trial's answered rows; None unless every case of the unit is a replay trial that kept them."""
        return self.rows if self.rowed and self.rows else None

    def prompts(self, metric: str) -> dict[str, list[float]] | None:
        """``metric``'s stream values by prompt; None unless every stream names its prompt and one has a value."""
        return (self.by_prompt.get(metric) or None) if self.prompted else None


@dataclass
class Side:
    """One side of a comparison (a baseline, A, B, a run): its results, and what the rules read of them."""

    results: list[Case]
    entries: dict[Key, Entry]
    errors: dict[str, str]  # errored nodeids and their reasons
    text_keys: list[str | None]  # per trial, in order, the hash of its prompt and text (``text_sha``)
    cached_share: float | None  # the median over the results of the server's cached share of the prompt
    ttft_cache: str  # the first result's note that its cold requests came back cached, if any
    temperatures: set[float]

    def cases(self, key: Key) -> list[Case]:
        """The unit's records (error records left out); [] for a unit the side lacks."""
        entry = self.entries.get(key)
        return entry.cases if entry is not None else []

    @classmethod
    def of(cls, results: Iterable[Case]) -> Side:
        """The side made of ``results`` as given (``per_trial`` first where load rows count by trial)."""
        rs = list(results)
        entries: dict[Key, Entry] = {}
        errors: dict[str, str] = {}
        for r in rs:
            if isinstance(r, ErrorRecord) or (isinstance(r, Result) and r.verdict == "error"):
                errors.setdefault(r.nodeid, r.reason or "error")
                continue
            for nodeid, ctx, case in figures.sub_cases(r):
                entries.setdefault((nodeid, ctx, figures.users_of(case)), Entry()).add(case)
        for entry in entries.values():
            entry.medians = {m: float(np.median(v)) for m, v in entry.values.items() if v}
        shares = [v for r in rs for v in [figures.figure(r, "cached_share")] if v is not None]
        return cls(
            results=rs, entries=entries, errors=errors,
            text_keys=text_keys(rs),
            cached_share=float(np.median(shares)) if shares else None,
            ttft_cache=next((r.ttft_cache for r in rs if isinstance(r, Result) and r.ttft_cache), ""),
            temperatures={r.temperature if isinstance(r, Result) else 0.0 for r in rs})


def text_keys(results: Sequence[Case]) -> list[str | None]:
    """Per trial, in order, the hash of its prompt and generated text (``text_sha``); [] without streams."""
    return [s.text_sha for r in results if isinstance(r, SustainedResult) for s in r.streams]


def sides(base: Sequence[Recorded], cand: Sequence[Recorded]) -> tuple[Side, Side]:
    """Both sides of a comparison, each as its trials (``per_trial``)."""
    return Side.of(per_trial(base)), Side.of(per_trial(cand))
