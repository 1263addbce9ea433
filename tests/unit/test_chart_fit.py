"""Charts fit their data: drawn with matplotlib and measured in the drawn figure (boxes in pixels), not by
reading the code that placed them."""

from __future__ import annotations

import itertools
import math
from typing import Any

import matplotlib as mpl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from pytest_specperf.cases.result_parts import CaseComparison, Comparison
from pytest_specperf.cases.results import AbSummary, SessionResult
from pytest_specperf.report import drawing
from pytest_specperf.report.views import base as figures
from pytest_specperf.report.views import categories

#: The fields every result has (a view reads a complete result, typed or as JSON).
BASE = {"endpoint": "http://127.0.0.1:1", "model": "m", "server": "sim", "ctx": 100, "prompt_tokens": None}


def _drawn(chart: figures.Chart) -> tuple[Any, Any]:
    with mpl.rc_context(drawing._RC):
        fig = drawing._figure([chart])
        FigureCanvasAgg(fig).draw()
    return fig, fig.axes[0]


def _overlap(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _streams(n: int) -> figures.Chart:
    series = [figures.Series(f"stream {i + 1}", [0.0, 1.0, 2.0], [10.0 + i, 11.0 + i, 12.0 + i]) for i in range(n)]
    return figures.Chart("rate", "rate per window", "decode tokens", "tok/s", series,
                         [figures.Level(11.0, "early median"), figures.Level(12.0, "late median")])


def test_a_chart_of_many_streams_keeps_its_legend_short_and_below_the_x_label() -> None:
    for n in (3, 24):
        _fig, ax = _drawn(_streams(n))
        legend = ax.get_legend()
        texts = [t.get_text() for t in legend.get_texts()]
        assert len(texts) <= drawing.LEGEND_ENTRIES
        if n == 24:
            assert texts[-1] == "... and 19 more series (each drawn alike)"  # 26 entries: 7 shown, 19 counted
        box, label = legend.get_window_extent(), ax.xaxis.label.get_window_extent()
        assert box.y1 <= label.y0 + 1, (n, box, label)  # the legend starts below the x label, never over it
        assert box.height < ax.get_window_extent().height  # and is shorter than the chart


def test_category_names_never_run_together() -> None:
    names = ["multi_turn", "translation", "summarization", "qa", "math_reasoning", "rag", "coding", "tool_call"]
    for shown in (names[:2], names[2:5], names):
        chart = figures.Chart("c", "decode per category", "category", "tok/s",
                              [figures.Series("d", [float(i) for i in range(len(shown))], [50.0] * len(shown), "bars")],
                              categories=shown)
        fig, ax = _drawn(chart)
        labels = ax.get_xticklabels()
        boxes = [t.get_window_extent() for t in labels]
        assert [t.get_text() for t in labels] == shown
        slant = labels[0].get_rotation()
        if slant == 0:
            for a, b in itertools.pairwise(boxes):
                assert not _overlap(a, b), shown
        else:  # parallel slanted lines of text: apart by the ticks' spacing across their slant, more than a line
            ticks = [ax.transData.transform((x, 0))[0] for x in range(len(shown))]
            line = labels[0].get_fontsize() * fig.dpi / 72
            assert min(b - a for a, b in itertools.pairwise(ticks)) * math.sin(math.radians(slant)) > line
        legend = ax.get_legend()
        label = ax.xaxis.label.get_window_extent()
        assert all(not _overlap(label, b) for b in boxes), shown  # the x label sits below slanted names too
        assert legend is None or legend.get_window_extent().y1 <= min(b.y0 for b in boxes) + 1


def test_a_category_floor_is_drawn_over_its_own_bar_and_ttft_in_ms() -> None:
    cats = {"math_reasoning": {"n": 3, "accept_len": 3.1, "min_accept_len": 4.0, "ttft_p50_s": 0.0022},
            "summarization": {"n": 3, "accept_len": 2.9, "min_accept_len": 2.0, "ttft_p50_s": 0.0068},
            "translation": {"n": 3, "accept_len": 2.95, "ttft_p50_s": 0.0051}}
    charts = {c.id: c for c in categories.charts({**BASE, "kind": "sustained", "categories": cats})}
    accept = charts["categories-accept_len"]
    spans = {lv.label: lv.span for lv in accept.levels}
    assert spans == {"math_reasoning min_accept_len 4": [-0.4, 0.4], "summarization min_accept_len 2": [0.6, 1.4]}
    _fig, ax = _drawn(accept)
    bars = sorted(ax.patches, key=lambda p: p.get_x())
    lines = [ln for ln in ax.get_lines() if ln.get_gid() and "-level" in ln.get_gid()]
    for line, bar in zip(lines, bars, strict=False):
        x0, x1 = line.get_xdata()
        # over its own bar, and clear of its neighbours' (bars are 0.6 wide, one apart)
        assert x0 <= bar.get_x() and x1 >= bar.get_x() + bar.get_width() and x1 - x0 < 1.0
    ttft = charts["categories-ttft_p50_ms"]
    assert ttft.ylabel == "ms" and ttft.series[0].y == pytest.approx([2.2, 6.8, 5.1])
    assert ttft.series[0].labels == ["2.2", "6.8", "5.1"]  # never 0.00 and 0.01 (seconds)


def test_a_sweeps_category_charts_name_their_level() -> None:
    sweep = {**BASE, "kind": "load_sweep", "levels": [{"concurrency": 1}, {"concurrency": 8}], "categories_users": 8,
             "categories": {"qa": {"n": 8, "decode_tps_p50": 40.0}}}
    (chart,) = categories.charts(sweep)
    assert chart.title.endswith(", at 8 users")


def test_bars_start_at_zero() -> None:
    chart = figures.Chart("c", "decode per category", "category", "tok/s",
                          [figures.Series("d", [0.0, 1.0], [2711.98, 2711.63], "bars")], categories=["a", "b"])
    _fig, ax = _drawn(chart)
    assert ax.get_ylim()[0] == 0  # bars cut at 2550 would read as one twice the other


def _comparison(metric: str) -> Comparison:
    return Comparison(metric=metric, direction="higher", verdict="passed", effect=0.1, ci=[0.05, 0.15], change=0.1,
                      change_ci=[0.05, 0.15], p=0.5, n_base=2, n_cand=2, mde=0.1, noise=0.01, noise_source="measured",
                      trials_needed=5, threshold=0.05, method="welch", reason="")


def test_a_sessions_comparison_is_its_own_chart_with_both_sides() -> None:
    cc = [CaseComparison("t.py::s", None, m, "passed", "", _comparison(m), users=2)
          for m in ("decode_tps", "total_tps")]
    session = SessionResult(kind="session", endpoint="http://127.0.0.1:1", model="m", server="sim", ctx=100,
                            prompt_tokens=None, nodeid="t.py::s", users=2, comparisons=cc, total_tps=80.0,
                            ab=AbSummary(trials=2, a_endpoint="a", b_endpoint="b", a={}, a_decode_tps=[45.0, 46.0],
                                         b_decode_tps=[50.0, 51.0]))
    charts = figures.comparison_charts(session, [])
    assert [c.xlabel for c in charts] == ["", ""]  # never a "users" axis with one point
    assert [s.name for s in charts[0].series][:2] == ["A", "B"]
    assert charts[1].series[0].name == "A (no trials kept)"  # A keeps no total_tps trials: said, not recoloured


def test_an_ab_categorys_speedup_and_trials_survive_the_typed_result() -> None:
    # A/B writes each category's speedup, its interval and B's trials (compare/categories.py); a view reads the
    # result typed, so a field the record lacked would vanish from the chart and the facts without a word.
    cats = {"qa": {"n": 6, "n_prompts": 2, "decode_tps_p50": 40.0, "trials": 3, "speedup": 1.5,
                   "speedup_interval": [1.2, 1.9]}}
    result = {**BASE, "kind": "sustained", "categories": cats}
    s = {c.id: c for c in categories.charts(result)}["categories-speedup"].series[0]
    assert (s.y, s.low, s.high) == ([1.5], [1.2], [1.9])
    assert categories.facts(result)[0][1].startswith("n=6 (2 prompts; 3 trials of n=2)")
