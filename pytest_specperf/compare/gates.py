"""Regression gates over measured results: against a stored baseline, or B against A in one session (ABBA).

Pytest-free glue between the runner and ``compare``: it decides the case's verdict and reason, and sets the
comparisons on the result record (``comparisons``); in A/B and arms mode it combines each arm's trials into one
record of their kind (``aggregate``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

import numpy as np

from pytest_specperf.cases.json_form import OMIT
from pytest_specperf.cases.result_parts import CaseComparison, LevelTrial, unit_key
from pytest_specperf.cases.results import (
    AbSummary,
    LoadLevel,
    LoadSweepResult,
    RateResult,
    Recorded,
    Result,
    SessionResult,
    SustainedResult,
)
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import arms as arms_table
from pytest_specperf.compare import categories, cause, crossover, sequential, verdicts
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare.trials import Case, read

_T = TypeVar("_T", SustainedResult, LoadLevel)
_R = TypeVar("_R", bound=Result)

METRICS = ("decode_tps", "ttft_s", "total_tps")  # total_tps: load cases only
#: Open-loop cases are judged on what they gate (a metric a case lacks is skipped).
KIND_METRICS = {"rate": ("goodput_rps", "attainment", "ttft_p90_s", "tpot_p90_ms", "e2e_p90_s"),
                "capacity": ("max_rps",)}
KIND_METRICS["replay"] = KIND_METRICS["rate"]  # a replay is a rate case over the trace's own arrivals


#: The figures each trial of a rate case or a session keeps (``LevelTrial``) where the case ran several times: the
#: ones it is compared on, so a saved run carries its trial-to-trial noise. Load rows keep ``crossover.TRIAL_METRICS``.
CASE_TRIAL_METRICS = {"rate": (*KIND_METRICS["rate"], "decode_tps", "ttft_s"),
                      "session": ("decode_tps", "ttft_s", "total_tps")}


def metrics_for(result: Case) -> tuple[str, ...]:
    """The metrics compared for a result of this kind."""
    kind = read(result, "kind")
    return KIND_METRICS.get(str(kind), METRICS)
#: the TTFT noise floor (``compare.TTFT_FLOOR_S``): a change of any TTFT figure under it passes
TTFT_FLOOR_S = compare.TTFT_FLOOR_S


@dataclass(frozen=True)
class Gate:
    """How comparisons turn into verdicts."""

    max_regression: float = 0.05
    inconclusive: str = "warn"  # pass | warn | fail

    def apply(self, result: Recorded, comparisons: list[CaseComparison], *, judge: bool = True) -> list[str]:
        """Record the comparisons on ``result``; fail it on a regression; return warnings to show.
        ``judge=False`` only records them (another gate judges the case). An error record (a case that could
        not be measured) gets its comparisons (skipped) and keeps its verdict."""
        own = [cc for cc in comparisons if cc.nodeid == result.nodeid]
        fail, warn = compare.gate(own, self.inconclusive) if judge else ([], [])
        result.comparisons = own
        verdicts.fail(result, [cc.reason for cc in fail])
        return [cc.reason for cc in warn]


def _record(result: Recorded | Mapping[str, Any]) -> Recorded:
    """A result as the rules read it: JSON given by a caller (a test's hand-built row) becomes its record here, at
    the entry, through the one loader (``saved_results.load_record``)."""
    return load_record(result) if isinstance(result, Mapping) else result


def records_of(results: Sequence[Recorded | Mapping[str, Any]]) -> list[Recorded]:
    """A baseline's results as records (``_record`` each)."""
    return [_record(r) for r in results]


def against_baseline(gate: Gate, result: Recorded, baseline: Sequence[Recorded | Mapping[str, Any]],
                     max_regression: float | None = None, differences: list[str] | None = None,
                     strict: bool = False, *, auto: bool = False, keys: Collection[str] | None = None) -> list[str]:
    """Compare one case with the baseline run's results (the case's own keyword overrides the threshold); sets
    its ``comparisons``, fails it on a regression. An error record (plain data) is judged in place.
    ``keys``: judge only these units of the case (``unit_key``: its levels, its sweep points), the rest being
    judged elsewhere (the history gate falls back here for the units whose history is short).

    ``differences`` are ways the baseline was measured unlike this run (model, server version, machine, ...):
    they are named in every reason, and turn a would-be regression into ``inconclusive`` unless ``strict``.
    ``auto``: the case ran with repeat="auto", so the sequential test's verdict is the one that stopped it.
    """
    row = result
    mine = [b for b in map(_record, baseline) if b.nodeid == row.nodeid]
    threshold = max_regression or gate.max_regression
    base, cand = per_trial(mine), per_trial([row])
    if auto:
        ccs = sequential.sprt_runs(base, cand, max_regression=threshold, metrics=metrics_for(row), final=True)
    else:
        ccs = compare.compare_runs(base, cand, max_regression=threshold, metrics=metrics_for(row))
    unlike = [*(differences or []), *_case_differences(mine, row)]
    # every comparison that moved names its cause from both sides' figures, last in its reason (compare/cause.py)
    judged = cause.attach(_unlike(ttft_judged(ccs, base, cand), unlike, strict), base, cand)
    if keys is not None:
        kind = row.kind
        judged = [cc for cc in judged if unit_key(kind, cc.nodeid, cc.ctx, cc.users) in keys]
    return gate.apply(result, judged) + (sequential.noise_warnings(judged) if auto else [])


def _is_load(result: Case) -> bool:
    """A load sweep, or a sustained case whose streams ran at once (concurrency > 1)."""
    users = read(result, "concurrency")
    return read(result, "kind") == "load_sweep" or (
        read(result, "kind") == "sustained" and isinstance(users, int) and not isinstance(users, bool) and users > 1)


def _one_typed_trial(case: _T, figures: dict[str, float | None]) -> _T:
    """A result or level as one of its trials: that trial's figures, no streams or trials left."""
    changes: dict[str, Any] = {"streams": [], "trials": None, **figures}
    return dataclasses.replace(case, **changes)


def _per_typed_trial(r: Result) -> list[Result]:
    """``per_trial`` of one typed load result (a sustained load case, or a load sweep)."""
    if isinstance(r, LoadSweepResult):
        levels = [(lv, crossover.trial_figures(lv)) for lv in r.levels if isinstance(lv, LoadLevel)]
        return [dataclasses.replace(r, levels=[_one_typed_trial(lv, f[i]) for lv, f in levels if i < len(f)])
                for i in range(max((len(f) for _, f in levels), default=1))]
    if isinstance(r, SustainedResult):
        return [_one_typed_trial(r, f) for f in crossover.trial_figures(r)]
    return [r]


def per_trial(results: Sequence[Recorded]) -> list[Recorded]:
    """Results as comparisons see them: a load case gives one value per trial per level (that trial's median
    user, its aggregate), not one per stream, since the streams of one trial share the engine's batched steps.

    A row that combines trials (an A/B arm, ``aggregate``) becomes one result per trial; other results
    pass unchanged (a sustained case's sequential streams are its trials, an error record is plain data).
    """
    out: list[Recorded] = []
    for r in results:
        if isinstance(r, Result) and r.verdict != "error" and _is_load(r) and r.kind in ("sustained", "load_sweep"):
            out += _per_typed_trial(r)
        elif isinstance(r, RateResult | SessionResult) and r.verdict != "error" and r.trials:
            # each trial as a result of its own, its compared figures as that trial measured them
            out += [dataclasses.replace(r, trials=None, **{m: getattr(t, m) for m in CASE_TRIAL_METRICS[r.kind]})
                    for t in r.trials]
        else:
            out.append(r)
    return out


def speedup_gated(result: Case) -> bool:
    """A load sweep with ``min_speedup``: in A/B its speedup floor is its gate, instead of the regression gate."""
    return read(result, "kind") == "load_sweep" and read(result, "min_speedup") is not None


def _case_differences(base: Sequence[Case], result: Case) -> list[str]:
    """Per-case settings that make a baseline measure something else (sampling temperature)."""
    temps = {read(b, "temperature", 0.0) for b in base}
    now = read(result, "temperature", 0.0)
    return [f"temperature: {t!r} (baseline) != {now!r} (now)" for t in temps if t != now]


def _unlike(ccs: list[CaseComparison], differences: list[str], strict: bool) -> list[CaseComparison]:
    """Say how the baseline differs in every reason; without ``strict`` a regression is only inconclusive."""
    if not differences:
        return ccs
    what = "; ".join(differences)
    out = []
    for cc in ccs:
        if cc.comparison is None:
            out.append(cc)
            continue
        verdict = cc.verdict
        if verdict == "regressed" and not strict:
            verdict = "inconclusive"
            why = f"{cc.reason}; not comparable ({what}): inconclusive, --specperf-compare-strict judges it anyway"
        else:
            why = f"{cc.reason}; baseline differs ({what})"
        out.append(verdicts.with_verdict(cc, verdict, why))
    return out


def until_saved(gate: Gate, max_repeat: int, max_regression: float | None = None) -> sequential.Until:
    """The runner's ``until`` for repeat="auto" saved with nothing to compare: trials until the run can serve as
    a baseline at its own noise (``max_repeat`` at most); a TTFT whose threshold is under the floor is not sized."""
    return sequential.until_saved(max_repeat=max_repeat, max_regression=max_regression or gate.max_regression,
                                  floors={"ttft_s": TTFT_FLOOR_S})


def saved_notes(gate: Gate, result: Result, max_repeat: int, max_regression: float | None = None) -> list[str]:
    """Warnings for a saved repeat="auto" run too noisy to judge a candidate of ``max_repeat`` trials against."""
    return sequential.saved_notes(result, max_repeat=max_repeat,
                                  max_regression=max_regression or gate.max_regression, floors={"ttft_s": TTFT_FLOOR_S})


def judge_ab(arms: dict[str, list[Result]], gate: Gate, max_regression: float | None = None
             ) -> tuple[Result, list[str]]:
    """B's trials judged against A's (``arms``: each arm's trials, ABBA): B's summary row and warnings."""
    a, b = per_trial(arms["A"]), per_trial(arms["B"])
    ccs = compare.compare_ab(a, b, max_regression=max_regression or gate.max_regression,
                             metrics=metrics_for(arms["B"][0]))
    return ab_summary(arms, ttft_judged(ccs, a, b, sides=("A", "B")), gate)


def ab_summary(arms: dict[str, list[Result]], ccs: list[CaseComparison], gate: Gate) -> tuple[Result, list[str]]:
    """B's row (its trials combined) with A's figures in ``ab``, judged by the comparisons ``ccs`` (or, for a load
    sweep with ``min_speedup``, by its speedup floor), its crossover, arms table and categories; and warnings."""
    ccs = cause.attach(ccs, per_trial(arms["A"]), per_trial(arms["B"]), ("A", "B"))  # what each change comes from
    trials = len(arms["B"])
    summary = aggregate(arms["B"], arm="B")
    a_row = aggregate(arms["A"], arm="A")
    # ``a`` stays a mapping of scalars on purpose: A's aggregated figures under B's field names, whichever kind
    summary.ab = AbSummary(trials=trials, a_endpoint=arms["A"][0].endpoint, b_endpoint=summary.endpoint,
                           a={k: getattr(a_row, k) for k in _json_fields(a_row) if k in AGGREGATED},
                           a_decode_tps=[read(r, "decode_tps") for r in arms["A"]],
                           b_decode_tps=[read(r, "decode_tps") for r in arms["B"]])
    if isinstance(summary, LoadSweepResult) and isinstance(a_row, LoadSweepResult):
        summary.ab.a_levels = a_row.levels  # A's rows, every trial (the speedups' divisor)
    gated = speedup_gated(summary)  # then the floor (crossover.apply) judges it; comparisons are only shown
    warnings = gate.apply(summary, ccs, judge=not gated)
    if gated and isinstance(summary, LoadSweepResult):
        summary.notes.append(
            f"A/B judged by min_speedup {summary.min_speedup:g}, B's per-user speedup at every level; the "
            "per-level comparisons are shown, not gated")
    if isinstance(summary, LoadSweepResult):
        warnings += crossover.apply(summary, arms["A"], arms["B"], gate.inconclusive)
        summary.arms = arms_table.table(arms, baseline="A", deployed="B")  # the two-arm case, shown as N arms
    categories.apply(summary, arms["A"], arms["B"])  # a prompt file's categories: speedup per category
    return summary, warnings


def judge_arms(results: dict[str, list[Result]], gate: Gate, *, baseline: str, deployed: str | None = None,
               max_loss: float | None = None, tokens: dict[str, int] | None = None, auto: bool = False
               ) -> tuple[Result, list[str]]:
    """Every arm's trials (``results``) judged: the deployed arm's row (the baseline's when none is named), every
    trial combined, with the arms table (``max_loss_vs_best`` judged against the best arm per level); warnings.
    ``auto``: later trials swept only the levels still open."""
    row: Result = aggregate(results[deployed or baseline], arm=deployed or baseline)
    if auto and isinstance(row, LoadSweepResult):
        # later trials swept only the open levels: the row speaks for every level, its top one as for one trial
        row.concurrency = arms_table.levels_of(results[deployed or baseline])
        row.levels = sorted(row.levels, key=lambda lv: lv.concurrency or 0)
        row.decode_tps = row.levels[-1].decode_tps if row.levels else row.decode_tps
    t = arms_table.table(results, baseline=baseline, deployed=deployed, max_loss=max_loss, tokens=tokens)
    t.endpoints = {n: rs[0].endpoint for n, rs in results.items() if rs}
    # open-loop kinds have no per-user decode per level to rank arms by
    if row.kind in KIND_METRICS:
        row.arms = replace(t, levels=[])
        row.notes.append("arms measured; open-loop cases are not ranked per level")
        return row, []
    cause.for_arms(t, results)  # a level below the best names what the loss comes from
    return row, arms_table.apply(row, t, gate.inconclusive)


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
        changes["trials"] = [LevelTrial(**f) for f in figures]
        for m in kept:
            present = [v for f in figures if (v := f[m]) is not None]
            if present:
                changes[m] = float(np.median(present))
    out = dataclasses.replace(trials[-1], **changes)
    if len(trials) > 1 and _is_load(out):
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
    changes["trials"] = [LevelTrial(**crossover.trial_figures(row)[0]) for row in rows]
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


def _medians(results: Sequence[Case], metric: str) -> dict[tuple[str, int | None, int | None], float]:
    """The median of ``metric`` of each sub-case (a case, sweep point or load level) over its trials."""
    values: dict[tuple[str, int | None, int | None], list[float]] = {}
    for r in results:
        if not isinstance(r, dict | Result) or read(r, "verdict") == "error":
            continue
        for nodeid, ctx, case in compare.sub_cases(r):
            values.setdefault((nodeid, ctx, compare.users_of(case)), []).extend(compare.trials(case, metric))
    return {k: float(np.median(v)) for k, v in values.items() if v}


def _ttft_floor(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case]) -> list[CaseComparison]:
    """A change of any TTFT figure (``compare.is_ttft``: the median, p50, p90, p99) smaller than TTFT_FLOOR_S in
    absolute terms is noise, not news: it passes, saying why, for a case, a sweep point and each load level alike
    (an 'improved' inside the floor is no more real than a 'regressed')."""
    medians: dict[str, tuple[dict[Any, float], dict[Any, float]]] = {}
    out = []
    for cc in ccs:
        key = (cc.nodeid, cc.ctx, cc.users)
        m = cc.metric or ""
        if compare.is_ttft(m) and cc.verdict in ("regressed", "inconclusive", "improved"):
            b, c = medians.setdefault(m, (_medians(base, m), _medians(cand, m)))
            if key in b and key in c and compare.within_ttft_floor(m, b[key], c[key]):
                at = "" if cc.users is None else f"at {cc.users} user{'' if cc.users == 1 else 's'}: "
                why = (f"{at}{m} {b[key] * 1000:.1f} -> {c[key] * 1000:.1f} ms: within the "
                       f"{TTFT_FLOOR_S * 1000:.0f} ms noise floor")
                cc = verdicts.with_verdict(cc, "passed", why)
        out.append(cc)
    return out


#: Sides whose cached shares differ by more than this measured different prefills: their TTFTs do not compare.
CACHE_SHARE_GAP = 0.10


def _median_share(results: Sequence[Case]) -> float | None:
    values = [float(read(r, "cached_share")) for r in results if _number(read(r, "cached_share")) is not None]
    return float(np.median(values)) if values else None


def ttft_judged(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case],
                 sides: tuple[str, str] = ("baseline", "now")) -> list[CaseComparison]:
    """TTFT comparisons after the noise floor and the prefix cache (``_ttft_floor``, ``_cache_differs``)."""
    return _cache_differs(_ttft_floor(ccs, base, cand), base, cand, sides)


def _ab_judged(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case]) -> list[CaseComparison]:
    return ttft_judged(ccs, base, cand, ("A", "B"))


def _cache_differs(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case],
                   sides: tuple[str, str]) -> list[CaseComparison]:
    """Sides whose cached shares differ (or whose cold requests came back cached) measured the prefix cache,
    not the server, in their TTFT: that comparison is inconclusive and every reason names the shares."""
    b, c = _median_share(base), _median_share(cand)
    hot = next((read(r, "ttft_cache") for r in [*base, *cand] if read(r, "ttft_cache")), "")
    differ = b is not None and c is not None and abs(b - c) > CACHE_SHARE_GAP
    if not differ and not hot:
        return ccs
    what = (f"cached share of the prompt {b:.2f} ({sides[0]}) vs {c:.2f} ({sides[1]})" if differ
            else hot.removeprefix("ttft inconclusive: "))
    out = []
    for cc in ccs:
        if cc.comparison is None:
            out.append(cc)
        elif compare.is_ttft(cc.metric or "") and cc.verdict in ("regressed", "improved"):
            out.append(verdicts.with_verdict(cc, "inconclusive", f"{cc.reason}; {what}: the prefix cache moved TTFT, "
                                                         "inconclusive"))
        else:
            out.append(verdicts.with_verdict(cc, cc.verdict, f"{cc.reason}; {what}"))
    return out


def comparisons_of(results: Sequence[Recorded]) -> list[CaseComparison]:
    """Every result's comparisons, in order."""
    return [cc for r in results for cc in r.comparisons or []]
