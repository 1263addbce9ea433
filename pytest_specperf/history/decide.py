"""The history gate's rule for one metric of one case: the prediction interval and the recent change points.

Pure; never imports pytest. Inputs are oriented logs (``noise.orient``: worse is lower), one array of trial
values per earlier run (oldest first) and the candidate's trials. Two checks, either can fail the case:

* **step** (today's run against what the history predicts): the runs since the last change point (or the last
  ``noise.MAX_RUNS`` runs when fewer than ``noise.MIN_RUNS`` follow it) predict the candidate's mean
  (``noise.predict``); ``regressed`` when the candidate lies below the one-sided ``1 - alpha`` prediction bound
  **and** is worse than predicted by ``max_regression`` or more; ``improved`` is the mirror image.
* **creep** (a change that built up over several runs): change points of the runs and the candidate
  (``changepoints.change_points``, from ``CHANGE_MIN_RUNS`` earlier runs on); ``regressed`` when one began
  among the last ``WINDOW`` runs and the level now (the last segment, which holds the candidate) is
  ``max_regression`` or more below the level before the earliest such change. Older changes are history: the
  level after them is the new normal.

With fewer than ``noise.MIN_RUNS`` earlier runs the verdict is ``short`` and the caller falls back to the
baseline rule against the latest run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_specperf.history import changepoints as cp
from pytest_specperf.history import noise

#: a change point that began among the last WINDOW runs (the candidate included) can fail the gate
WINDOW = 10
#: the most recent runs searched for change points
CHANGE_RUNS = 100
#: fewest earlier runs the change-point check needs: on fewer, the run-to-run sd it scales by is too unsure
#: (5 runs gave 1 to 2 % spurious changes per metric in benchmarks/history_gate.py)
CHANGE_MIN_RUNS = 10


@dataclass
class Decision:
    """One metric's verdict against its history."""

    verdict: str  # passed | regressed | improved | short
    value: float  # the candidate's mean oriented log
    effect: float = 0.0  # candidate vs prediction, better-is-positive relative change
    p: float | None = None  # one-sided p of the candidate being this much worse
    prediction: noise.Prediction | None = None
    changes: list[cp.Change] = field(default_factory=list)  # indices into the runs searched (candidate last)
    offset: int = 0  # index of the first searched run among all earlier runs
    began: cp.Change | None = None  # the recent change that failed (or improved) the case
    creep: float | None = None  # the level now against the level before ``began``
    by: str = ""  # "step" or "change point": which check decided


def _levels(series: np.ndarray, changes: list[cp.Change], began: cp.Change) -> tuple[float, float]:
    """Mean level of the segment before ``began`` and of the last segment."""
    starts = [0, *[c.index for c in changes]]
    i = starts.index(began.index)
    before = series[starts[i - 1]:began.index]
    return float(np.mean(before)), float(np.mean(series[starts[-1]:]))


def decide(past: Sequence[np.ndarray], cand: np.ndarray, *, alpha: float, max_regression: float,
           window: int = WINDOW) -> Decision:
    """Judge ``cand`` (oriented log trials) against the earlier runs ``past`` (see the module docstring)."""
    kept = [np.asarray(r, dtype=float) for r in past if len(r)]
    runs = kept[-CHANGE_RUNS:]
    value = float(np.mean(cand))
    if len(runs) < noise.MIN_RUNS or len(cand) == 0:
        return Decision("short", value)
    means, _ = noise.run_means(runs)
    series = np.append(means, value)
    changes = cp.change_points(series) if len(runs) >= CHANGE_MIN_RUNS else []
    # the step check's reference: the runs since the last change before the candidate, if enough of them
    last = max((c.index for c in changes if c.index < len(runs)), default=0)
    reference = runs[last:] if len(runs) - last >= noise.MIN_RUNS else runs
    pred = noise.predict(reference, len(cand), cand)
    assert pred is not None  # reference holds MIN_RUNS runs or more
    effect = math.expm1(value - pred.center)
    p = pred.p_worse(value)
    d = Decision("passed", value, effect, p, pred, changes, offset=len(kept) - len(runs))
    if p < alpha and effect <= -max_regression:
        d.verdict, d.by = "regressed", "step"
    elif pred.p_better(value) < alpha and effect >= max_regression:
        d.verdict, d.by = "improved", "step"
    recent = [c for c in changes if c.index >= len(series) - window]
    if recent:
        before, now = _levels(series, changes, recent[0])
        creep = math.expm1(now - before)
        if creep <= -max_regression:  # named even when the step check failed it: where the change began
            d.began, d.creep = recent[0], creep
            if d.verdict != "regressed":
                d.verdict, d.by = "regressed", "change point"
        elif creep >= max_regression and d.verdict == "passed":
            d.began, d.creep, d.verdict, d.by = recent[0], creep, "improved", "change point"
    return d
