"""A run that regressed against its history names the cause, from the earlier runs its verdict rests on (a real
SQLite store; hand-built results whose steps and tokens per step are known)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_specperf.cases.result_parts import Acceptance, ChangePoint, HistoryEntry
from pytest_specperf.cases.results import StreamResult, SustainedResult
from pytest_specperf.compare import cause
from pytest_specperf.history import against_history
from pytest_specperf.report.views import cause as views_cause
from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target


def _result(rng: np.random.Generator, step_ms: float, accept: float) -> SustainedResult:
    """A case whose 5 streams decode ``accept`` tokens per step of ``step_ms`` (1 % noise), as the server counted."""
    rate = 1000.0 * accept / step_ms
    decode = [float(rate * np.exp(rng.normal(0, 0.01))) for _ in range(5)]
    streams = [StreamResult(prompt_tokens=200, completion_tokens=256, ttft_s=0.05, total_s=2.0, decode_tps=d,
                            client_tps=d, window_tokens=None, window_tps=[], early_tps=None, late_tps=None,
                            drift=None, trend_p=None, stalls=[], tokens_per_chunk=accept, count_source="usage",
                            counts_exact=True) for d in decode]
    return SustainedResult(kind="sustained", endpoint="http://x", model="m", server="sim", ctx=200, prompt_tokens=200,
                           nodeid="t::a", decode_tps=float(np.median(decode)), ttft_s=0.05, tokens_per_chunk=accept,
                           acceptance=Acceptance(accept, None, "metrics", True), streams=streams, repeat=5)


def _meta(i: int) -> dict:
    return {"created": f"2026-01-{i + 1:02d}T00:00:00Z", "model": "m", "server": "sim", "commit": {"id": f"c{i:02d}"}}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return schema.open_store(Store(Target(path=tmp_path / "history.sqlite")))


@pytest.mark.parametrize(("step_ms", "accept", "named"), [(25.0, 3.0, "step time"), (20.0, 2.4, "acceptance")])
def test_a_regression_against_the_history_names_its_cause(store: Store, step_ms: float, accept: float,
                                                           named: str) -> None:
    rng = np.random.default_rng(5)
    for i in range(7):
        records.record_run(store, [_result(rng, 20.0, 3.0)], _meta(i))
    cand = _result(rng, step_ms, accept)
    against_history.judge(store, cand, {}, max_regression=0.05)
    (entry,) = [e for e in cand.history or [] if e.metric == "decode_tps"]
    assert cand.verdict == "failed" and entry.verdict == "regressed"
    assert entry.cause is not None and entry.cause.named == named and entry.cause.sides == ["history", "now"]
    figures = {f.name: (f.base, f.now) for f in entry.cause.factors}
    assert figures["acceptance"] == pytest.approx((3.0, accept))
    assert figures["step time"] == pytest.approx((20.0, step_ms), rel=0.02)
    assert entry.cause.text in entry.reason and entry.cause.text in cand.reason
    # the TTFT held: no cause for it
    assert all(e.cause is None for e in cand.history or [] if e.metric == "ttft_s")
    # the report's table: the history's figures and this run's side by side
    (shown,) = views_cause.tables(cand)
    assert shown.title == f"why decode_tps regressed against its history: the cause: {named}"
    assert shown.header == ["", "history", "now", "change", "explains"]


def _entry(began: int | None, changes: list[int]) -> HistoryEntry:
    marks = [ChangePoint(index=0, run=r, before=1.0, after=1.0, effect=0.0) for r in changes]
    start = next((c for c in marks if c.run == began), None)
    return HistoryEntry(metric="decode_tps", verdict="regressed", runs=5, value=1.0, predicted=1.0,
                        interval=[0.9, 1.1], effect=-0.2, changes=marks, began=start)


def test_the_runs_a_history_cause_reads() -> None:
    ids = list(range(1, 21))
    # a step against the prediction: the runs since the last change point, the latest five
    assert cause.judged_runs(_entry(None, []), ids) == [16, 17, 18, 19, 20]
    assert cause.judged_runs(_entry(None, [18]), ids) == [18, 19, 20]
    # a change that began at run 12 (after one at run 9): the level before it
    assert cause.judged_runs(_entry(12, [9, 12]), ids) == [9, 10, 11]
    assert cause.judged_runs(_entry(12, [12]), ids) == [7, 8, 9, 10, 11]
