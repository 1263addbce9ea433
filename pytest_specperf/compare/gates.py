"""Regression gates over measured results: against a stored baseline, or B against A in one session (ABBA).

Pure judging between the runner and ``compare``: it decides the case's verdict and reason, and sets the
comparisons on the result record (``comparisons``). In A/B and arms mode each arm's trials arrive combined into
one record of their kind by the measuring side (``measure.combine``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from pytest_specperf.cases import figures
from pytest_specperf.cases.figures import CASE_TRIAL_METRICS, KIND_METRICS, Case, figure, metrics_for
from pytest_specperf.cases.result_parts import CaseComparison, unit_key
from pytest_specperf.cases.results import (
    LoadLevel,
    LoadSweepResult,
    RateResult,
    Recorded,
    Result,
    SessionResult,
    SustainedResult,
)
from pytest_specperf.compare import arms as arms_table
from pytest_specperf.compare import categories, cause, crossover, sequential, verdicts
from pytest_specperf.compare import trials as compare

_T = TypeVar("_T", SustainedResult, LoadLevel)
_R = TypeVar("_R", bound=Result)

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
        own, warnings = self.judge(result, comparisons, judge=judge)
        result.comparisons = own
        return warnings

    def judge(self, result: Recorded, comparisons: list[CaseComparison], *, judge: bool = True
              ) -> tuple[list[CaseComparison], list[str]]:
        """``apply`` without recording: fail ``result`` on a regression among its own ``comparisons``; return
        those comparisons and the warnings to show (the history gate keeps its own apart from a named
        baseline's)."""
        own = [cc for cc in comparisons if cc.nodeid == result.nodeid]
        fail, warn = compare.gate(own, self.inconclusive) if judge else ([], [])
        verdicts.fail(result, [cc.reason for cc in fail])
        return own, [cc.reason for cc in warn]


def against_baseline(gate: Gate, result: Recorded, baseline: Sequence[Recorded],
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
    judged = baseline_comparisons(gate, result, baseline, max_regression, differences, strict, auto=auto, keys=keys)
    return gate.apply(result, judged) + (sequential.noise_warnings(judged) if auto else [])


def baseline_comparisons(gate: Gate, result: Recorded, baseline: Sequence[Recorded],
                         max_regression: float | None = None, differences: list[str] | None = None,
                         strict: bool = False, *, auto: bool = False, keys: Collection[str] | None = None
                         ) -> list[CaseComparison]:
    """The comparisons ``against_baseline`` judges ``result`` by (its arguments as there), neither recorded nor
    judged yet."""
    row = result
    mine = [b for b in baseline if b.nodeid == row.nodeid]
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
    return judged


def is_load(result: Case) -> bool:
    """A load sweep, or a sustained case whose streams ran at once (concurrency > 1)."""
    return isinstance(result, LoadSweepResult) or (isinstance(result, SustainedResult) and result.concurrency > 1)


def _one_typed_trial(case: _T, figures: dict[str, float | None]) -> _T:
    """A result or level as one of its trials: that trial's figures, no streams or trials left."""
    changes: dict[str, Any] = {"streams": [], "trials": None, **figures}
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
                figures: dict[str, Any] = {m: figure(t, m) for m in CASE_TRIAL_METRICS[r.kind]}
                out.append(dataclasses.replace(r, trials=None, **figures))
        else:
            out.append(r)
    return out


def speedup_gated(result: Case) -> bool:
    """A load sweep with ``min_speedup``: in A/B its speedup floor is its gate, instead of the regression gate."""
    return isinstance(result, LoadSweepResult) and result.min_speedup is not None


def _case_differences(base: Sequence[Case], result: Case) -> list[str]:
    """Per-case settings that make a baseline measure something else (sampling temperature)."""
    temps = {b.temperature if isinstance(b, Result) else 0.0 for b in base}
    now = result.temperature if isinstance(result, Result) else 0.0
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


def judge_ab(arms: dict[str, list[Result]], summary: Result, gate: Gate, max_regression: float | None = None
             ) -> tuple[Result, list[str]]:
    """B's trials judged against A's (``arms``: each arm's trials, ABBA; ``summary``: B's row as
    ``measure.combine.ab_row`` combines it): B's summary row, judged, and warnings."""
    a, b = per_trial(arms["A"]), per_trial(arms["B"])
    ccs = compare.compare_ab(a, b, max_regression=max_regression or gate.max_regression,
                             metrics=metrics_for(arms["B"][0]))
    return ab_summary(arms, summary, ttft_judged(ccs, a, b, sides=("A", "B")), gate)


def ab_summary(arms: dict[str, list[Result]], summary: Result, ccs: list[CaseComparison], gate: Gate
               ) -> tuple[Result, list[str]]:
    """B's row (``summary``: its trials combined, A's figures in ``ab``) judged by the comparisons ``ccs`` (or, for a
    load sweep with ``min_speedup``, by its speedup floor), with its crossover, arms table and categories' speedups;
    and warnings."""
    ccs = cause.attach(ccs, per_trial(arms["A"]), per_trial(arms["B"]), ("A", "B"))  # what each change comes from
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


def judge_arms(results: dict[str, list[Result]], row: Result, gate: Gate, *, baseline: str,
               deployed: str | None = None, max_loss: float | None = None, tokens: dict[str, int] | None = None,
               auto: bool = False) -> tuple[Result, list[str]]:
    """Every arm's trials (``results``) judged: the deployed arm's row (the baseline's when none is named: ``row``,
    its trials combined by ``measure.combine.aggregate``), with the arms table (``max_loss_vs_best`` judged against
    the best arm per level); warnings. ``auto``: later trials swept only the levels still open."""
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


def _medians(results: Sequence[Case], metric: str) -> dict[tuple[str, int | None, int | None], float]:
    """The median of ``metric`` of each sub-case (a case, sweep point or load level) over its trials."""
    values: dict[tuple[str, int | None, int | None], list[float]] = {}
    for r in results:
        if not isinstance(r, Result) or r.verdict == "error":
            continue
        for nodeid, ctx, case in figures.sub_cases(r):
            values.setdefault((nodeid, ctx, figures.users_of(case)), []).extend(figures.trials(case, metric))
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
    values = [v for r in results for v in [figure(r, "cached_share")] if v is not None]
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
    hot = next((r.ttft_cache for r in [*base, *cand] if isinstance(r, Result) and r.ttft_cache), "")
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
