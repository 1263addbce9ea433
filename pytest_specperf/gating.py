"""Regression gates over measured results: against a stored baseline, or B against A in one session (ABBA).

Pytest-free glue between the runner and ``compare``: it decides the case's verdict and reason,
and attaches the comparisons to the result dict as plain data (``comparisons``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from . import compare, crossover, sequential
from .compare import CaseComparison, Comparison
from .results import Result

METRICS = ("decode_tps", "ttft_s", "total_tps")  # total_tps: load cases only
# Changes of time-to-first-token below this are client and OS noise, not a regression (a few ms on localhost).
TTFT_FLOOR_S = 0.010


@dataclass(frozen=True)
class Gate:
    """How comparisons turn into verdicts."""

    max_regression: float = 0.05
    inconclusive: str = "warn"  # pass | warn | fail

    def apply(self, result: dict[str, Any], comparisons: list[CaseComparison]) -> list[str]:
        """Record the comparisons on ``result``; fail it on a regression; return warnings to show."""
        own = [cc for cc in comparisons if cc.nodeid == result.get("nodeid")]
        result["comparisons"] = [cc.as_dict() for cc in own]
        fail, warn = compare.gate(own, self.inconclusive)
        if fail and result.get("verdict") != "error":
            result["verdict"] = "failed"
            result["reason"] = "; ".join([r for r in [result.get("reason", "")] if r] + [cc.reason for cc in fail])
        return [cc.reason for cc in warn]


def against_baseline(gate: Gate, result: dict[str, Any], baseline: list[dict[str, Any]],
                     max_regression: float | None = None, *, auto: bool = False) -> list[str]:
    """Compare one case with the baseline run's results (the case's own keyword overrides the threshold).

    ``auto``: the case ran with repeat="auto", so the sequential test's verdict is the one that stopped it.
    """
    mine = [b for b in baseline if b.get("nodeid") == result.get("nodeid")]
    threshold = max_regression or gate.max_regression
    if auto:
        ccs = sequential.compare_runs(mine, [result], max_regression=threshold, metrics=METRICS, final=True)
    else:
        ccs = compare.compare_runs(mine, [result], max_regression=threshold, metrics=METRICS)
    return gate.apply(result, _ttft_floor(ccs, mine, [result]))


def run_ab(measure_a: Callable[[], Result], measure_b: Callable[[], Result], trials: int, gate: Gate,
           max_regression: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """Measure A and B interleaved ABBA (``trials`` each), judge B against A; returns B's summary and warnings."""
    arms: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for arm in compare.ab_order(trials):
        arms[arm].append((measure_a if arm == "A" else measure_b)().as_dict())
    ccs = compare.compare_ab(arms["A"], arms["B"], max_regression=max_regression or gate.max_regression,
                             metrics=METRICS)
    return _ab_summary(arms, _ttft_floor(ccs, arms["A"], arms["B"]), gate)


def until_baseline(gate: Gate, nodeid: str, baseline: list[dict[str, Any]],
                   max_regression: float | None = None) -> sequential.Until:
    """The runner's ``until`` for repeat="auto" against a stored run (same metrics and noise floor as the gate)."""
    return sequential.until_baseline(baseline, nodeid, max_regression=max_regression or gate.max_regression,
                                     metrics=METRICS, judge=_ttft_floor)


def run_ab_auto(measure_a: Callable[[], Result], measure_b: Callable[[], Result], max_repeat: int, gate: Gate,
                max_regression: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """As ``run_ab`` with repeat="auto": ABBA rounds until the sequential test decides, ``max_repeat`` per arm."""
    a, b, ccs = sequential.run_ab(lambda: measure_a().as_dict(), lambda: measure_b().as_dict(),
                                  max_repeat=max_repeat, max_regression=max_regression or gate.max_regression,
                                  metrics=METRICS, judge=_ttft_floor)
    return _ab_summary({"A": a, "B": b}, ccs, gate)


def _ab_summary(arms: dict[str, list[dict[str, Any]]], ccs: list[CaseComparison], gate: Gate
                ) -> tuple[dict[str, Any], list[str]]:
    trials = len(arms["B"])
    summary = dict(arms["B"][-1])
    summary["verdict"] = "failed" if any(r["verdict"] == "failed" for r in arms["B"]) else summary["verdict"]
    summary["reason"] = "; ".join(dict.fromkeys(r["reason"] for r in arms["B"] if r.get("reason")))
    summary["ab"] = {"trials": trials, "a_endpoint": arms["A"][0]["endpoint"], "b_endpoint": summary["endpoint"],
                     "a_decode_tps": [r["decode_tps"] for r in arms["A"]],
                     "b_decode_tps": [r["decode_tps"] for r in arms["B"]]}
    warnings = gate.apply(summary, ccs)
    if summary.get("kind") == "load_sweep":
        warnings += crossover.apply(summary, arms["A"], arms["B"], gate.inconclusive)
    return summary, warnings


def _median_ttft(results: list[dict[str, Any]]) -> float | None:
    values = [v for r in results for v in compare.trials(r, "ttft_s")]
    return float(np.median(values)) if values else None


def _ttft_floor(ccs: list[CaseComparison], base: list[dict[str, Any]], cand: list[dict[str, Any]]
                ) -> list[CaseComparison]:
    """A TTFT 'regression' smaller than TTFT_FLOOR_S in absolute terms passes, saying why."""
    b, c = _median_ttft(base), _median_ttft(cand)
    if b is None or c is None or abs(c - b) >= TTFT_FLOOR_S:
        return ccs
    out = []
    for cc in ccs:
        if cc.metric == "ttft_s" and cc.verdict in ("regressed", "inconclusive", "improved"):
            why = f"ttft_s {b * 1000:.1f} -> {c * 1000:.1f} ms: within the {TTFT_FLOOR_S * 1000:.0f} ms noise floor"
            cc = replace(cc, verdict="passed", reason=why)
        out.append(cc)
    return out


def comparisons_of(results: list[dict[str, Any]]) -> list[CaseComparison]:
    """Rebuild comparison objects from result dicts (they travel as plain data, e.g. across xdist)."""
    out = []
    for r in results:
        for d in r.get("comparisons") or []:
            c = d.get("comparison")
            out.append(CaseComparison(d["nodeid"], d.get("ctx"), d.get("metric"), d["verdict"], d["reason"],
                                      Comparison(**c) if c else None, d.get("q"), d.get("users")))
    return out
