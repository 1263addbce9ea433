"""Runs case specs against one endpoint: looks the kind up, holds the endpoint lock, times, sizes and judges.

What a case measures and how it is judged is its kind's (``registry``); what kinds share is ``context``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.closed_loop import CtxSweepSpec, LoadSweepSpec, SustainedSpec, TwoPointSpec
from pytest_specperf.cases.open_loop import CapacitySpec, RateSpec
from pytest_specperf.cases.registry import fit_spec
from pytest_specperf.cases.results import (
    CapacityResult,
    LoadSweepResult,
    RateResult,
    Result,
    SessionResult,
    SustainedResult,
    SweepResult,
    TwoPointResult,
)
from pytest_specperf.cases.session import SessionSpec
from pytest_specperf.endpoint.client import Client, Progress
from pytest_specperf.endpoint.locks import endpoint_lock
from pytest_specperf.errors import MeasurementError
from pytest_specperf.prompts.exact_length import Prompt
from pytest_specperf.run import cached_share
from pytest_specperf.run.context import CaseContext, Until
from pytest_specperf.run.floors import JudgeSettings
from pytest_specperf.run.registry import kind_for
from pytest_specperf.scale.senders import Senders


class Runner:
    """Measures specs on one endpoint; one request at a time (a file lock per endpoint URL)."""

    def __init__(self, client: Client, *, max_drift: float = 0.15, inconclusive: str = "warn",
                 progress: Callable[[str], Progress | None] | None = None,
                 size_cap: tuple[int, int, float] | None = None, senders: Senders | None = None) -> None:
        self.size_cap = size_cap  # (max ctx, max tokens, max floor) for small local engines
        # inconclusive: what a drift the gate cannot decide does: pass | warn | fail
        self.context = CaseContext(client, JudgeSettings(max_drift, inconclusive), progress, senders)

    @property
    def client(self) -> Client:
        """The endpoint's client."""
        return self.context.client

    @property
    def judging(self) -> JudgeSettings:
        """The run's default drift limit and policy for undecided gates."""
        return self.context.judging

    def prompt(self, kind: str, ctx: int, variant: int, api: str = "completions") -> Prompt:
        """A prompt of ``ctx`` server tokens, the same text every call (the context's cache; its fixed tag)."""
        return self.context.built(kind, ctx, variant, api)

    def warm_up(self) -> None:
        """One short request before the first measured one (once per runner)."""
        self.context.warm_up()

    def run(self, spec: CaseSpec, nodeid: str = "", *, until: Until | None = None) -> Result:
        """Measure one case and judge it (``until``: the comparison that ``repeat="auto"`` waits for)."""
        self.client.info or self.client.detect()
        asked = spec
        if self.size_cap is not None:
            spec = fit_spec(spec, *self.size_cap)
        kind = kind_for(spec)
        self._check_context(*kind.context_needed(spec), spec)
        self.context.senders.start()  # every host reached and checked before this case sends anything
        with endpoint_lock(self.client.url):
            self.warm_up()
            started = time.time()
            result: Result = self._measure(spec, nodeid, until)
            result.started_at, result.finished_at = started, time.time()
        if spec is not asked:
            result.sized_down = {k: v for k, v in spec.as_dict().items() if v != asked.as_dict()[k]}
        kind.judge(result, spec, self.judging)
        return result

    def _measure(self, spec: CaseSpec, nodeid: str, until: Until | None = None) -> Any:
        """The kind's measurement under the case's ``prefix_cache``, and the cached share of its requests."""
        self.context.prefix_cache = spec.prefix_cache
        self.client.cold = spec.prefix_cache == "cold"
        try:
            result = kind_for(spec).measure(self.context, spec, nodeid, until)
        finally:
            self.context.prefix_cache, self.client.cold = "cold", True
        cached_share.attach(result, self.context.cold_allowance(spec.api), spec.prefix_cache)
        return result

    def _check_context(self, ctx: int, out: int, spec: CaseSpec | None = None) -> None:
        """A case that cannot fit the server's advertised context fails now, before a prompt is built."""
        info = self.client.info or self.client.detect()
        limit = info.max_context
        if limit is None:
            return
        if ctx + out > limit:
            # A session's last prompt is the whole conversation: its turns, not its first message, fill it.
            turns = getattr(spec, "turns", None)
            what, lower = (
                (f"a {turns}-turn conversation's last prompt of {ctx} tokens (ctx {getattr(spec, 'ctx', '?')} and "
                 f"the {turns - 1} turns and answers before it)", "turns, turn_ctx, ctx or tokens")
                if isinstance(turns, int) and turns > 1 else (f"ctx {ctx}", "ctx or tokens"))
            raise MeasurementError(
                f"{what} + {out} generated tokens need {ctx + out} tokens of context, but {self.client.url} "
                f"serves {self.client.model} with {limit} ({info.context_source}); lower {lower}, or "
                "start the server with a longer context")

    # -- one kind, measured without lock or verdict (the registry's kind, as ``run`` calls it) ------------

    def sustained(self, spec: SustainedSpec, nodeid: str = "", *, until: Until | None = None) -> SustainedResult:
        """Measure a sustained case (``concurrency`` > 1: its streams at once)."""
        result: SustainedResult = self._measure(spec, nodeid, until)
        return result

    def two_point(self, spec: TwoPointSpec, nodeid: str = "", *, until: Until | None = None) -> TwoPointResult:
        """Measure a two-point case."""
        result: TwoPointResult = self._measure(spec, nodeid, until)
        return result

    def ctx_sweep(self, spec: CtxSweepSpec, nodeid: str = "") -> SweepResult:
        """Measure a context sweep."""
        result: SweepResult = self._measure(spec, nodeid)
        return result

    def load_sweep(self, spec: LoadSweepSpec, nodeid: str = "") -> LoadSweepResult:
        """Measure a concurrency sweep (each level judged on its own floors)."""
        result: LoadSweepResult = self._measure(spec, nodeid)
        return result

    def rate(self, spec: RateSpec, nodeid: str = "") -> RateResult:
        """Measure an open-loop rate case."""
        result: RateResult = self._measure(spec, nodeid)
        return result

    def capacity(self, spec: CapacitySpec, nodeid: str = "") -> CapacityResult:
        """Search the highest rate within the SLO."""
        result: CapacityResult = self._measure(spec, nodeid)
        return result

    def session(self, spec: SessionSpec, nodeid: str = "") -> SessionResult:
        """Measure multi-turn sessions (``users`` at once)."""
        result: SessionResult = self._measure(spec, nodeid)
        return result
