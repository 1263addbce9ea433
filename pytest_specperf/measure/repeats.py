"""A case measured several times as whole trials (``repeat=`` of a case that sends at once), and repeat="auto"
against a stored run: the loops, each trial measured by the runner it is given, judged by ``compare``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pytest_specperf.cases import figures
from pytest_specperf.cases.base import AUTO_MAX_REPEAT, CaseSpec
from pytest_specperf.cases.results import Recorded, Result
from pytest_specperf.compare import gates, samples, sequential, verdicts
from pytest_specperf.measure import combine


def whole_case(spec: CaseSpec) -> bool:
    """Whether ``repeat`` of this case runs the whole case that many times (``run_trials``): a case that sends at
    once (a sustained case with concurrency > 1, a load sweep, a rate case, a session, a replay: each trial sends the
    same window with the same seeded plan, under a fresh cache salt). A single-user sustained
    case and a two-point case repeat their streams inside one measurement instead."""
    if spec.repeat == 1:
        return False
    users = getattr(spec, "concurrency", 1)
    return spec.KIND in ("load_sweep", "rate", "session", "replay") or (spec.KIND == "sustained" and users != 1)


def run_trials(measure: Callable[[CaseSpec], Result], spec: CaseSpec, gate: gates.Gate, *,
               baseline: Sequence[Recorded] | None = None, nodeid: str = "", save: bool = False
               ) -> Result:
    """A case that sends at once, measured ``repeat`` times as whole trials (``measure`` runs one and judges it)
    and combined into one row as A/B combines an arm (``gates.aggregate``): medians, the worst verdict, and each
    trial's compared figures in ``trials``, so a saved run carries its trial-to-trial noise and a comparison has one
    value per trial on each side. ``repeat="auto"``: trials until the sequential test against ``baseline`` decides
    every metric (or, saved with nothing to compare, until the run's noise suits a baseline; else ``MIN_TRIALS``),
    ``max_repeat`` at most."""
    auto = spec.repeat == "auto"
    cap = (spec.max_repeat or AUTO_MAX_REPEAT) if auto else int(spec.repeat)
    one = replace(spec, repeat=1, max_repeat=None)
    mine = [b for b in baseline or [] if b.nodeid == nodeid]
    threshold = spec.max_regression or gate.max_regression
    done: list[Result] = []
    while len(done) < cap:
        done.append(measure(one))
        if auto and len(done) >= sequential.MIN_TRIALS and _trials_settle(done, mine, threshold, cap, save):
            break
    return combine.aggregate(done) if len(done) > 1 else done[0]


def _trials_settle(done: list[Result], mine: list[Recorded], threshold: float, cap: int, save: bool) -> bool:
    """repeat="auto" of whole trials: whether the trials so far settle the case (``run_trials``)."""
    row = combine.aggregate(done)
    if mine:
        base, side = samples.sides(mine, [row])
        ccs = sequential.sprt_sides(base, side, max_regression=threshold, metrics=figures.metrics_for(row),
                                    final=len(done) >= cap)
        return sequential.decided(verdicts.ttft_judged(ccs, base, side))
    cand = samples.per_trial([row])
    if save:  # every level (or the case) sized on its own trials: one level's figures are not another's
        units: dict[tuple[int | None, Any], dict[str, list[Any]]] = {}
        for c in cand:
            for _, ctx, case in figures.sub_cases(c):
                unit = units.setdefault((ctx, figures.users_of(case)), {})
                for m in sequential.SIZED:
                    if values := figures.trials(case, m):
                        unit.setdefault(m, []).extend(values)
        sized = sequential.until_saved(max_repeat=cap, max_regression=threshold,
                                       floors={"ttft_s": gates.TTFT_FLOOR_S})
        return all(sized(values) for values in units.values())
    return True


def until_baseline(gate: gates.Gate, nodeid: str, baseline: Sequence[Recorded],
                   max_regression: float | None = None) -> sequential.Until:
    """The runner's ``until`` for repeat="auto" against a stored run: each look is the sequential test's
    (``sequential.look``) after the same noise floor and prefix-cache rules as the gate (``verdicts.ttft_judged``)."""
    mine = [b for b in baseline if b.nodeid == nodeid]
    threshold = max_regression or gate.max_regression

    def done(values: dict[str, list[Any]]) -> bool:
        found = sequential.look(mine, nodeid, values, max_regression=threshold, metrics=figures.METRICS)
        if found is None:
            return True  # every baseline trial has its pair: the paired test took its last look
        ccs, cand = found
        return sequential.decided(verdicts.ttft_judged(ccs, samples.Side.of(mine), samples.Side.of(cand)))

    return done
