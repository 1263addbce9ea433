"""A replay compared request by request: each trial's figures taken over the trace rows both sides answered.

Pure. Every trial of a replay sends the same rows, but a side may answer fewer of them: a server with a shorter
context does not get the long rows (``not_sent``), one under strain refuses or fails some. Its percentiles are then
over a different mix of prompts, and a lost 14,000-token row reads as a faster TTFT. So where both sides kept each
trial's answered rows (``figures.rows_of``), each trial's per-request figures are taken over the rows that every
trial of both sides answered: the same requests on both sides, and the trials stay the units of the comparison
(requests of one trial share its minute of load, so they are not independent samples).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_specperf.cases.result_parts import RowFigures
from pytest_specperf.compare.samples import Entry

#: the compared figures that are percentiles of a per-request figure: metric -> (that figure, the percentile)
ROW_METRICS: dict[str, tuple[Callable[[RowFigures], float | None], float]] = {
    "ttft_s": (lambda r: r.ttft_s, 50),
    "ttft_p90_s": (lambda r: r.ttft_s, 90),
    "tpot_p90_ms": (lambda r: r.tpot_ms, 90),
    "e2e_p90_s": (lambda r: r.e2e_s, 90),
    "decode_tps": (lambda r: r.decode_tps, 50),
}
#: fewer rows in common than this and the sides are compared as measured, each over its own rows
MIN_ROWS = 2


@dataclass(frozen=True)
class Matched:
    """Each trial's figure over the shared rows, per side, and how many rows were shared and left out."""

    base: list[float]
    cand: list[float]
    rows: int
    left_out: int

    @property
    def note(self) -> str:
        """What a comparison's reason says of it."""
        out = f" (over the {self.rows} trace rows every trial of both sides answered"
        return out + (f"; {self.left_out} answered only on some left out)" if self.left_out else ")")


def matched(base: Entry, cand: Entry, metric: str) -> Matched | None:
    """``metric`` per trial over the rows every trial of both sides answered with a value; None where it is not a
    percentile of a per-request figure, a side's trials did not keep their rows, or fewer than MIN_ROWS are shared."""
    rule = ROW_METRICS.get(metric)
    b, c = base.trial_rows(), cand.trial_rows()
    if rule is None or b is None or c is None:
        return None
    value, q = rule
    tables = [{r.row: v for r in trial if (v := value(r)) is not None and np.isfinite(v) and v > 0}
              for trial in (*b, *c)]
    common = sorted(set.intersection(*(set(t) for t in tables)))
    if len(common) < MIN_ROWS:
        return None
    every = set.union(*(set(t) for t in tables))
    figures = [float(np.percentile([t[k] for k in common], q)) for t in tables]
    return Matched(figures[:len(b)], figures[len(b):], len(common), len(every) - len(common))
