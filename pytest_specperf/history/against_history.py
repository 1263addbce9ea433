"""Judging one case's result against its history in the store (``--specperf-history``).

Never imports pytest. For every unit of the result (the case, each sweep point, each load level) and every
metric it is gated on, the earlier runs of the same set-up (``records.fingerprint``; partial runs, errored
cases and runs held out after failing this gate left out, ``records.judged_runs``) are judged by
``decide.decide``, alpha split evenly over the case's metrics and units so the
case as a whole fails an unchanged deploy at most ``ALPHA`` of the time from the step check. Runs of the case
under another set-up are kept apart and named in a note. A history shorter than ``noise.MIN_RUNS`` runs falls
back to the baseline rule (``gates.against_baseline``) against the latest run of the set-up, and says so; where
``--specperf-compare`` named a baseline, its comparisons stay the result's ``comparisons`` and the history's are
kept apart as ``history_comparisons``.

The result gets ``history``: one ``HistoryEntry`` per unit and metric, with the verdict, the prediction interval, the
change points and the recent runs (what the trend charts draw).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_specperf.cases import figures
from pytest_specperf.cases.result_parts import CaseComparison, HistoryEntry
from pytest_specperf.cases.results import Result
from pytest_specperf.compare import cause, verdicts
from pytest_specperf.compare import gates as gating
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare.trials import ALPHA
from pytest_specperf.history import decide, noise
from pytest_specperf.history.trend import SHOWN, change_entry, natural, run_entry
from pytest_specperf.storage import records
from pytest_specperf.storage.store import Store

#: a case fails an unchanged deploy at most this often from the step check (split over its metrics and units)


def _fmt(v: float, metric: str) -> str:
    if metric.endswith("_s"):
        return f"{v * 1000:.1f} ms"
    return f"{v:.4g}"


def _setup_diff(setup: dict[str, Any], earlier: dict[str, Any]) -> str:
    """How two set-ups (``records.setup_of``) differ, key by key: not result data."""
    keys = sorted(set(setup) | set(earlier))
    return ", ".join(f"{k} {earlier.get(k)!r} (now {setup.get(k)!r})"  # not result data
                     for k in keys if setup.get(k) != earlier.get(k))  # not result data


def _reason(key: str, metric: str, d: decide.Decision, entry: HistoryEntry) -> str:
    lo, hi = entry.interval
    step = (f"{key} {metric} {_fmt(entry.value, metric)}: {d.effect:+.1%} against its history of "
            f"{entry.runs} runs (predicted {_fmt(entry.predicted, metric)}, interval [{_fmt(lo, metric)}, "
            f"{_fmt(hi, metric)}]; run-to-run {d.prediction.between if d.prediction else 0:.1%}, within-run "
            f"{d.prediction.within if d.prediction else 0:.1%})")
    ch = entry.began
    if ch is None:
        return step
    assert ch.level_before is not None and ch.level_now is not None  # _entry sets both on ``began``
    began = (f"a change began at run {ch.run or 'now'} (commit {ch.commit}, {ch.created or 'this run'}): "
             f"{_fmt(ch.level_before, metric)} before, {_fmt(ch.level_now, metric)} now ({d.creep:+.1%} over "
             f"{entry.since} runs)")
    return f"{key} {metric}: {began}" if d.by == "change point" else f"{step}; {began}"


def judge(store: Store, result: Result, run_meta: dict[str, Any], *, max_regression: float,
          inconclusive: str = "warn", alpha: float = ALPHA) -> list[str]:
    """Judge ``result`` against its history (fails it on a regression); returns notes to show as warnings.
    Raises ``HistoryError`` when the store cannot be read (``result`` untouched: it is written only after every
    read)."""
    if result.verdict == "error":
        return []
    now = records.units([result])  # each unit keyed once: its past is read, judged and explained by that key
    found = records.pasts(store, now, run_meta)
    tests = sum(len(p.trials) for p in found) or 1
    notes = [n for p in found for n in _past_notes(p)]
    entries: list[HistoryEntry] = []
    explained: list[tuple[HistoryEntry, list[records.CaseRun]]] = []  # what each change comes from: which runs
    short: list[tuple[records.Unit, list[records.CaseRun]]] = []
    for p in found:
        for metric, values in p.trials.items():
            direction = figures.DIRECTIONS[metric]
            cand = noise.orient(values, direction)
            if len(cand) == 0:
                continue
            kept = [(h, logs) for h in p.same for logs in [noise.orient(h.trials.get(metric, []), direction)]
                    if len(logs)]
            d = decide.decide([logs for _, logs in kept], cand, alpha=alpha / tests, max_regression=max_regression)
            if d.verdict == "short":
                short.append((p.unit, [h for h, _ in kept]))
                continue
            entries.append(_entry(p.unit.key, metric, direction, d, kept, alpha / tests))
            if entries[-1].verdict != "passed":  # what the change comes from, against the runs it was judged by
                ids = cause.judged_runs(entries[-1], [h.run_id for h, _ in kept])
                explained.append((entries[-1], [h for h, _ in kept if h.run_id in ids]))
    latest = max((runs[-1] for _, runs in short if runs), key=lambda h: h.run_id, default=None)
    # every earlier result read at once: the runs each change is explained against, and the short history's latest
    wanted = [h for _, runs in explained for h in runs] + ([latest] if latest is not None else [])
    past = records.earlier(store, wanted)
    for entry, runs in explained:
        # the entry's unit in each of those runs and in this one, found by the key the store gives it (``units``)
        before = [u.case for h in runs if h.run_id in past for u in past[h.run_id].units if u.key == entry.key]
        cause.explain_entry(entry, before, [u.case for u in now if u.key == entry.key])
    judged: list[str] | None = None  # the warnings of a short history's baseline rule, where it judged
    if latest is not None and latest.run_id in past:
        # too few runs for the history's noise: the baseline rule against the set-up's latest run, for the short
        # units only (the others were judged against their history above); where --specperf-compare named the
        # baseline, its comparisons stay the row's and these are kept apart, each reason saying which run
        apart = None if result.comparisons is None else f"history, against run {latest.run_id}"
        judged = gating.against_baseline(gating.Gate(max_regression, inconclusive), result,
                                         [past[latest.run_id].record], keys={u.at for u, _ in short}, apart=apart)
    if short:
        notes += _fall_back(result, short, latest, judged)
    verdicts.fail(result, [e.reason for e in entries if e.verdict == "regressed"])
    result.history = entries
    result.notes += _predictions(entries)
    return notes


def _past_notes(p: records.UnitPast) -> list[str]:
    """What shapes a unit's prediction besides its runs: an accepted change, held runs, runs of another set-up."""
    key, same, held, others = p.unit.key, p.same, p.held, p.others
    notes = []
    if same and same[0].accepted and len(same) < noise.MAX_RUNS:  # said while it shapes the prediction
        notes.append(f"history: {key} is judged from run {same[0].run_id} on, where a change was accepted "
                     f"({same[0].accepted})")
    if held:
        notes.append(f"history: {len(held)} run(s) of {key} held out of its prediction, having failed their "
                     f"history gate (run {', '.join(str(h.run_id) for h in held)}); if that change is meant, "
                     f"accept it: specperf history accept {held[0].run_id}")
    if others:
        notes.append(f"history: {len(others)} earlier run(s) of {key} under another set-up kept apart "
                     f"({_setup_diff(p.setup, others[-1].setup)})")
    if p.shared_rows:
        notes.append(f"history: {key} judged request by request, {p.shared_rows}")
    return notes


def _predictions(entries: list[HistoryEntry]) -> list[str]:
    """Per unit, the prediction each metric that did not regress was judged against (a regression's reason says
    its own), so a passing row shows what it passed against."""
    out = []
    for key in dict.fromkeys(e.key for e in entries):
        shown = [e for e in entries if e.key == key and e.verdict != "regressed"]
        if shown:
            out.append(f"history {key}: " + "; ".join(
                f"{e.metric} {_fmt(e.value, e.metric)} {e.verdict}, predicted {_fmt(e.predicted, e.metric)} in "
                f"[{_fmt(e.interval[0], e.metric)}, {_fmt(e.interval[1], e.metric)}] from {e.runs} runs"
                for e in shown))
    return out


def _entry(key: str, metric: str, direction: str, d: decide.Decision,
           kept: list[tuple[records.CaseRun, np.ndarray]], alpha: float) -> HistoryEntry:
    runs = [h for h, _ in kept]
    pred = d.prediction
    assert pred is not None
    lo, hi = sorted(natural(b, direction) for b in pred.bounds(alpha))
    shown = kept[-SHOWN:]
    entry = HistoryEntry(
        key=key, metric=metric, verdict=d.verdict, by=d.by, runs=pred.runs,
        value=natural(d.value, direction), predicted=natural(pred.center, direction), interval=[lo, hi],
        effect=d.effect, p=d.p, between=pred.between, within=pred.within,
        series=[run_entry(h, logs, direction) for h, logs in shown],
        first_shown=len(kept) - len(shown),
        changes=[change_entry(c, runs, d.offset, direction) for c in d.changes],
    )
    if d.began is not None:
        began = change_entry(d.began, runs, d.offset, direction)
        series = [*[float(np.mean(logs)) for _, logs in kept][d.offset:], d.value]
        starts = [0, *[c.index for c in d.changes]]
        i = starts.index(d.began.index)
        began.level_before = natural(float(np.mean(series[starts[i - 1]:d.began.index])), direction)
        began.level_now = natural(float(np.mean(series[starts[-1]:])), direction)
        entry.began = began
        entry.since = len(series) - d.began.index
    entry.reason = _reason(key, metric, d, entry)
    if compare.is_ttft(metric) and d.verdict != "passed":  # every TTFT figure (p50, p90, p99), as the baseline rule
        ch = entry.began
        now, then = ((ch.level_now, ch.level_before) if d.by == "change point" and ch is not None
                     else (entry.value, entry.predicted))
        assert now is not None and then is not None
        if compare.within_ttft_floor(metric, then, now):  # a few ms are the client's and the OS's
            entry.verdict = "passed"
            entry.reason += f"; within the {compare.TTFT_FLOOR_S * 1000:.0f} ms noise floor"
    return entry


def _fall_back(result: Result, short: list[tuple[records.Unit, list[records.CaseRun]]],
               latest: records.CaseRun | None, judged: list[str] | None) -> list[str]:
    """What a history too short for its noise was judged by: the baseline rule against the latest run of the set-up
    (``judged``: its warnings; None where it judged nothing), its comparisons the row's or, beside a named baseline,
    kept apart (``history_comparisons``: then a note on the row says how each came out)."""
    have = min(len(runs) for _, runs in short)
    head = (f"history: {short[0][0].key} has {have} earlier run(s) of this set-up, fewer than the {noise.MIN_RUNS} "
            "that estimate its run-to-run noise")
    if latest is None:
        return [f"{head}; nothing to judge against yet, this run starts it"]
    if judged is None:
        return [f"{head}; the latest run's result is missing, not judged"]
    said = f"judged against the latest (run {latest.run_id}, commit {latest.commit}) by the baseline rule"
    if result.history_comparisons is None:  # no baseline named: the history's latest run is the row's baseline
        return [f"{head}; {said}", *judged]
    judged_text = ", ".join(_judged_text(result, cc) for cc in result.history_comparisons) or "nothing compared"
    result.notes.append(f"history ({have} earlier run(s), fewer than {noise.MIN_RUNS}): {said}, apart from the "
                        f"--specperf-compare baseline: {judged_text}")
    return [f"{head}; {said}, apart from the --specperf-compare baseline", *judged]


def _judged_text(result: Result, cc: CaseComparison) -> str:
    """'decode_tps +1.2% passed', 'total_tps at 4 users -8.0% regressed': one comparison in a few words."""
    at = (f" at {cc.users} user{'' if cc.users == 1 else 's'}" if cc.users is not None and result.kind == "load_sweep"
          else f" at ctx {cc.ctx}" if cc.ctx is not None else "")
    change = None if cc.comparison is None else f"{cc.comparison.change:+.1%}"
    if change is not None and float(change[:-1]) == 0:
        change = "0.0%"  # never '-0.0%'
    return " ".join(x for x in (f"{cc.metric or 'case'}{at}", change, cc.verdict) if x)
