"""Regression gates over measured results: against a stored baseline, or B against A in one session (ABBA).

Pure judging between the runner and ``compare``: it decides the case's verdict and reason, and sets the
comparisons on the result record (``comparisons``). In A/B and arms mode each arm's trials arrive combined into
one record of their kind by the measuring side (``measure.combine``).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pytest_specperf.cases.figures import KIND_METRICS, Case, metrics_for
from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.cases.results import (
    LoadSweepResult,
    Recorded,
    Result,
)
from pytest_specperf.compare import arms as arms_table
from pytest_specperf.compare import categories, cause, crossover, samples, sequential, verdicts
from pytest_specperf.compare import trials as compare

#: the TTFT noise floor (``compare.TTFT_FLOOR_S``): a change of any TTFT figure under it passes
TTFT_FLOOR_S = compare.TTFT_FLOOR_S


class Rule(Protocol):
    """A statistical rule over both sides of one case: every compared metric of every unit, judged."""

    def __call__(self, base: samples.Side, cand: samples.Side, *, max_regression: float,
                 metrics: Sequence[str]) -> list[CaseComparison]: ...


#: the rules a case is judged by against a stored run, by how it ran: a fixed number of trials (the interval,
#: ``trials.compare_sides``), or repeat="auto" (the sequential test that stopped it, ``sequential.sprt_sides``)
RULES: dict[str, Rule] = {"fixed": compare.compare_sides, "sequential": functools.partial(sequential.sprt_sides,
                                                                                          final=True)}


@dataclass(frozen=True)
class Gate:
    """How comparisons turn into verdicts."""

    max_regression: float = 0.05
    inconclusive: str = "warn"  # pass | warn | fail

    def apply(self, result: Recorded, comparisons: list[CaseComparison], *, judge: bool = True,
              apart: str | None = None) -> list[str]:
        """Record the comparisons on ``result``; fail it on a regression; return warnings to show.
        ``judge=False`` only records them (another gate judges the case). An error record (a case that could
        not be measured) gets its comparisons (skipped) and keeps its verdict. ``apart``: they are a second gate's
        beside a named baseline's (the history's fall-back, naming its run): each reason led by ``apart``, they are
        recorded as ``history_comparisons`` and the named baseline's stay the case's ``comparisons``."""
        if apart is not None:
            comparisons = [verdicts.with_verdict(cc, cc.verdict, f"{apart}: {cc.reason}") for cc in comparisons]
        own, warnings = self.judge(result, comparisons, judge=judge)
        if apart is None:
            result.comparisons = own
        elif isinstance(result, Result):  # an error record keeps no history
            result.history_comparisons = own
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
                     strict: bool = False, *, auto: bool = False, keys: Collection[samples.Key] | None = None,
                     apart: str | None = None) -> list[str]:
    """Compare one case with the baseline run's results (the case's own keyword overrides the threshold); sets
    its ``comparisons``, fails it on a regression. An error record (plain data) is judged in place.
    ``keys``: judge only these units of the case (as ``samples.Side`` keys them: its levels, its sweep points), the
    rest being judged elsewhere (the history gate falls back here for the units whose history is short).
    ``apart``: the comparisons are kept apart from a named baseline's (``Gate.apply``).

    ``differences`` are ways the baseline was measured unlike this run (model, server version, machine, ...):
    they are named in every reason, and turn a would-be regression into ``inconclusive`` unless ``strict``.
    ``auto``: the case ran with repeat="auto", so the sequential test's verdict is the one that stopped it.
    """
    judged = baseline_comparisons(gate, result, baseline, max_regression, differences, strict, auto=auto, keys=keys)
    return gate.apply(result, judged, apart=apart) + (sequential.noise_warnings(judged) if auto else [])


def baseline_comparisons(gate: Gate, result: Recorded, baseline: Sequence[Recorded],
                         max_regression: float | None = None, differences: list[str] | None = None,
                         strict: bool = False, *, auto: bool = False, keys: Collection[samples.Key] | None = None
                         ) -> list[CaseComparison]:
    """The comparisons ``against_baseline`` judges ``result`` by (its arguments as there), neither recorded nor
    judged yet."""
    row = result
    mine = [b for b in baseline if b.nodeid == row.nodeid]
    threshold = max_regression or gate.max_regression
    base, cand = samples.sides(mine, [row])
    ccs = RULES["sequential" if auto else "fixed"](base, cand, max_regression=threshold, metrics=metrics_for(row))
    # every comparison that moved names its cause from both sides' figures, last in its reason (compare/cause.py)
    judged = cause.attach(verdicts.judged(ccs, base, cand, differences=differences or [], strict=strict), base, cand)
    if keys is not None:
        judged = [cc for cc in judged if (cc.nodeid, cc.ctx, cc.users) in keys]
    return judged


def speedup_gated(result: Case) -> bool:
    """A load sweep with ``min_speedup``: in A/B its speedup floor is its gate, instead of the regression gate."""
    return isinstance(result, LoadSweepResult) and result.min_speedup is not None


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
    a, b = samples.sides(arms["A"], arms["B"])
    ccs = compare.compare_sides(a, b, max_regression=max_regression or gate.max_regression,
                                metrics=metrics_for(arms["B"][0]), against="A")
    return ab_summary(arms, summary, verdicts.ttft_judged(ccs, a, b, sides=("A", "B")), gate)


def ab_summary(arms: dict[str, list[Result]], summary: Result, ccs: list[CaseComparison], gate: Gate
               ) -> tuple[Result, list[str]]:
    """B's row (``summary``: its trials combined, A's figures in ``ab``) judged by the comparisons ``ccs`` (or, for a
    load sweep with ``min_speedup``, by its speedup floor), with its crossover, arms table and categories' speedups;
    and warnings."""
    a, b = samples.sides(arms["A"], arms["B"])
    ccs = cause.attach(ccs, a, b, ("A", "B"))  # what each change comes from
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
    # open-loop kinds have no per-user decode per level to rank arms by; a replay is ranked over its trace's rows
    if row.kind in KIND_METRICS and row.kind != "replay":
        row.arms = replace(t, levels=[])
        row.notes.append("arms measured; open-loop cases are not ranked per level")
        return row, []
    cause.for_arms(t, results)  # a level below the best names what the loss comes from
    return row, arms_table.apply(row, t, gate.inconclusive)


def comparisons_of(results: Sequence[Recorded]) -> list[CaseComparison]:
    """Every result's comparisons, in order."""
    return [cc for r in results for cc in r.comparisons or []]
