"""A case's trend as data: its runs with their intervals, the change points and what the next run should show.

Never imports pytest. The same points and change points serve the gate's record on a result
(``against_history.judge`` puts a ``HistoryEntry`` per metric under ``history``, with this run's value) and
``specperf trend CASE`` (a ``MetricTrend`` per metric: the history alone, the prediction for the next run);
``report/views/trend.py`` turns either into charts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pytest_specperf.cases import figures
from pytest_specperf.cases.result_parts import ChangePoint, MetricTrend, TrendPoint, case_key, unit_key
from pytest_specperf.cases.results import ErrorRecord, LoadSweepResult
from pytest_specperf.history import changepoints as cp
from pytest_specperf.history import decide, noise
from pytest_specperf.storage import records
from pytest_specperf.storage.store import Store

#: runs a trend shows (the most recent)
SHOWN = 30


def natural(x: float, direction: str) -> float:
    """An oriented log value back in the metric's own units."""
    return math.exp(-x if direction == "lower" else x)


def run_entry(h: records.CaseRun, logs: np.ndarray, direction: str) -> TrendPoint:
    """One run as a trend point: its geometric mean and the 95 % interval of that mean, in natural units."""
    mean = float(np.mean(logs))
    half = 1.96 * float(np.std(logs, ddof=1)) / math.sqrt(len(logs)) if len(logs) > 1 else 0.0
    lo, hi = sorted((natural(mean - half, direction), natural(mean + half, direction)))
    return TrendPoint(run=h.run_id, commit=h.commit, created=h.created, value=natural(mean, direction), lo=lo, hi=hi)


def change_entry(c: cp.Change, runs: list[records.CaseRun], offset: int, direction: str) -> ChangePoint:
    """A change point with the run it began at (None: this run) and the levels around it."""
    i = offset + c.index
    at = runs[i] if i < len(runs) else None
    return ChangePoint(index=i, run=at.run_id if at else None, commit=at.commit if at else "this run",
                       created=at.created if at else "", before=natural(c.before, direction),
                       after=natural(c.after, direction), effect=c.effect)


def at_first_failure(changes: list[cp.Change], failed: list[bool], means: list[float]) -> list[cp.Change]:
    """The change points, with the runs' history gate verdicts: a stretch of runs that failed their gate began
    where its first run failed (the gate saw it there), so a change point found inside the stretch is moved to
    its start, and a stretch without one gets one there (its levels: the runs before it and the stretch)."""
    out: dict[int, cp.Change] = {}
    starts = [i for i, f in enumerate(failed) if f and (i == 0 or not failed[i - 1])]
    for start in starts:
        end = next((i for i in range(start, len(failed)) if not failed[i]), len(failed))
        inside = [c for c in changes if start <= c.index < end]  # a change at ``end`` is the recovery: kept
        prev = max((c.index for c in changes if c.index < start), default=0)
        if start > prev:
            before, after = float(np.mean(means[prev:start])), float(np.mean(means[start:end]))
            out[start] = cp.Change(start, before, after)
        changes = [c for c in changes if c not in inside]
    for c in changes:
        out.setdefault(c.index, c)
    return [out[i] for i in sorted(out)]


@dataclass
class RunFacts:
    """What ``specperf trend`` says of one run of a unit beside its judged value: the table's figures (as the
    stored result shows them), its verdict and reason, and whether it failed its history gate."""

    verdict: str | None
    reason: str = ""
    held: bool = False
    failed_gate: bool = False
    accepted: str | None = None
    figures: dict[str, float] = field(default_factory=dict)
    failed_metrics: set[str] = field(default_factory=set)  # the metrics it failed its history gate on


def run_facts(store: Store, key: str) -> dict[int, RunFacts]:
    """Per run id of unit ``key``: its facts (``RunFacts``), the figures read from its stored result."""
    out = {}
    for h in records.case_history(store, key):
        facts = RunFacts(h.verdict, held=h.held, failed_gate=h.failed_gate, accepted=h.accepted)
        result = records.record_of(store, h.run_id, h.nodeid)
        if result is not None:
            facts.reason = result.reason
            for n, ctx, case in figures.sub_cases(result):
                users = figures.users_of(case) if isinstance(result, LoadSweepResult) else None
                if case_key(n, ctx, users) == key:
                    facts.figures = {m: v for m in figures.DIRECTIONS if (v := figures.figure(case, m)) is not None}
            if h.failed_gate:  # against its history, or (while that was short) against the latest run
                entries = [] if isinstance(result, ErrorRecord) else result.history or []
                judged = {e.metric for e in entries if e.key == key and e.verdict == "regressed"}
                if not any(e.key == key for e in entries):
                    kept = [] if isinstance(result, ErrorRecord) else result.history_comparisons or []
                    # keyed as the history keys units (a session's comparisons carry its users; its unit does not)
                    judged = {str(c.metric) for c in [*(result.comparisons or []), *kept]
                              if unit_key(result.kind, c.nodeid, c.ctx, c.users) == key and c.verdict == "regressed"}
                facts.failed_metrics = judged
        out[h.run_id] = facts
    return out


def trend(store: Store, key: str, *, alpha: float = 0.005, facts: dict[int, RunFacts] | None = None
          ) -> tuple[list[MetricTrend], list[str]]:
    """Per gated metric of case ``key``: its latest set-up's runs, change points and the interval the next run
    is predicted in; and notes (set-ups kept apart, too few runs). ([], notes) for an unknown case."""
    past = records.case_history(store, key)
    if not past:
        return [], [f"no runs of {key} in the history"]
    fp = past[-1].fingerprint
    # every run of the set-up is shown (those held out after failing their gate too); the prediction is the gate's
    same = [h for h in past if h.fingerprint == fp and not h.partial and h.verdict != "error"]
    judged = {h.run_id for h in records.judged_runs([h for h in past if h.fingerprint == fp])[0]}
    facts = run_facts(store, key) if facts is None else facts
    notes = []
    others = len(past) - len([h for h in past if h.fingerprint == fp])
    if others:
        shown_setup = past[-1].setup
        notes.append(f"{others} run(s) of {key} under another set-up kept apart; shown: the latest set-up, "
                     + ", ".join(f"{k} {v!r}" for k, v in shown_setup.items()))
    out = []
    for metric in dict.fromkeys(m for h in same for m in h.trials):
        direction = figures.DIRECTIONS.get(metric, "higher")
        kept = [(h, noise.orient(h.trials.get(metric, []), direction)) for h in same]
        kept = [(h, logs) for h, logs in kept if len(logs)]
        if not kept:
            continue
        runs = [h for h, _ in kept]
        means = [float(np.mean(logs)) for _, logs in kept]
        # as the gate: change points only from decide.CHANGE_MIN_RUNS runs on (shorter series mark spurious ones)
        changes = cp.change_points(means) if len(means) >= decide.CHANGE_MIN_RUNS else []
        changes = at_first_failure(changes, [metric in facts[h.run_id].failed_metrics if h.run_id in facts else
                                             False for h in runs], means)
        n = int(np.median([len(logs) for _, logs in kept]))
        pred = noise.predict([logs for h, logs in kept if h.run_id in judged], n)
        shown = kept[-SHOWN:]
        entry = MetricTrend(key=key, metric=metric, runs=len(kept), first_shown=len(kept) - len(shown),
                            series=[run_entry(h, logs, direction) for h, logs in shown],
                            changes=[change_entry(c, runs, 0, direction) for c in changes])
        if pred is not None:
            entry.predicted = natural(pred.center, direction)
            entry.interval = sorted(natural(b, direction) for b in pred.bounds(alpha))
            entry.between, entry.within = pred.between, pred.within
        else:  # the runs the gate would judge against, not all shown: held runs are why there may be too few
            used = sum(h.run_id in judged for h, _ in kept)
            aside = (f" ({len(kept) - used} more held out or before an accepted change)" if used < len(kept) else "")
            notes.append(f"{metric}: {used} run(s) to judge against{aside}, fewer than the {noise.MIN_RUNS} that "
                         "estimate the run-to-run noise; no prediction")
        out.append(entry)
    return out, notes
