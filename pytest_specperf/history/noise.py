"""The noise model of a case's history: within-run spread plus a run-to-run offset, and what it predicts.

Pure numpy/scipy; never imports pytest. Values are logs, oriented so that worse is lower (``orient``). A run's
value is the mean of its trials' logs, ``m_i = mu + b_i + e_i``: ``b_i`` the run's own offset (the machine's
load that day, the runner, the GPU's clocks; variance ``tau^2``), ``e_i`` the mean of its trials' noise
(variance ``s_w^2 / n_i``). The method of moments gives both parts: ``s_w^2`` pools the runs' own trial
variances, ``tau^2 = max(0, var(m_i) - s_w^2 * mean(1/n_i))``. A candidate of ``n_c`` trials is then predicted
at ``mean(m_i)`` with variance ``tau^2 + s_w^2 / n_c + var(m_i) / k`` (the last term: the mean of ``k`` runs is
itself uncertain), and judged with Student's t on ``k - 1`` degrees of freedom: the random-effects prediction
interval (Higgins, Thompson and Spiegelhalter 2009), the one Bencher's t threshold over the last N runs is a
special case of (one trial per run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # scipy.stats loads on first use: a run that never judges a history never pays for it

#: fewest earlier runs that estimate a run-to-run variance (k - 1 = 4 degrees of freedom)
MIN_RUNS = 5
#: the most recent runs the prediction uses (older ones describe an older machine)
MAX_RUNS = 30


def orient(values: Sequence[float], direction: str) -> np.ndarray:
    """Logs of positive values, negated when lower is better, so worse is always lower."""
    logs: np.ndarray = np.log(np.asarray([v for v in values if v > 0], dtype=float))
    return -logs if direction == "lower" else logs


@dataclass(frozen=True)
class Prediction:
    """What a case's history predicts for a candidate's mean log value."""

    runs: int  # k, the earlier runs used
    center: float  # mean of their run means (oriented log)
    sd: float  # sd of the candidate's mean about ``center``
    df: int
    between: float  # tau, the run-to-run sd (log, ~ a relative offset)
    within: float  # s_w, the pooled per-trial sd

    def p_worse(self, value: float) -> float:
        """One-sided p of a candidate this far below the prediction (small = significantly worse)."""
        if self.sd <= 0:
            return 0.0 if value < self.center else 1.0
        return float(scipy.stats.t.cdf((value - self.center) / self.sd, self.df))

    def p_better(self, value: float) -> float:
        """One-sided p of a candidate this far above the prediction."""
        return self.p_worse(2 * self.center - value)

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The two-sided ``1 - 2 alpha`` prediction interval of the candidate's mean log value."""
        half = float(scipy.stats.t.ppf(1 - alpha, self.df)) * self.sd
        return self.center - half, self.center + half


def run_means(runs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each run's mean log value and its number of trials (runs without values are dropped)."""
    kept = [r for r in runs if len(r)]
    return np.array([float(np.mean(r)) for r in kept]), np.array([len(r) for r in kept])


def pooled_within(runs: Sequence[np.ndarray]) -> float:
    """Pooled per-trial variance over the runs with two trials or more (0 when none has)."""
    ss = sum(float(np.sum((r - np.mean(r)) ** 2)) for r in runs if len(r) > 1)
    dof = sum(len(r) - 1 for r in runs if len(r) > 1)
    return ss / dof if dof else 0.0


def predict(runs: Sequence[np.ndarray], n_cand: int, cand: np.ndarray | None = None) -> Prediction | None:
    """The prediction from earlier runs (oriented logs, oldest first; the last ``MAX_RUNS`` are used) for a
    candidate of ``n_cand`` trials; None when fewer than ``MIN_RUNS`` runs have values. ``cand``'s own
    trials join the pooled within-run variance."""
    kept = [np.asarray(r, dtype=float) for r in runs if len(r)][-MAX_RUNS:]
    if len(kept) < MIN_RUNS or n_cand < 1:
        return None
    means, ns = run_means(kept)
    k = len(means)
    within = pooled_within([*kept, *([cand] if cand is not None and len(cand) > 1 else [])])
    spread = float(np.var(means, ddof=1))
    between = max(0.0, spread - within * float(np.mean(1.0 / ns)))
    var = between + within / n_cand + spread / k
    return Prediction(runs=k, center=float(np.mean(means)), sd=math.sqrt(max(var, 0.0)), df=k - 1,
                      between=math.sqrt(between), within=math.sqrt(within))
