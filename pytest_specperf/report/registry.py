"""The one map from an output's name to its format, in the order a run writes them.

The JSON comes first (it is also written after every case); the case images come before the Markdown that
links them; the HTML report, the slowest and likeliest to fail, comes last. A new format adds its module
(a subclass of ``output.Output``) and one line here.
"""

from __future__ import annotations

from pytest_specperf.report.bencher import BencherFile
from pytest_specperf.report.html import HtmlReport
from pytest_specperf.report.json_file import JsonFile
from pytest_specperf.report.markdown import MarkdownSummary, StepSummary
from pytest_specperf.report.output import Output
from pytest_specperf.report.plots import CasePlots

OUTPUTS: dict[str, type[Output]] = {
    "json": JsonFile,
    "plots": CasePlots,
    "markdown": MarkdownSummary,
    "step_summary": StepSummary,
    "bencher": BencherFile,
    "html": HtmlReport,
}
