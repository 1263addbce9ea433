"""Drawing the views' charts with matplotlib: inline SVG for the HTML report, a PNG or SVG image per case.

matplotlib is used through its object API (``Figure``, no pyplot), so nothing global is touched and no
window or display is needed. SVG keeps text as text (small, searchable), and every drawn series carries
an id (``<chart id>-s<index>``), so a reader (or a test) can find the path that draws a given series.
"""

from __future__ import annotations

import io
import math
import textwrap
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FuncFormatter,
    LogFormatterSciNotation,
    MaxNLocator,
    NullFormatter,
    NullLocator,
    ScalarFormatter,
)
from matplotlib.transforms import offset_copy

from pytest_specperf.report.views.base import CaseView, Chart, Series

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"]
#: Shaded spans by the first word of their label.
BAND_COLORS = {"early": "#2ca02c", "late": "#d62728", "bracket": "#ff7f0e"}
LEVEL_COLORS = ["#2ca02c", "#d62728", "#000000", "#7f7f7f"]
#: A level's verdict written at its point, coloured as the report colours verdicts.
VERDICT_COLORS = {"passed": "#1a7f37", "improved": "#1a7f37", "regressed": "#cf222e", "failed": "#cf222e",
                  "below": "#cf222e", "inconclusive": "#8250df"}
#: Characters per title line before it wraps (a chart is about 560 px wide).
TITLE_CHARS = 66
#: Characters of category names that fit level under a chart (about 560 px at font size 9) before they slant.
CATEGORY_CHARS = 40
#: Legend entries shown below a chart; past this, the rest are counted in one entry (24 streams' names would make
#: a legend taller than the chart).
LEGEND_ENTRIES = 8
#: Point markers by the start of a series' name: misses and errors are red crosses, floors a bar at their level.
MARKERS = {"stalls": "x", "missed": "x", "failed": "x", "refused": "x", "floor": "_", "knee": "*"}
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text: a fraction of the size of glyph outlines
    "path.simplify": False,  # every data point is drawn (and can be found in the SVG)
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
FORMATS = ("svg", "png")
# No <metadata> block (creator URL, RDF namespaces): nothing in the report names an outside address.
_SVG_META = {"Date": None, "Creator": None, "Format": None, "Type": None}


def _draw(ax: Any, chart: Chart) -> None:
    for band in chart.bands:
        span = ax.axvspan if band.axis == "x" else ax.axhspan
        color = BAND_COLORS.get(band.label.split(" ")[0], "#cccccc")
        span(band.lo, band.hi, color=color, alpha=0.12, lw=0, label=band.label)
    _draw_series(ax, chart)
    for j, level in enumerate(chart.levels):
        style = {"color": LEVEL_COLORS[j % len(LEVEL_COLORS)], "lw": 1, "ls": "--" if level.style == "dashed" else "-",
                 "label": level.label}
        if level.span is not None and level.axis == "y":  # one category's floor: over its own bar only
            ax.plot(level.span, [level.y, level.y], gid=f"{chart.id}-level{j}", **style)
        else:
            (ax.axvline if level.axis == "x" else ax.axhline)(level.y, **style)
    if chart.xscale == "log":
        _log2_axis(ax)
    else:
        _plain_axis(ax.xaxis)
    if chart.yscale == "log":
        ax.set_yscale("log")
        _plain_log_axis(ax.yaxis)
    else:
        _plain_axis(ax.yaxis)
    if chart.categories:
        # Many or long names would run together ("summarizationtranslation"): slanted, each ending at its tick.
        slant = sum(len(c) for c in chart.categories) > CATEGORY_CHARS or len(chart.categories) > 4
        ax.set_xticks(range(len(chart.categories)), chart.categories, rotation=30 if slant else 0,
                      ha="right" if slant else "center", rotation_mode="anchor" if slant else "default")
        ax.set_xlim(-0.6, len(chart.categories) - 0.4)
    _readable_ylim(ax, chart)
    if chart.yscale == "log":
        _narrow_log_ticks(ax)
    # A long title (a crossover sentence) wraps instead of running off the figure.
    ax.set_title("\n".join(textwrap.wrap(chart.title, TITLE_CHARS)), loc="left")
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(chart.ylabel)
    ax.grid(alpha=0.3, lw=0.5)
    if len(chart.series) + len(chart.levels) + len(chart.bands) > 1 or any(s.low is not None for s in chart.series):
        _legend(ax, _below_x_label(chart))


def _below_x_label(chart: Chart) -> float:
    """Points from the axes' foot to below its tick labels and x label: where the legend may start.

    In points, not a share of the axes: a tall legend shrinks the axes, and a share would then move it up into
    the label."""
    ticks: float = 9 + 4  # a line of tick labels and its pad
    if chart.categories and (sum(len(c) for c in chart.categories) > CATEGORY_CHARS or len(chart.categories) > 4):
        ticks = 4 + 0.5 * 5.5 * max(len(c) for c in chart.categories) + 9  # slanted 30 degrees: half its length
    return ticks + (9 + 6 if chart.xlabel else 0)


def _legend(ax: Any, below: float) -> None:
    """Below the axes and their x label, never over the data (error bars, points); at most LEGEND_ENTRIES entries,
    the rest counted in the last, so a chart of many streams keeps a legend shorter than itself."""
    handles, labels = ax.get_legend_handles_labels()
    if len(handles) > LEGEND_ENTRIES:
        keep = LEGEND_ENTRIES - 1
        rest = len(handles) - keep
        handles = [*handles[:keep], Line2D([], [], ls="none")]
        labels = [*labels[:keep], f"... and {rest} more series (each drawn alike)"]
    anchor = offset_copy(ax.transAxes, fig=ax.figure, y=-below, units="points")
    ax.legend(handles, labels, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(0.0, 0.0),
              bbox_transform=anchor, ncols=2 if len(handles) <= 4 else 3)


def _draw_series(ax: Any, chart: Chart) -> None:
    for i, s in enumerate(chart.series):
        gid = f"{chart.id}-s{i}"
        color = COLORS[i % len(COLORS)]
        if s.style == "bars":
            ax.bar(s.x, s.y, color=[COLORS[j % len(COLORS)] for j in range(len(s.x))], gid=gid, width=0.6)
        elif s.style == "points":
            marker = next((m for prefix, m in MARKERS.items() if s.name.startswith(prefix)), "o")
            if s.low is not None and s.high is not None:
                err, label = _error_bars(s)
                bars = ax.errorbar(s.x, s.y, yerr=err, fmt="D", color="#000000", capsize=4, label=label)
                # One id per part, so the id of the series names its points alone (the estimates).
                bars.lines[0].set_gid(gid)
                for k, cap in enumerate(bars.lines[1]):
                    cap.set_gid(f"{gid}-cap{k}")
                for k, col in enumerate(bars.lines[2]):
                    col.set_gid(f"{gid}-bars{k}")
            else:
                ax.plot(s.x, s.y, marker, color="#d62728" if marker == "x" else color,
                        ms={"_": 14, "*": 10}.get(marker, 5), mew=2 if marker == "_" else 1, ls="none",
                        label=s.name, gid=gid)
        else:
            if s.name.startswith(("refused", "failed")):  # requests that got no answer: red, as misses are
                color = "#d62728"
            ax.plot(s.x, s.y, "-", color=color, lw=1.3, label=s.name, gid=gid, marker="." if len(s.x) < 40 else None)
        for k, (x, y, text) in enumerate(zip(s.x, s.y, s.labels or [], strict=False)):
            ax.annotate(text, (x, y), xytext=(6, 4), textcoords="offset points", fontsize=7,
                        color=VERDICT_COLORS.get(text, "#333333"), gid=f"{gid}-label{k}")


def _error_bars(s: Series) -> tuple[list[list[float]], str]:
    """Lengths below and above each point; an estimate outside its own interval gets a zero-length side, said so
    in the legend (matplotlib refuses negative lengths)."""
    assert s.low is not None and s.high is not None
    below = [y - lo for y, lo in zip(s.y, s.low, strict=True)]
    above = [hi - y for y, hi in zip(s.y, s.high, strict=True)]
    outside = sum(1 for b, a in zip(below, above, strict=True) if b < 0 or a < 0)
    label = s.name if not outside else (f"{s.name} ({outside} estimate{'s' if outside > 1 else ''} outside "
                                        f"{'their' if outside > 1 else 'its'} interval: bar clipped)")
    return [[max(b, 0.0) for b in below], [max(a, 0.0) for a in above]], label


def _plain_axis(axis: Any) -> None:
    # 300000 prompt tokens read as 300000, not as 3 with a "1e5" offset
    axis.set_major_formatter(ScalarFormatter(useOffset=False))
    axis.get_major_formatter().set_scientific(False)


class _PlainLogFormatter(LogFormatterSciNotation):
    """matplotlib's choice of which log ticks to label, written as plain numbers (60, not 6x10^1)."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}" if super().__call__(x, pos) else ""


def _plain_log_axis(axis: Any) -> None:
    axis.set_major_formatter(_PlainLogFormatter())
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def _narrow_log_ticks(ax: Any) -> None:
    """A log y axis spanning less than a decade (a B/A ratio from 0.85 to 1.3) gets about five evenly spaced plain
    ticks: matplotlib's log ticks would label only 0.9 and 1 there."""
    lo, hi = ax.get_ylim()
    if lo > 0 and hi / lo < 10:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_formatter(NullFormatter())


def _log2_axis(ax: Any) -> None:
    # Doubling users or rates sit evenly apart; ticks read as plain numbers (4, not 2^2).
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


#: How far past the estimates an interval may stretch the y axis: decades on a log axis, spans on a linear one.
INTERVAL_REACH = 2.0


def _readable_ylim(ax: Any, chart: Chart) -> None:
    # A flat series (5.0 tokens/step with float noise) would be autoscaled onto its rounding errors.
    ys = [y for s in chart.series for y in s.y] + [lv.y for lv in chart.levels if lv.axis == "y"]
    if not ys:
        return
    if any(s.low is not None for s in chart.series):
        _interval_ylim(ax, chart, ys)
        return
    if chart.yscale == "log":
        return
    lo, hi = min(ys), max(ys)
    if any(s.style == "bars" for s in chart.series) and lo >= 0:
        ax.set_ylim(0, hi * 1.12 or 1.0)  # a bar's length is its value: cut at 2550 it would read as twice another's
        return
    span = max(abs(hi), abs(lo), 1e-12) * 0.05
    if hi - lo < span:
        mid = (hi + lo) / 2
        ax.set_ylim(mid - span, mid + span)


def _interval_ylim(ax: Any, chart: Chart, ys: list[float]) -> None:
    """Axis limits that show every estimate and reference line: an interval that reaches far past them (2 trials
    give [-100%, +10^20%]) runs off the axis rather than flattening every estimate onto one line."""
    ends = [v for s in chart.series for v in [*(s.low or []), *(s.high or [])]]
    if chart.yscale == "log":
        lo, hi = math.log10(min(ys)), math.log10(max(ys))
        reach = INTERVAL_REACH
        ends = [math.log10(v) for v in ends if v > 0] + [lo - reach] * any(v <= 0 for v in ends)
    else:
        lo, hi = min(ys), max(ys)
        reach = INTERVAL_REACH * max(hi - lo, abs(hi) * 0.1, 1e-12)
    bottom = max(min([lo, *ends]), lo - reach)
    top = min(max([hi, *ends]), hi + reach)
    pad = (top - bottom) * 0.06 or 0.05
    bottom, top = bottom - pad, top + pad
    ax.set_ylim(*((10 ** bottom, 10 ** top) if chart.yscale == "log" else (bottom, top)))


def _figure(charts: list[Chart], width: float = 5.6, row_height: float = 3.4, title: str = "",
            notes: bool = False) -> Figure:
    cols = 1 if len(charts) == 1 else 2
    rows = (len(charts) + cols - 1) // cols
    fig = Figure(figsize=(width * cols, row_height * rows + (0.5 if title else 0)), layout="constrained")
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, TITLE_CHARS * cols)), x=0.01, ha="left", fontsize=10,
                     fontweight="bold")
    for i, chart in enumerate(charts):
        ax = fig.add_subplot(rows, cols, i + 1)
        try:
            _draw(ax, chart)
        except Exception as exc:
            if not notes:
                raise
            _note(ax, chart_note(chart, exc))  # the case's other charts are still drawn
    return fig


def chart_note(chart: Chart, exc: BaseException) -> str:
    """What a report shows in place of a chart that could not be drawn."""
    return f"chart '{chart.title}' could not be drawn ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"


def _note(ax: Any, text: str) -> None:
    ax.clear()
    ax.set_axis_off()
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(text, 60)), ha="center", va="center", color="#d62728",
            transform=ax.transAxes)


def _save(fig: Figure, fmt: str, salt: str) -> bytes:
    buf = io.BytesIO()
    # A salt per figure keeps the ids matplotlib derives (clip paths, markers) unique within one HTML page.
    with mpl.rc_context({**_RC, "svg.hashsalt": salt}):
        fig.savefig(buf, format=fmt, metadata=_SVG_META if fmt == "svg" else None, dpi=100)
    return buf.getvalue()


def svg_inline(chart: Chart, salt: str) -> str:
    """One chart as an ``<svg>`` element to put inside HTML (no XML prolog or doctype)."""
    with mpl.rc_context(_RC):
        fig = _figure([chart])
    text = _save(fig, "svg", salt).decode("utf-8")
    return text[text.index("<svg"):]


def svg_or_note(chart: Chart, salt: str) -> tuple[str, str]:
    """``(svg, "")``, or ``("", note)`` when the chart cannot be drawn: the report shows the note instead."""
    try:
        return svg_inline(chart, salt), ""
    except Exception as exc:  # one chart never takes the report with it
        return "", chart_note(chart, exc)


def case_image(view: CaseView, fmt: str = "png", salt: str = "", title: str = "") -> bytes:
    """All of a case's charts in one image (PNG or SVG), headed by ``title`` (the case and its verdict);
    a chart that cannot be drawn is a note in its place."""
    if fmt not in FORMATS:
        raise ValueError(f"image format {fmt!r}: use one of {', '.join(FORMATS)}")
    with mpl.rc_context(_RC):
        fig = _figure(view.charts, title=title, notes=True)
    return _save(fig, fmt, salt)
