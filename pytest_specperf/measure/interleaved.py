"""A/B and N arms measured interleaved (ABBA, ABC CBA ...), so a drift over the session hits every arm alike:
the loops, each trial measured by the arm's runner it is given, then judged by ``compare.gates``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from pytest_specperf.cases import figures
from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.cases.results import Result
from pytest_specperf.compare import arms as arms_table
from pytest_specperf.compare import gates, samples, sequential, verdicts
from pytest_specperf.measure import combine

T = TypeVar("T")
_C = TypeVar("_C", bound=figures.Case)

#: One trial of one arm: ``(arm name, levels)`` -> its result; ``levels`` None runs the case as written, else
#: a load sweep over only those levels (repeat="auto" stops measuring a level once its best arm is decided).
ArmMeasure = Callable[[str, "list[int] | None"], Result]


def arm_order(names: Sequence[str], n: int) -> list[str]:
    """Interleaving of any number of arms, ``n`` trials each: rounds forward then backward (ABC CBA ABC ...), so
    a drift over the session hits every arm alike; with two arms it is ABBA."""
    if n < 0:
        raise ValueError("n must be >= 0")
    return [x for i in range(n) for x in (list(names) if i % 2 == 0 else list(reversed(names)))]


def ab_order(n: int) -> list[str]:
    """ABBA interleaving with ``n`` trials per arm: A/B is the two-arm case of ``arm_order``."""
    return arm_order(("A", "B"), n)


def measure_arms(measures: Mapping[str, Callable[[], T]], trials: int) -> dict[str, list[T]]:
    """Every arm's results, ``trials`` each, measured interleaved in ``arm_order``."""
    out: dict[str, list[T]] = {name: [] for name in measures}
    for name in arm_order(list(measures), trials):
        out[name].append(measures[name]())
    return out


def run_ab(measure_a: Callable[[], Result], measure_b: Callable[[], Result], trials: int, gate: gates.Gate,
           max_regression: float | None = None) -> tuple[Result, list[str]]:
    """Measure A and B interleaved ABBA (``trials`` each), judge B against A; returns B's summary and warnings."""
    arms = measure_arms({"A": measure_a, "B": measure_b}, trials)
    return gates.judge_ab(arms, combine.ab_row(arms), gate, max_regression)


def ab_until_decided(measure_a: Callable[[], _C], measure_b: Callable[[], _C], *, max_repeat: int,
                     max_regression: float, metrics: Sequence[str] = figures.METRICS, ttft_rules: bool = False
                     ) -> tuple[list[_C], list[_C], list[CaseComparison]]:
    """A and B in ABBA order, one trial each per round, until every metric is decided (the sequential test; with
    ``ttft_rules`` after the gate's TTFT noise floor and prefix-cache rules, ``verdicts.ttft_judged``) or
    ``max_repeat`` per arm. Returns A's trials, B's trials and the last look's comparisons (undecided ones
    ``inconclusive``)."""
    arms: dict[str, list[_C]] = {"A": [], "B": []}
    order = ab_order(max_repeat)
    ccs: list[CaseComparison] = []
    for i in range(0, len(order), 2):
        for arm in order[i:i + 2]:
            arms[arm].append((measure_a if arm == "A" else measure_b)())
        n = len(arms["B"])
        if n < min(sequential.MIN_TRIALS, max_repeat):
            continue
        a, b = samples.Side.of(arms["A"]), samples.Side.of(arms["B"])
        ccs = sequential.sprt_sides(a, b, max_regression=max_regression, metrics=metrics, against="A",
                                    final=n >= max_repeat)
        if ttft_rules:
            ccs = verdicts.ttft_judged(ccs, a, b, ("A", "B"))
        if sequential.decided(ccs):
            break
    return arms["A"], arms["B"], ccs


def run_ab_auto(measure_a: Callable[[], Result], measure_b: Callable[[], Result], max_repeat: int, gate: gates.Gate,
                max_regression: float | None = None) -> tuple[Result, list[str]]:
    """As ``run_ab`` with repeat="auto": ABBA rounds until the sequential test decides, ``max_repeat`` per arm."""
    a, b, ccs = ab_until_decided(measure_a, measure_b, max_repeat=max_repeat,
                                 max_regression=max_regression or gate.max_regression, ttft_rules=True)
    arms = {"A": a, "B": b}
    summary, warnings = gates.ab_summary(arms, combine.ab_row(arms), ccs, gate)
    return summary, warnings + sequential.noise_warnings(ccs)


def run_arms(measure: ArmMeasure, names: list[str], trials: int, gate: gates.Gate, *, baseline: str,
             deployed: str | None = None, max_loss: float | None = None, tokens: dict[str, int] | None = None,
             auto: bool = False) -> tuple[Result, list[str]]:
    """Measure every arm interleaved (``trials`` each; with ``auto`` rounds until every level's best arm is
    decided, at most ``trials`` full sweeps' worth of level-trials per arm, spent on the open levels) and judge
    the deployed arm against the best (``gates.judge_arms``); returns its row and warnings.

    Without ``auto`` this is ``measure_arms``, the same loop A/B runs.
    """
    results: dict[str, list[Result]]
    if not auto:
        def trial(n: str) -> Callable[[], Result]:  # binds this arm's name now, not the loop's last
            return lambda: measure(n, None)

        results = measure_arms({n: trial(n) for n in names}, trials)
    else:
        results = {n: [] for n in names}
        open_levels: list[int] | None = None
        # The budget is ``trials`` full sweeps per arm, counted in level-trials: what a decided level no longer
        # takes goes to the open ones, so a case holds as a whole (every level must decide), not level by level.
        budget, spent, round_, cost = trials, 0, 0, 1  # per arm; a round costs its open levels (all at first)
        while spent + cost <= budget:
            for n in arm_order(names, round_ + 1)[-len(names):]:  # this round's order
                results[n].append(measure(n, open_levels))
            if round_ == 0:
                cost = max(1, len(arms_table.levels_of(results[names[0]])))
                budget = trials * cost
            round_, spent = round_ + 1, spent + cost
            if round_ < sequential.MIN_TRIALS:
                continue
            t = arms_table.table(results, baseline=baseline, deployed=deployed, max_loss=max_loss)
            done = set(arms_table.settled(t))
            open_levels = [row.users for row in t.levels if row.users not in done]
            if not open_levels:
                break
            cost = len(open_levels)
    row = combine.aggregate(results[deployed or baseline], arm=deployed or baseline)
    return gates.judge_arms(results, row, gate, baseline=baseline, deployed=deployed, max_loss=max_loss,
                            tokens=tokens, auto=auto)
