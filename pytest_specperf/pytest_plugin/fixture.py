"""The ``specperf`` fixture's object: a marker case's ``.result`` and direct measurements."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.result_view import ResultView
from pytest_specperf.compare import gates as gating
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.measure import repeats
from pytest_specperf.pytest_plugin.keys import RESULT_OBJ, RESULTS, SpecperfWarning
from pytest_specperf.pytest_plugin.recording import keep_result
from pytest_specperf.run import registry
from pytest_specperf.run.target import EndpointSession


class SpecperfFixture:
    """What a perf case sees: ``.result`` for its marker, and direct calls measuring on the same endpoint."""

    def __init__(self, item: pytest.Item, session: EndpointSession) -> None:
        self._item = item
        self._session = session

    @property
    def result(self) -> ResultView:
        """The result of this test's marker case (measured once, before the test body ran)."""
        r = self._item.stash.get(RESULT_OBJ, None)
        if r is None:
            raise ConfigError("specperf.result needs a perf marker on the test, e.g. "
                              "@pytest.mark.sustained(tokens=500); or call specperf.sustained(...)")
        return r

    def _direct(self, kind: str, kwargs: dict[str, Any]) -> ResultView:
        try:
            spec = build_spec(kind, kwargs, base=self._item.path.parent,
                              default_prompts=self._session.settings.prompts)
        except ConfigError as exc:
            raise ConfigError(f"specperf.{exc}") from None  # "specperf.sustained(): unknown keyword ..."
        done = self._item.stash.get(RESULTS, [])
        n = sum(1 for r in done if r.kind == kind)
        call = 1 + sum(1 for r in done if r.call is not None)  # tells a test's direct calls apart
        try:
            nodeid = f"{self._item.nodeid}#{kind}{n}"
            runner = self._session.runner
            # a case that sends at once repeats as whole trials, as its marker does
            result = (repeats.run_trials(lambda s: runner.run(s, nodeid), spec, gating.Gate())
                      if repeats.whole_case(spec) else runner.run(spec, nodeid))
        except MeasurementError as exc:
            failed = registry.error_record(self._item.nodeid, spec, str(exc))
            keep_result(self._item, dataclasses.replace(failed, call=call))
            raise
        result.nodeid = self._item.nodeid
        result.call = call
        keep_result(self._item, result)
        for warning in result.warnings:
            self._item.warn(SpecperfWarning(warning))
        return ResultView.of(result)  # the type specperf.result gives: one result type, whatever the route

    def sustained(self, **kwargs: Any) -> ResultView:
        """Measure a sustained case now (same keywords as the marker)."""
        return self._direct("sustained", kwargs)

    def two_point(self, **kwargs: Any) -> ResultView:
        """Measure a two-point case now (same keywords as the marker)."""
        return self._direct("two_point", kwargs)

    def ctx_sweep(self, **kwargs: Any) -> ResultView:
        """Measure a context sweep now (same keywords as the marker)."""
        return self._direct("ctx_sweep", kwargs)

    def load_sweep(self, **kwargs: Any) -> ResultView:
        """Measure a concurrency sweep now (same keywords as the marker)."""
        return self._direct("load_sweep", kwargs)

    def rate(self, **kwargs: Any) -> ResultView:
        """Measure an open-loop rate case now (same keywords as the marker)."""
        return self._direct("rate", kwargs)

    def capacity(self, **kwargs: Any) -> ResultView:
        """Search the highest rate within the SLO now (same keywords as the marker)."""
        return self._direct("capacity", kwargs)

    def session(self, **kwargs: Any) -> ResultView:
        """Measure multi-turn sessions now (same keywords as the marker)."""
        return self._direct("session", kwargs)
