"""Change points in a case's history: where its level stepped or crept, by ruptures' PELT.

Pure numpy plus ruptures (PELT, Killick et al. 2012: the exact minimum of the summed segment costs plus a
penalty per change); never imports pytest. The series is the runs' mean log values (oriented, worse is lower),
scaled by an estimate of the run-to-run noise from successive differences (which a step or a slow creep
hardly moves), so the penalty is in units of that noise and one number serves every case.
``PENALTY`` is set by the seeded simulation in ``benchmarks/history_gate.py``: 30 runs of an unchanged deploy
show no change point in at least 99 % of histories (docs/history.md gives the figures).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: cost of one more change, in units of the run-to-run variance (benchmarks/history_gate.py calibrates it)
PENALTY = 16.0
#: fewest runs on each side of a change
MIN_SEGMENT = 2


@dataclass(frozen=True)
class Change:
    """A change point: the run ``index`` (0-based) where the new level begins, and the levels around it."""

    index: int
    before: float  # mean oriented log of the segment before it
    after: float  # and of the segment from it

    @property
    def effect(self) -> float:
        """Relative change, better-is-positive (-0.10: 10 % worse)."""
        return math.expm1(self.after - self.before)


def noise_scale(series: np.ndarray) -> float:
    """The run-to-run sd from successive differences (von Neumann): sd(diff) / sqrt(2). A step moves one
    difference and a slow creep moves their mean, not their spread, so neither hides itself by inflating it.
    (The robust MAD of the differences was tried: on 6 to 30 runs it is so often too small that unchanged
    histories showed 3 to 11 % spurious changes at the same penalty; docs/history.md.)"""
    if len(series) < 3:
        return 0.0
    return float(np.std(np.diff(series), ddof=1)) / math.sqrt(2)


def change_points(series: Sequence[float] | np.ndarray, *, penalty: float = PENALTY,
                  min_size: int = MIN_SEGMENT) -> list[Change]:
    """The change points of ``series`` (oriented logs, oldest first), oldest first; [] for fewer than
    ``2 * min_size`` points or a series without noise to scale by."""
    x = np.asarray(series, dtype=float)
    if len(x) < 2 * min_size:
        return []
    scale = noise_scale(x)
    if not scale > 0:
        scale = float(np.std(x))
        if not scale > 0:
            return []
    import ruptures  # loaded on first use: a run without a history gate never pays for it

    # KernelCPD with the linear kernel is PELT on the l2 cost (a mean shift), in ruptures' C code: 0.03 ms for
    # 30 runs where ruptures.Pelt(model="l2") takes 20 ms.
    ends = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit((x / scale).reshape(-1, 1)).predict(pen=penalty)
    bounds = [0, *ends]
    out = []
    for i in range(1, len(bounds) - 1):
        before = x[bounds[i - 1]:bounds[i]]
        after = x[bounds[i]:bounds[i + 1]]
        out.append(Change(index=int(bounds[i]), before=float(np.mean(before)), after=float(np.mean(after))))
    return out
