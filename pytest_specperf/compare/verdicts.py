"""The one writer of verdicts and reasons: a case failed by a gate, and a comparison given a new verdict.

Every gate (a baseline or A/B comparison, the history, the crossover's ``min_speedup``, the arms'
``max_loss_vs_best``) fails a case through ``fail``, so a reason is always its parts joined one way and an error
record (a case that could not be measured) keeps its verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.cases.results import Recorded, is_error


def fail(result: Recorded, reasons: Sequence[str], *, first: bool = False) -> None:
    """Fail ``result`` for ``reasons``, added after the reason it has (before it with ``first``: the gate the case
    asked for leads); nothing for no reasons or an error record."""
    if not reasons or is_error(result):
        return
    prior = [r for r in [result.reason] if r]
    result.verdict = "failed"
    result.reason = "; ".join([*reasons, *prior] if first else [*prior, *reasons])


def with_verdict(cc: CaseComparison, verdict: str, reason: str) -> CaseComparison:
    """The same comparison with a new verdict and reason, inside and out, so every report says one thing."""
    inner = replace(cc.comparison, verdict=verdict, reason=reason) if cc.comparison is not None else None
    return replace(cc, verdict=verdict, reason=reason, comparison=inner)
