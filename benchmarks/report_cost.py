"""What the reports cost: HTML, PNG plots and pytest-html extras on a run with every kind of case.

Runs one pytest session on the embedded simulator (``batching`` profile, time-compressed) with single-stream,
concurrency, load sweep, rate and capacity cases and a failing one, saved as a baseline; then the same
cases compared against it, once with no report and once with ``--specperf-html``, ``--specperf-plots``,
``--specperf-markdown`` and pytest-html all on ("all reports"). A conftest stamps each case's start and
end and the end of the session with a clock outside the plugin, and times every matplotlib ``savefig``,
so it prints:

* the measuring span (first case's start to last case's end) with and without the reports, and how much
  of it went to drawing (pytest-html's images were drawn as each case ended);
* the time from the last case's end to the end of the session (the reports written after measuring);
* ``specperf report RUN --baseline BASE`` wall time (a fresh process: imports included);
* in-process: importing matplotlib, building the views, drawing each chart as SVG and each case as PNG.

Run: ``python benchmarks/report_cost.py`` (about 3 minutes on 2 busy cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SPEED = 8.0

CASES = f"""
import pytest

@pytest.mark.sustained(tokens=600, ctx=2000, content="reasoning", min_tps=20)
def test_sustained(specperf):
    pass

@pytest.mark.two_point(ctx=2000, repeat=3)
def test_two_point(specperf):
    pass

@pytest.mark.ctx_sweep(ctxs=[64, 1024, 3072], tokens=200)
def test_ctx_sweep(specperf):
    pass

@pytest.mark.sustained(concurrency=4, tokens=200, ctx=300)
def test_concurrency(specperf):
    pass

@pytest.mark.load_sweep(concurrency=[1, 2, 4, 8], tokens=160, ctx=500)
def test_load_sweep(specperf):
    pass

@pytest.mark.rate(rps={2 * SPEED}, requests=24, tokens=48, ctx=100, slo={{"tpot_ms": {40 / SPEED}}})
def test_rate(specperf):
    pass

@pytest.mark.capacity(slo={{"tpot_ms": {40 / SPEED}}}, target=0.9, tokens=48, ctx=100, arrivals="constant",
                      start_rps={SPEED}, probe_s=1.0, min_requests=12, precision=0.5, budget_s=60)
def test_capacity(specperf):
    pass

@pytest.mark.sustained(tokens=300, ctx=500, min_tps=1e5)
def test_failing(specperf):
    pass
"""

QUICK_CASES = """
import pytest

@pytest.mark.sustained(tokens=64, ctx=100)
def test_sustained(specperf):
    pass

@pytest.mark.sustained(tokens=64, ctx=100, min_tps=1e5)
def test_failing(specperf):
    pass
"""

# Stamps from a clock outside the plugin: when each case starts and ends, and when the session is done.
# Time spent saving matplotlib figures, split by whether a case was running (logstart to logfinish).
CONFTEST = """
import json, os, time
from matplotlib.figure import Figure

STAMPS = {"start": [], "end": [], "running": False, "draw_during": 0.0, "draw_after": 0.0}
savefig = Figure.savefig

def timed(self, *args, **kwargs):
    t0 = time.monotonic()
    try:
        return savefig(self, *args, **kwargs)
    finally:
        STAMPS["draw_during" if STAMPS["running"] else "draw_after"] += time.monotonic() - t0

Figure.savefig = timed

def pytest_runtest_logstart(nodeid, location):
    STAMPS["running"] = True
    STAMPS["start"].append(time.monotonic())

def pytest_runtest_logfinish(nodeid, location):
    STAMPS["running"] = False
    STAMPS["end"].append(time.monotonic())

def pytest_unconfigure(config):
    STAMPS["done"] = time.monotonic()
    with open(os.environ["STAMPS_FILE"], "w") as fh:
        json.dump(STAMPS, fh)
"""


def _pytest(folder: Path, stamps: str, *args: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
    env["STAMPS_FILE"] = str(folder / stamps)
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "test_cases.py", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "--specperf-sim=batching", f"--specperf-sim-speed={SPEED:g}", *args],
                          cwd=folder, capture_output=True, text=True, timeout=900, env=env)
    wall = time.monotonic() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    s = json.loads((folder / stamps).read_text())
    return {"wall": wall, "span": s["end"][-1] - s["start"][0], "after": s["done"] - s["end"][-1],
            "during": s["draw_during"], "drawn_after": s["draw_after"]}


def _in_process(results: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> dict[str, float]:
    t0 = time.perf_counter()
    import matplotlib  # noqa: F401

    from pytest_specperf.report import drawing
    from pytest_specperf.report.views.registry import view
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    views = [view(r, baseline) for r in results]
    t_views = time.perf_counter() - t0
    charts = [c for v in views for c in v.charts]
    t0 = time.perf_counter()
    for i, c in enumerate(charts):
        drawing.svg_inline(c, salt=f"c{i}")
    t_svg = time.perf_counter() - t0
    drawn = [v for v in views if v.charts]
    t0 = time.perf_counter()
    for v in drawn:
        drawing.case_image(v, "png")
    t_png = time.perf_counter() - t0
    return {"import": t_import, "views": t_views, "charts": len(charts), "svg": t_svg, "cases": len(drawn),
            "png": t_png}


def main() -> None:
    """Run the sessions and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="run in this (new) folder and keep it: the runs, reports, plots")
    parser.add_argument("--quick", action="store_true", help="two small cases: a check that it runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) if args.keep is None else args.keep
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "test_cases.py").write_text(QUICK_CASES if args.quick else CASES)
        (folder / "conftest.py").write_text(CONFTEST)
        (folder / "pytest.ini").write_text("[pytest]\n")
        base = _pytest(folder, "s0.json", "--specperf-save=base")
        plain = _pytest(folder, "s1.json", "--specperf-compare=base", "--specperf-save=plain")
        full = _pytest(folder, "s2.json", "--specperf-compare=base", "--specperf-save=full",
                       "--specperf-json=r.json", "--specperf-html=r.html", "--specperf-plots=plots",
                       "--specperf-markdown=r.md", "--html=ph.html", "--self-contained-html")
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest_specperf.cli", "--storage", str(folder / ".specperf/runs"),
                               "report", "full", "-o", str(folder / "again.html"), "--baseline", "base"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:  # the command's own one line, not a traceback of this script
            sys.exit(f"specperf report full --baseline base failed: {done.stderr.strip()[-500:]}")
        t_report = time.monotonic() - t0
        results = json.loads((folder / "r.json").read_text())["results"]
        baseline = json.loads(next((folder / ".specperf/runs").glob("*_base.json")).read_text())["results"]
        inproc = _in_process(results, baseline)
    print(f"{len(results)} cases at simulator speed {SPEED:g}; seconds by a clock outside the plugin")
    print(f"{'session':24} {'measuring span':>15} {'drawing in it':>14} {'after last case':>16} "
          f"{'drawing after':>14} {'wall':>7}")
    for name, t in (("baseline, no report", base), ("compared, no report", plain), ("compared, all reports", full)):
        print(f"{name:24} {t['span']:15.1f} {t['during']:14.1f} {t['after']:16.1f} {t['drawn_after']:14.1f} "
              f"{t['wall']:7.1f}")
    print(f"specperf report RUN --baseline BASE (fresh process): {t_report:.1f} s")
    print(f"in process: import matplotlib + plots {inproc['import']:.2f} s; views {inproc['views']:.2f} s; "
          f"{inproc['charts']:.0f} SVG charts {inproc['svg']:.2f} s; {inproc['cases']:.0f} case PNGs "
          f"{inproc['png']:.2f} s")


if __name__ == "__main__":
    main()
