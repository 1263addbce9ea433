"""How one case is measured and judged, by mode: one small interface (``Mode.run``), an explicit name-to-class map
(``MODES``), and ``mode_of``, which picks the name once per case from what the run was given.

* ``arms``: every arm of ``--specperf-arms`` interleaved, the deployed arm judged against the best per level;
* ``ab``: B against A of ``--specperf-ab``, ABBA, a fixed number of trials or (repeat="auto") until decided;
* ``trials``: a case that sends at once, ``repeat=`` whole trials, judged against a stored run;
* ``single``: one measurement (a sustained case repeats its streams inside it), judged against a stored run.

Never imports pytest: the caller hands over how to run a case on each endpoint (``Plan``). The history gate
(``Mode.stored``: the modes judged against stored runs) is the caller's, since measuring never imports it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_specperf.cases.base import AUTO_MAX_REPEAT, CaseSpec
from pytest_specperf.cases.results import Recorded, Result
from pytest_specperf.compare import crossover, sequential
from pytest_specperf.compare import gates as gating
from pytest_specperf.errors import ConfigError
from pytest_specperf.measure import interleaved, repeats

#: One run of a case on one endpoint (``until``: when a repeat="auto" case may stop), as the runner does it.
Measure = Callable[[CaseSpec, "sequential.Until | None"], Result]


@dataclass(frozen=True)
class Plan:
    """What measuring one case needs: the case, how to run it on each endpoint, the gate, and what is stored."""

    nodeid: str
    spec: CaseSpec
    gate: gating.Gate
    here: Measure  # this run's endpoint (B in A/B)
    a: Measure | None = None  # --specperf-ab's A
    arms: dict[str, Measure] | None = None  # --specperf-arms, by name
    arms_baseline: str | None = None
    arms_tokens: dict[str, int] | None = None
    ab_trials: int = 1
    baseline: Sequence[Recorded] | None = None  # --specperf-compare's run
    differences: list[str] = field(default_factory=list)  # how that run was measured unlike this one
    strict: bool = False  # --specperf-compare-strict
    save: bool = False  # --specperf-save: this run becomes a baseline

    @property
    def auto(self) -> bool:
        return self.spec.repeat == "auto"

    @property
    def cap(self) -> int:
        """The most trials repeat="auto" takes (per arm)."""
        return self.spec.max_repeat or AUTO_MAX_REPEAT

    @property
    def one(self) -> CaseSpec:
        """The case as one trial of repeat="auto" (a trial per round or look)."""
        return dataclasses.replace(self.spec, repeat=1, max_repeat=None) if self.auto else self.spec


class Mode:
    """One way of measuring and judging a case: ``run`` returns its row and the warnings to show."""

    #: judged against stored runs (a saved baseline, the history), not against other arms measured now
    stored = False

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def run(self) -> tuple[Result, list[str]]:
        raise NotImplementedError


class Arms(Mode):
    """Every arm interleaved; the deployed arm judged against the best per level (``max_loss_vs_best``)."""

    def run(self) -> tuple[Result, list[str]]:
        p = self.plan
        arms = p.arms or {}
        names = list(arms)
        deployed = getattr(p.spec, "deployed", None)
        if deployed is not None and deployed not in arms:
            raise ConfigError(f"deployed={deployed!r} is not an arm of --specperf-arms; name one of {', '.join(names)}")
        one = p.one

        def measure(name: str, levels: list[int] | None) -> Result:
            case = one if levels is None or not hasattr(one, "level") else dataclasses.replace(
                one, concurrency=tuple(levels))  # type: ignore[call-arg]  # hasattr(one, "level"): a LoadSweepSpec
            return arms[name](case, None)

        return interleaved.run_arms(measure, names, p.cap if p.auto else p.ab_trials, p.gate,
                                    baseline=p.arms_baseline or names[0], deployed=deployed,
                                    max_loss=getattr(p.spec, "max_loss_vs_best", None), tokens=p.arms_tokens,
                                    auto=p.auto)


class AB(Mode):
    """B against A, ABBA: the run's ``--specperf-ab-trials`` each, or with repeat="auto" rounds until the sequential
    test decides."""

    def run(self) -> tuple[Result, list[str]]:
        p = self.plan
        a = p.a
        assert a is not None  # mode_of picks this mode only with an A
        if p.auto:
            return interleaved.run_ab_auto(lambda: a(p.one, None), lambda: p.here(p.one, None), p.cap, p.gate,
                                           p.spec.max_regression)
        return interleaved.run_ab(lambda: a(p.spec, None), lambda: p.here(p.spec, None), p.ab_trials, p.gate,
                                  p.spec.max_regression)


class Single(Mode):
    """One measurement, judged against the saved baseline when one is named."""

    stored = True

    def measure(self) -> Result:
        p = self.plan
        return p.here(p.spec, self._until() if p.auto else None)

    def _until(self) -> sequential.Until | None:
        """What repeat="auto" waits for besides drift: the comparison with the baseline, or a saved run's size."""
        p = self.plan
        if p.baseline is not None:
            return repeats.until_baseline(p.gate, p.nodeid, p.baseline, p.spec.max_regression)
        if p.save:
            return gating.until_saved(p.gate, p.cap, p.spec.max_regression)
        return None

    def run(self) -> tuple[Result, list[str]]:
        p = self.plan
        record = self.measure()
        record.nodeid = p.nodeid
        crossover.unjudged(record)
        _arms_unjudged(record, p.spec)
        notes: list[str] = []
        if p.auto and p.baseline is None and p.save and not repeats.whole_case(p.spec):
            notes = gating.saved_notes(p.gate, record, p.cap, p.spec.max_regression)
        if p.baseline is not None:
            notes = gating.against_baseline(p.gate, record, p.baseline, p.spec.max_regression, p.differences,
                                            p.strict, auto=p.auto)
        return record, notes


class Trials(Single):
    """A case that sends at once, run as ``repeat=`` whole trials (``measure.repeats``), judged as ``Single``."""

    def measure(self) -> Result:
        p = self.plan
        return repeats.run_trials(lambda s: p.here(s, None), p.spec, p.gate, baseline=p.baseline, nodeid=p.nodeid,
                                  save=p.save)


def _arms_unjudged(record: Result, spec: CaseSpec) -> None:
    """Outside arms mode, note that ``max_loss_vs_best`` was not judged, and why."""
    if getattr(spec, "max_loss_vs_best", None) is not None:
        record.notes.append(
            f"max_loss_vs_best {spec.max_loss_vs_best:g} not judged: it compares arms, which needs "  # type: ignore[attr-defined]
            "--specperf-arms=NAME=URL,...")


MODES: dict[str, type[Mode]] = {"arms": Arms, "ab": AB, "trials": Trials, "single": Single}


def mode_of(plan: Plan) -> str:
    """The name in ``MODES`` of how ``plan`` is measured; a ConfigError for a combination no mode takes."""
    if plan.arms is not None:
        return "arms"
    if plan.a is not None:
        if plan.auto and plan.spec.KIND == "load_sweep":
            raise ConfigError("repeat='auto' on a load sweep adds trials per level across arms; run the A/B pair "
                              "as --specperf-arms=A=URL_A,B=URL_B, or give the sweep no repeat")
        return "ab"
    return "trials" if repeats.whole_case(plan.spec) else "single"
