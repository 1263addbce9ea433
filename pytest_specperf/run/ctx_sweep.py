"""The ``ctx_sweep`` case: a two-point measurement at each context length."""

from __future__ import annotations

from typing import ClassVar

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.closed_loop import CtxSweepSpec, TwoPointSpec
from pytest_specperf.cases.result_parts import SweepPoint
from pytest_specperf.cases.results import SweepResult
from pytest_specperf.run.context import CaseContext, Until
from pytest_specperf.run.floors import JudgeSettings, settle
from pytest_specperf.run.two_point import two_point


def ctx_sweep(context: CaseContext, spec: CtxSweepSpec, nodeid: str = "") -> SweepResult:
    """A two-point measurement at each ctx (long = short + tokens)."""
    points: list[SweepPoint] = []
    for c in spec.ctxs:
        tp = TwoPointSpec(ctx=c, content=spec.content, repeat=spec.repeat, short=spec.short,
                          long=spec.short + spec.tokens, api=spec.api, temperature=spec.temperature)
        p = two_point(context, tp, f"{nodeid}@{c}")
        points.append(SweepPoint(ctx=c, prompt_tokens=p.prompt_tokens, decode_tps=p.decode_tps,
                                 t_short_s=p.t_short_s, t_long_s=p.t_long_s, samples_tps=p.samples_tps))
    r: SweepResult = context.new_result(SweepResult, spec, max(spec.ctxs), points[-1].prompt_tokens, nodeid,
                                        points=points, decode_tps=min(p.decode_tps for p in points))
    return r


def problems(r: SweepResult, spec: CtxSweepSpec) -> list[str]:
    """Every point under the floor, in one clause."""
    if spec.min_tps is None:
        return []
    low = [p for p in r.points if p.decode_tps < spec.min_tps]
    if not low:
        return []
    pts = ", ".join(f"{p.decode_tps:.1f} tok/s at ctx {p.prompt_tokens}" for p in low)
    return [f"decode below min_tps {spec.min_tps:g}: {pts}"]


class CtxSweep:
    """The ``ctx_sweep`` kind."""

    name: ClassVar[str] = "ctx_sweep"
    spec_type: ClassVar[type[CaseSpec]] = CtxSweepSpec

    def context_needed(self, spec: CtxSweepSpec) -> tuple[int, int]:
        """The longest ctx, with ``short + tokens`` generated."""
        return max(spec.ctxs), spec.short + spec.tokens

    def measure(self, context: CaseContext, spec: CtxSweepSpec, nodeid: str, until: Until | None = None) -> SweepResult:
        """``ctx_sweep`` (``until`` does not apply: each point keeps its own ``repeat``)."""
        return ctx_sweep(context, spec, nodeid)

    def judge(self, result: SweepResult, spec: CtxSweepSpec, settings: JudgeSettings) -> None:
        """Its floor at every point."""
        settle(result, spec, problems(result, spec), settings.inconclusive)
