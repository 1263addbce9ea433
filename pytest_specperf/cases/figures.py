"""A result's figures as every reader takes them: by a metric's name (``figure``, the one read by a name held in a
variable), per comparable unit (``sub_cases``: the case, a load level, a sweep point) and per trial (``trials``,
``trial_figures``), and which metrics each kind is compared on (``metrics_for``). Judging (``compare/``), the
history and the outputs read figures through these alone, so none recomputes them its own way and no output imports
a judging rule.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_specperf.cases.result_parts import LevelTrial, RowFigures, SweepPoint
from pytest_specperf.cases.results import (
    ErrorRecord,
    LoadLevel,
    LoadSweepResult,
    RateResult,
    ReplayResult,
    Result,
    SessionResult,
    StreamResult,
    SustainedResult,
    SweepResult,
    TwoPointResult,
)

#: which way is better, per metric; all are positive quantities, compared as logs.
DIRECTIONS: dict[str, str] = {
    "decode_tps": "higher",
    "client_tps": "higher",
    "early_tps": "higher",
    "late_tps": "higher",
    "burst_tps": "higher",
    "tokens_per_chunk": "higher",
    "total_tps": "higher",  # load cases: aggregate output tok/s of all users
    "attainment": "higher",  # rate cases: share of requests meeting the slo
    "goodput_rps": "higher",  # rate cases: requests meeting the slo per second
    "max_rps": "higher",  # capacity cases: the highest rate that keeps the attainment target
    "ttft_p90_s": "lower",
    "tpot_p90_ms": "lower",
    "e2e_p90_s": "lower",
    "ttft_s": "lower",
    "total_s": "lower",
}

#: The figures read by their name (``figure``): the compared metrics and the per-trial and per-level figures the
#: A/B, arms and crossover tables and the cause of a change read. tests/repo checks each is a field of the records.
FIGURES: tuple[str, ...] = (*DIRECTIONS, "drift", "decode_p10_tps", "accept_len", "step_ms", "cached_share")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _values(items: Iterable[Any]) -> list[float]:
    return [x for x in (_num(v) for v in items) if x is not None]


#: What the functions below read: a typed result or one of its comparable parts (a load level, a sweep point).
#: JSON (a saved run, the history's rows) becomes one at its edge (``saved_results.load_record``), never here.
Case = Result | ErrorRecord | LoadLevel | SweepPoint


def figure(x: Case | StreamResult | LevelTrial, metric: str) -> float | None:
    """The finite figure ``metric`` (a name of ``FIGURES``) of a case, a load level, a sweep point, a stream or a
    trial; None where it has none. The one read of a figure by its name: every other read is by attribute, and
    tests/repo checks that each name in ``FIGURES`` is a field of the records."""
    if metric not in FIGURES:
        raise ValueError(f"{metric!r} is not a figure read by name; the figures are {', '.join(FIGURES)}")
    return _num(getattr(x, metric, None))


def _has(x: StreamResult, name: str) -> bool:
    """Whether a stream's record has the field ``name`` at all (its value may be None)."""
    return name in {f.name for f in dataclasses.fields(x)}


def _kind(case: Case) -> str:
    # A sweep point's record has no kind: it is a two-point measurement (its JSON has no "streams").
    return "two_point" if isinstance(case, SweepPoint) else case.kind


def users_of(case: Case) -> int | None:
    """The users of a sub-case from ``sub_cases``: a load level's concurrency, a session's users; else None."""
    if isinstance(case, LoadLevel):
        return case.concurrency
    if isinstance(case, SessionResult):
        return case.users
    return None


def trials(result: Case, metric: str) -> list[float]:
    """Per-trial finite values of ``metric`` (see the module docstring); [] when there are none."""
    kind = _kind(result)
    if kind == "ctx_sweep":
        return []
    if isinstance(result, SustainedResult | LoadLevel) and result.streams and _has(result.streams[0], metric):
        values = _values(figure(s, metric) for s in result.streams)
        if values:  # else the case's own figure, where its streams have none
            return values
    if kind == "two_point" and metric == "decode_tps" and isinstance(result, TwoPointResult | SweepPoint) \
            and result.samples_tps:
        return _values(result.samples_tps)
    return _values([figure(result, metric)])


def sub_cases(result: Case) -> list[tuple[str, int | None, Case]]:
    """``(nodeid, ctx, case)`` per comparable unit: the case itself, or each point of a sweep: a load sweep's
    ``LoadLevel`` (its ``users_of`` is its concurrency), a context sweep's ``SweepPoint`` (read as two-point)."""
    if isinstance(result, LoadSweepResult):
        return [(result.nodeid, None, lv if lv.kind == "sustained" else dataclasses.replace(lv, kind="sustained"))
                for lv in result.levels]
    if isinstance(result, SweepResult):
        return [(result.nodeid, p.ctx, p) for p in result.points]
    if isinstance(result, Result | ErrorRecord):
        return [(result.nodeid, None, result)]
    return [("", None, result)]


#: Figures a load trial gives per level, one value each (the ones comparisons judge).
TRIAL_METRICS = ("decode_tps", "ttft_s", "total_tps")


def _positive(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


def _stream_median(case: Case, metric: str) -> float | None:
    streams = case.streams if isinstance(case, SustainedResult | LoadLevel) else []
    values = [x for s in streams for x in [_positive(figure(s, metric))] if x is not None]
    return float(np.median(values)) if values else None


def trial_figures(case: Case) -> list[dict[str, float | None]]:
    """One dict of ``TRIAL_METRICS`` per trial of a load level or ``sustained(concurrency=N)`` result.

    A row that combines trials carries them in ``trials``; a single trial gives its own figures: the
    median user (the row's ``decode_tps``, ``ttft_s``; from its streams when the row lacks them) and the
    aggregate ``total_tps``. A value that was not measured is None.
    """
    rows = case.trials if isinstance(case, SustainedResult | LoadLevel | RateResult | SessionResult) else None
    if rows is not None:
        return [{m: _positive(figure(t, m)) for m in TRIAL_METRICS} for t in rows]
    out: dict[str, float | None] = {}
    for m in TRIAL_METRICS:
        own = _positive(figure(case, m))
        out[m] = own if own is not None or m == "total_tps" else _stream_median(case, m)
    return [out]


def answered_rows(result: ReplayResult) -> list[RowFigures]:
    """A replay's answered rows (HTTP 200) with the per-request figures its latencies are percentiles of."""
    return [RowFigures(r.row, r.ttft_s, r.tpot_ms, r.e2e_s, r.decode_tps) for r in result.per_request
            if r.status == 200]


def rows_of(case: Case) -> list[RowFigures] | None:
    """One trial's answered rows: a replay trial's (``row_figures`` where the record is one trial of several, else
    its own requests while it combines none); None for any other case, or a row that still combines trials."""
    if not isinstance(case, ReplayResult):
        return None
    if case.row_figures is not None:
        return case.row_figures
    return answered_rows(case) if not case.trials else None


def trial_rows(case: Case) -> list[list[RowFigures]] | None:
    """Each trial's answered rows of a replay (one trial, or each of ``trials``); None for any other case, or a row
    saved before its trials kept their rows."""
    if not isinstance(case, ReplayResult):
        return None
    if not case.trials:
        one = rows_of(case)
        return [one] if one else None
    kept = [t.rows for t in case.trials]
    return [r for r in kept if r] if all(kept) else None


#: The compared figures that are percentiles of a per-request figure: metric -> (that figure, the percentile).
ROW_METRICS: dict[str, tuple[Callable[[RowFigures], float | None], float]] = {
    "ttft_s": (lambda r: r.ttft_s, 50),
    "ttft_p90_s": (lambda r: r.ttft_s, 90),
    "tpot_p90_ms": (lambda r: r.tpot_ms, 90),
    "e2e_p90_s": (lambda r: r.e2e_s, 90),
    "decode_tps": (lambda r: r.decode_tps, 50),
}


@dataclass(frozen=True)
class SharedRows:
    """``metric`` per trial of each group of trials, over the rows that every trial of every group answered."""

    values: list[list[float]]  # per group, per trial
    rows: int  # rows shared
    left_out: int  # rows some trial answered that another did not

    @property
    def note(self) -> str:
        """What a comparison's reason says of it."""
        out = f" (over the {self.rows} trace rows every trial of both sides answered"
        return out + (f"; {self.left_out} answered only on some left out)" if self.left_out else ")")


def over_shared_rows(groups: Sequence[Sequence[Sequence[RowFigures]]], metric: str,
                     min_rows: int = 2) -> SharedRows | None:
    """``metric`` per trial over the trace rows that every trial of every group (a side's trials, a run's) answered
    with a value; None where it is not a percentile of a per-request figure or fewer than ``min_rows`` are shared.

    Every trial of a replay sends the same rows, but a side may answer fewer: a server with a shorter context is not
    sent the long rows (``not_sent``), one under strain refuses or fails some. Its percentiles are then over a
    lighter mix, and a lost 14,000-token row reads as a faster TTFT. Over the shared rows both sides are judged on
    the same requests, and the trials stay the units (a trial's requests share its minute of load)."""
    rule = ROW_METRICS.get(metric)
    if rule is None or not groups:
        return None
    value, q = rule
    tables = [[{r.row: v for r in trial if (v := value(r)) is not None and math.isfinite(v) and v > 0}
               for trial in group] for group in groups]
    every_trial = [t for group in tables for t in group]
    common = sorted(set.intersection(*(set(t) for t in every_trial)))
    if len(common) < min_rows:
        return None
    every = set.union(*(set(t) for t in every_trial))
    return SharedRows([[float(np.percentile([t[k] for k in common], q)) for t in group] for group in tables],
                      len(common), len(every) - len(common))


@dataclass(frozen=True)
class SharedTrials:
    """A replay's latency trials over the trace rows this run and its earlier runs all answered: this run's, each
    earlier run's (by metric), and what to say of it ("" where no row was left out)."""

    now: dict[str, list[float]]
    before: list[dict[str, list[float]]]
    note: str


def shared_trials(now: Sequence[Sequence[RowFigures]], before: Sequence[Sequence[Sequence[RowFigures]] | None],
                  trials: dict[str, list[float]]) -> SharedTrials | None:
    """``over_shared_rows`` for each of ``trials``' metrics that is a percentile of a per-request figure, over this
    run's trials' rows (``now``) and each earlier run's (``before``); None where an earlier run did not keep them."""
    if any(b is None for b in before):
        return None
    groups = [now, *(b for b in before if b is not None)]
    out = SharedTrials({}, [{} for _ in before], "")
    left: dict[str, SharedRows] = {}
    for metric in trials:
        shared = over_shared_rows(groups, metric)
        if shared is None:
            continue
        out.now[metric] = shared.values[0]
        for b, values in zip(out.before, shared.values[1:], strict=True):
            b[metric] = values
        if shared.left_out:  # where every run answered every row there is nothing to say
            left[metric] = shared
    if not left:
        return out
    most = max(left.values(), key=lambda x: x.left_out)
    return dataclasses.replace(out, note=f"{', '.join(left)} over the {most.rows} trace rows every trial of this "
                               f"run and its {len(before)} earlier answered ({most.left_out} answered only on some "
                               "left out)")


METRICS = ("decode_tps", "ttft_s", "total_tps")  # total_tps: load cases only
#: Open-loop cases are judged on what they gate (a metric a case lacks is skipped).
KIND_METRICS = {"rate": ("goodput_rps", "attainment", "ttft_p90_s", "tpot_p90_ms", "e2e_p90_s"),
                "capacity": ("max_rps",)}
KIND_METRICS["replay"] = KIND_METRICS["rate"]  # a replay is a rate case over the trace's own arrivals


#: The figures each trial of a rate case or a session keeps (``LevelTrial``) where the case ran several times: the
#: ones it is compared on, so a saved run carries its trial-to-trial noise. Load rows keep ``crossover.TRIAL_METRICS``.
CASE_TRIAL_METRICS = {"rate": (*KIND_METRICS["rate"], "decode_tps", "ttft_s"),
                      "session": ("decode_tps", "ttft_s", "total_tps")}
CASE_TRIAL_METRICS["replay"] = CASE_TRIAL_METRICS["rate"]  # compared as a rate case is (KIND_METRICS)


def metrics_for(result: Case) -> tuple[str, ...]:
    """The metrics compared for a result of this kind."""
    kind = "two_point" if isinstance(result, SweepPoint) else result.kind
    return KIND_METRICS.get(kind, METRICS)
