"""The one map from a case kind to its view: what the report shows for results of that kind.

A new kind adds its view function (in ``single``, ``load`` or a module of its own, built on ``base``) and one
line in ``VIEWS``. Kinds without a view get the generic one: a table of their scalar fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_specperf.cases.results import ErrorRecord
from pytest_specperf.cases.saved_results import has_record, is_error_record
from pytest_specperf.report.views import categories, cause, load, session, single, trend
from pytest_specperf.report.views.arms import arms_view
from pytest_specperf.report.views.base import (
    CaseView,
    ResultLike,
    View,
    comparison_charts,
    generic,
    typed,
)

VIEWS: dict[str, View] = {
    "sustained": single.sustained,
    "two_point": single.two_point,
    "ctx_sweep": single.ctx_sweep,
    "load_sweep": load.load_sweep,
    "rate": load.rate,
    "replay": load.rate,  # a replay is a rate case over the trace's own arrivals
    "capacity": load.capacity,
    "session": session.session,
}


def view(result: ResultLike, baseline: Sequence[ResultLike] | None = None) -> CaseView:
    """The view of one result: its kind's view (the generic one otherwise), plus its comparisons."""
    if isinstance(result, ErrorRecord):
        return generic(result, [])  # nothing was measured: shown as recorded, nothing drawn
    if isinstance(result, Mapping) and not has_record(result):
        if is_error_record(result):
            # An errored case's record holds only what the case asked (no endpoint, no figures): it is not a
            # measured result to type, and nothing in it can be drawn. Shown as recorded.
            return generic(result, [])
        # A kind without a result record (a kind being added, a run saved by a newer version) cannot be
        # typed: its own view, or the table of its fields, reads it as recorded.
        kind = str(result.get("kind"))  # not result data: a kind this version has no record of
        return VIEWS.get(kind, generic)(result, baseline or [])
    r = typed(result)
    render = VIEWS.get(r.kind, generic)
    if r.verdict == "error":
        render = generic  # nothing was measured: show what is known, draw nothing
    v = render(r, baseline or [])
    v.charts += comparison_charts(r, baseline or [])  # types the baseline's results only where it draws them
    v.tables += cause.tables(r)  # what each moved comparison comes from: both sides' figures
    v.facts += categories.facts(r)  # a prompt file's categories, whatever the kind
    v.charts += categories.charts(r)
    v.facts += trend.facts(r)  # judged against its history (--specperf-history): the trend per metric
    v.charts += trend.charts(r)
    if render is not generic:  # a case measured on several arms: the users x arms grid and its chart
        extra = arms_view(r)
        v.facts += extra.facts
        v.charts += extra.charts
    return v
