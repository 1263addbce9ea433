"""The one map from a case kind to its view: what the report shows for results of that kind.

A new kind adds its view function (in ``single``, ``load`` or a module of its own, built on ``base``) and one
line in ``VIEWS``. Kinds without a view get the generic one: a table of their scalar fields.
"""

from __future__ import annotations

from typing import Any

from pytest_specperf.report.views import categories, load, session, single, trend
from pytest_specperf.report.views.arms import arms_view
from pytest_specperf.report.views.base import CaseView, View, comparison_charts, generic

VIEWS: dict[str, View] = {
    "sustained": single.sustained,
    "two_point": single.two_point,
    "ctx_sweep": single.ctx_sweep,
    "load_sweep": load.load_sweep,
    "rate": load.rate,
    "capacity": load.capacity,
    "session": session.session,
}


def view(result: dict[str, Any], baseline: list[dict[str, Any]] | None = None) -> CaseView:
    """The view of one result: its kind's view (the generic one otherwise), plus its comparisons."""
    render = VIEWS.get(str(result.get("kind", "")), generic)
    if result.get("verdict") == "error":
        render = generic  # nothing was measured: show what is known, draw nothing
    v = render(result, baseline or [])
    v.charts += comparison_charts(result, baseline or [])
    v.facts += categories.facts(result)  # a prompt file's categories, whatever the kind
    v.charts += categories.charts(result)
    v.facts += trend.facts(result)  # judged against its history (--specperf-history): the trend per metric
    v.charts += trend.charts(result)
    if render is not generic:  # a case measured on several arms: the users x arms grid and its chart
        extra = arms_view(result)
        v.facts += extra.facts
        v.charts += extra.charts
    return v
