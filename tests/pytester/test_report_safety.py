"""A report that cannot be written never takes the run with it; reports are drawn after the last case.

Real runs on the embedded simulator, each with a conftest that makes outputs raise (as matplotlib did with
"'yerr' must not contain negative values"): every other output, the table, the JSON, the saved run and
pytest's summary must still complete, and the broken output is one warning naming it and the cause.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re

import pytest
from PIL import Image

from pytest_specperf.storage import saved_runs as storage

pytest.importorskip("pytest_html", reason="pytest-html is part of the test extra: pip install -e '.[test]'")

CASES = """
import pytest

@pytest.mark.sustained(tokens=300, ctx=100)
def test_sus(specperf):
    pass

def test_plain():
    pass
"""

CAUSE = "'yerr' must not contain negative values"

# Every drawn or exported output raises; the JSON and the saved run must not care.
ALL_RAISE = f"""
from pytest_specperf.report import bencher, drawing, html, markdown, plots

def boom(*args, **kwargs):
    raise ValueError({CAUSE!r})

html.render = boom
plots.write_case_images = boom
drawing.case_image = boom
markdown.markdown_summary = boom
bencher.bencher_json = boom
"""

# One chart of the case raises (as errorbar did); a clock-free record of whether anything was drawn while a
# case was running (between its logstart and its logfinish, where pytest-html's extras are added).
ONE_CHART_RAISES = f"""
import json, os
from matplotlib.figure import Figure
from pytest_specperf.report import drawing

draw_series = drawing._draw_series

def raising(ax, chart):
    if chart.id == "window_rate":
        raise ValueError({CAUSE!r})
    draw_series(ax, chart)

drawing._draw_series = raising

STATE = {{"running": False, "drawn_while_running": 0, "drawn": 0}}
savefig = Figure.savefig

def counting(self, *args, **kwargs):
    STATE["drawn"] += 1
    STATE["drawn_while_running"] += STATE["running"]
    return savefig(self, *args, **kwargs)

Figure.savefig = counting

def pytest_runtest_logstart(nodeid, location):
    STATE["running"] = True

def pytest_runtest_logfinish(nodeid, location):
    STATE["running"] = False

def pytest_unconfigure(config):
    with open("drawing.json", "w") as fh:
        json.dump(STATE, fh)
"""

OUTPUTS = ["--specperf-html", "--specperf-plots", "--specperf-markdown", "--specperf-bencher",
           "--html (specperf figures)"]


def _run(pytester: pytest.Pytester, conftest: str, *extra: str) -> pytest.RunResult:
    pytester.makepyfile(test_cases=CASES)
    pytester.makeconftest(conftest)
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--specperf-sim-speed=16", "--specperf-json=r.json", "--specperf-save=run",
        "--specperf-html=r.html", "--specperf-plots=plots", "--specperf-markdown=r.md",
        "--specperf-bencher=b.json", *extra)


def test_every_failing_output_is_a_warning_and_the_run_completes(pytester: pytest.Pytester) -> None:
    res = _run(pytester, ALL_RAISE, "--html=ph.html", "--self-contained-html")
    res.assert_outcomes(passed=2)  # pytest's own summary line is there
    out = res.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert re.search(r"^\[sustained\] test_sus .* passed", out, re.M)  # the table
    assert "results written to r.json" in out
    for option in OUTPUTS:
        case = "test_cases.py::test_sus: " if option.startswith("--html") else ""  # per case: which one
        line = f"{option}: failed ({case}ValueError: {CAUSE})"
        assert f"{line}\n" in out  # the terminal summary's red line
        assert f"{line}; the table and the other outputs are complete" in out  # the warning
    (result,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert result["nodeid"] == "test_cases.py::test_sus" and result["verdict"] == "passed"
    (saved,) = storage.list_runs(pytester.path / ".specperf" / "runs")
    run = storage.load_run(saved)
    assert run is not None and run.results == [result]
    assert f"run saved as {saved}" in out
    for name in ("r.html", "r.md", "b.json"):
        assert not (pytester.path / name).exists(), name
    # pytest-html's own report is written, with the case's figures table
    assert "specperf sustained: passed" in html.unescape((pytester.path / "ph.html").read_text())


def test_a_chart_that_cannot_be_drawn_is_a_note_and_nothing_is_drawn_while_cases_run(
        pytester: pytest.Pytester) -> None:
    res = _run(pytester, ONE_CHART_RAISES, "--html=ph.html")  # pytest-html with asset files
    res.assert_outcomes(passed=2)
    out = res.stdout.str()
    assert "failed (" not in out and "Traceback" not in out
    page = (pytester.path / "r.html").read_text()
    figures = dict(re.findall(r'<figure class="chart" data-chart="([^"]+)">(.*?)</figure>', page, re.S))
    assert set(figures) >= {"window_rate", "cumulative"}
    note = html.unescape(figures.pop("window_rate"))
    assert re.fullmatch(rf"<p class=\"chart-note\">chart '.+' could not be drawn \(ValueError: {CAUSE}\)</p>", note)
    assert all(body.lstrip().startswith("<svg") for body in figures.values())  # the other charts are drawn
    # the case's PNG (plots, and the same image in pytest-html's row) is drawn, the bad chart a note in it
    png = (pytester.path / "plots" / "test_cases.py_test_sus.png").read_bytes()
    assets = [p.read_bytes() for p in (pytester.path / "assets").glob("*.png")]
    assert assets == [png]
    assert Image.open(io.BytesIO(png)).size[0] > 100
    assert len(png) > len(base64.b64decode(_placeholder()))
    drawing = json.loads((pytester.path / "drawing.json").read_text())
    assert drawing["drawn"] > 0 and drawing["drawn_while_running"] == 0


def _placeholder() -> str:
    from pytest_specperf.pytest_plugin.html_extras import PLACEHOLDER

    return PLACEHOLDER


def test_pytest_html_counts_a_direct_call_that_could_not_measure_as_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ad_hoc="""
        def test_ad_hoc(specperf):
            specperf.two_point(ctx=64, long=1032)
    """)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--endpoint=http://127.0.0.1:9",
                                        "--specperf-timeout=5", "--html=ph.html", "--self-contained-html")
    res.assert_outcomes(errors=1)
    page = (pytester.path / "ph.html").read_text()
    blob = json.loads(html.unescape(re.search(r'data-jsonblob="(.*?)"', page, re.S).group(1)))
    (row,) = blob["tests"]["test_ad_hoc.py::test_ad_hoc"]
    assert row["result"] == "Error"
    assert re.search(r'data-test-result="error"[^>]*>\s*<span[^>]*>1 Error', page) or "1 Error" in page
    assert "1 Failed" not in page and "0 Failed" in page
