"""The report's views of load_sweep, rate and capacity cases, from one real run on the batching simulator.

One pytest run (about ten seconds) measures a small case of each kind against a simulator whose
first two completion requests after a reset are refused (HTTP 503) and the next two answered are held
30 ms, so the rate case has refusals and missed TTFT bounds to show on any machine. The tests check
that every chart holds exactly the result's numbers, that the SVG draws exactly those numbers, that the
page works in headless Chromium, and that the plots folder has an image per case.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.cdp_browser import chromium_path, visit
from support.run_once import shared_folder
from test_html_report import _not_blank

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare.crossover import crossover
from pytest_specperf.report.views.registry import view as view_of
from pytest_specperf.sim import SimServer

ROOT = Path(__file__).resolve().parents[2]
SPEED = 10.0

CASES = """
import httpx
import pytest

@pytest.mark.load_sweep(concurrency=[1, 4, 16], tokens=64, ctx=100, min_tps={{4: 100, 16: 80}}, min_total_tps=50)
def test_sweep(specperf):
    pass

def test_fresh_refusals():
    # the warm-up's retries spent the profile's refusals and holds; the rate case's first requests get them
    httpx.post("{url}/sim/reset").raise_for_status()

@pytest.mark.rate(rps=20, requests=16, tokens=32, ctx=100, slo={{"ttft_s": 0.008, "e2e_s": 0.5}})
def test_rate(specperf):
    pass

@pytest.mark.capacity(slo={{"tpot_ms": 2.5}}, target=0.9, tokens=48, ctx=100, arrivals="constant",
                      start_rps=10, probe_s=1.0, min_requests=12, precision=0.5, budget_s=60)
def test_capacity(specperf):
    pass
"""


def _load_run(out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
    # batching: the aggregate stops growing past 4 users (a knee); retry_after=0 keeps the warm-up's retries quick;
    # after a reset the first 2 answered requests wait 30 ms before anything, so the rate case misses its TTFT bound
    with SimServer("batching", speed=SPEED,
                   overrides={"faults": "status=503*2,retry_after=0,first_byte=0.3*2"}) as sim:
        (out / "test_load_cases.py").write_text(CASES.format(url=sim.url))
        done = subprocess.run(
            [sys.executable, "-m", "pytest", str(out / "test_load_cases.py"), "-p", "no:cacheprovider",
             "-p", "no:randomly", f"--endpoint={sim.url}", f"--specperf-json={out / 'r.json'}",
             f"--specperf-html={out / 'report.html'}", f"--specperf-plots={out / 'plots'}"],
            cwd=out, capture_output=True, text=True, timeout=300, env=env)
        assert (out / "report.html").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
        # which requests the server held before their first byte, by its own record (not the plugin's figures)
        held = sorted({q["response_id"] for r in json.loads((out / "r.json").read_text())["results"]
                       if r["kind"] == "rate" for q in r["per_request"] if q.get("response_id")
                       and any(f["kind"] == "first_byte" for f in sim.truth(q["response_id"])["faults"])})
    (out / "held.json").write_text(json.dumps(held))
    (out / "stdout.txt").write_text(done.stdout, encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = shared_folder(tmp_path_factory, "load-views", _load_run)  # once, whichever worker asks
    held = set(json.loads((out / "held.json").read_text()))
    stdout = (out / "stdout.txt").read_text(encoding="utf-8")
    page = (out / "report.html").read_text(encoding="utf-8")
    embedded = re.search(r'<script type="application/json" id="specperf-data">(.*?)</script>', page, re.S)
    assert embedded
    results = json.loads((out / "r.json").read_text())["results"]
    assert [r["kind"] for r in results] == ["load_sweep", "rate", "capacity"], stdout[-3000:]
    data = json.loads(embedded.group(1))["charts"]
    sections = re.findall(r'<section class="case[^"]*" id="[^"]+".*?</section>', page, re.S)
    cases = {r["kind"]: (r, {c["id"]: c for c in data[f"case-{i + 1}"]}, sections[i]) for i, r in enumerate(results)}
    return {"dir": out, "stdout": stdout, "results": results, "cases": cases, "held": held}


def _series(chart: dict[str, Any], name: str) -> dict[str, Any]:
    found = [s for s in chart["series"] if s["name"] == name]
    assert len(found) == 1, (name, [s["name"] for s in chart["series"]])
    return found[0]


def _levels(chart: dict[str, Any]) -> dict[str, float]:
    return {lv["label"].split()[0]: lv["y"] for lv in chart["levels"]}


# -- the data each chart holds is the result's --------------------------------------------------------


def test_sweep_charts_hold_the_levels(run: dict[str, Any]) -> None:
    r, charts, _ = run["cases"]["load_sweep"]
    users = [float(lv["concurrency"]) for lv in r["levels"]]
    assert users == [1.0, 4.0, 16.0]
    agg = _series(charts["aggregate"], "aggregate")
    assert agg["x"] == users and agg["y"] == [lv["total_tps"] for lv in r["levels"]]
    assert r["knee"] == 4, "the batching profile's aggregate stops growing past 4 users"
    knee = _series(charts["aggregate"], "knee at 4 users")
    assert knee["x"] == [4.0] and knee["y"] == [r["levels"][1]["total_tps"]]
    per_user = charts["per_user"]
    assert _series(per_user, "median user")["y"] == [lv["decode_tps"] for lv in r["levels"]]
    assert _series(per_user, "10th-percentile user")["y"] == [lv["decode_p10_tps"] for lv in r["levels"]]
    floor = _series(per_user, "floor (min_tps)")
    assert dict(zip(floor["x"], floor["y"], strict=True)) == {float(k): v for k, v in r["min_tps"].items()}
    assert [lv["y"] for lv in charts["aggregate"]["levels"]] == [r["min_total_tps"]] == [50]
    ttft = charts["ttft_users"]
    assert _series(ttft, "TTFT p50")["y"] == [lv["ttft_p50_s"] for lv in r["levels"]]
    assert _series(ttft, "TTFT p90")["y"] == [lv["ttft_p90_s"] for lv in r["levels"]]
    assert all(c["xscale"] == "log" for c in charts.values())


def test_rate_charts_hold_every_request(run: dict[str, Any]) -> None:
    r, charts, _ = run["cases"]["rate"]
    reqs = r["per_request"]
    assert r["refused"] == 2 and [q["status"] for q in reqs[:2]] == [503, 503]
    answered = [q for q in reqs if q["status"] == 200]
    for key in ("ttft_s", "e2e_s"):
        chart = charts[f"{key}_per_request"]
        for name, within in (("within bound", True), ("missed bound", False)):
            want = [(q["at_s"], q[key]) for q in answered if (q[key] <= r["slo"][key]) is within]
            got = [s for s in chart["series"] if s["name"] == name]
            assert [list(zip(s["x"], s["y"], strict=True)) for s in got] == ([want] if want else [])
        assert _levels(chart) == {"p90": r[key.replace("_", "_p90_")], "SLO": r["slo"][key]}
    # every request the server held 30 ms before its first byte missed the 8 ms TTFT bound, and is drawn as a
    # miss (judged by the server's record: which requests it held depends on how the machine ordered them)
    missed = {q["response_id"] for q in answered if q["ttft_s"] > r["slo"]["ttft_s"]}
    assert run["held"] <= missed
    assert all(q["ttft_s"] >= 0.03 for q in answered if q["response_id"] in run["held"])
    assert "tpot_ms_per_request" not in charts  # no tpot bound: no tpot chart
    outcomes = charts["outcomes"]
    for name, chosen in (("scheduled", reqs), ("met SLO", [q for q in reqs if q["met"]]),
                         ("refused (429/503)", [q for q in reqs if q["status"] in (429, 503)])):
        if not chosen:  # a busy machine can miss the 8 ms bound on every request: then no "met" line to draw
            assert name not in [s["name"] for s in outcomes["series"]]
            continue
        s = _series(outcomes, name)
        assert s["x"] == sorted(q["at_s"] for q in chosen) and s["y"] == list(range(1, len(chosen) + 1))
    assert r["met"] == sum(1 for q in reqs if q["met"])
    assert not [s for s in outcomes["series"] if s["name"].startswith("failed")]  # none failed


def test_capacity_charts_hold_every_probe(run: dict[str, Any]) -> None:
    r, charts, _ = run["cases"]["capacity"]
    probes = sorted(r["probes"], key=lambda p: p["rps"])
    att = charts["attainment"]
    for name, passed in (("passed probes", True), ("failed probes", False)):
        s = _series(att, name)
        assert list(zip(s["x"], s["y"], strict=True)) == [(p["rps"], p["attainment"]) for p in probes
                                                          if p["passed"] is passed]
    assert _levels(att) == {"target": r["target"]}
    lo, hi = r["bracket"]
    assert [(b["lo"], b["hi"]) for b in att["bands"]] == [(lo, hi)] and r["max_rps"] == lo
    rates = charts["goodput"]
    for name, key in (("offered", "rps"), ("achieved", "achieved_rps"), ("goodput", "goodput_rps")):
        s = _series(rates, name)
        assert s["x"] == [p["rps"] for p in probes] and s["y"] == [p[key] for p in probes]
    tpot = charts["tpot_ms_probes"]
    for q in ("p50", "p90", "p99"):
        assert _series(tpot, q)["y"] == [p[f"tpot_{q}_ms"] for p in probes]
    assert _levels(tpot) == {"SLO": r["slo"]["tpot_ms"]} and tpot["yscale"] == "log"


# -- the SVG draws exactly that data --------------------------------------------------------------------


def _drawn(section: str, gid: str) -> np.ndarray:
    """Pixel coordinates of series ``gid``: its line's vertices, or its markers' positions."""
    start = section.index(f'<g id="{gid}">')
    body = section[start:section.index("</g>\n   </g>", start)]
    line = re.match(r'<g id="[^"]+">\s*<path d="([^"]+)"', body)
    if line:
        nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", line.group(1))]
        return np.array(nums).reshape(-1, 2)
    return np.array([[float(x), float(y)] for x, y in re.findall(r'<use [^>]*x="([^"]+)" y="([^"]+)"', body)])


def _fit(data: list[float], drawn: np.ndarray) -> float:
    """Largest residual (px) of the best affine map from data values to drawn coordinates."""
    a = np.vstack([np.asarray(data, dtype=float), np.ones(len(data))]).T
    coef, *_ = np.linalg.lstsq(a, drawn, rcond=None)
    return float(np.max(np.abs(a @ coef - drawn)))


def test_svg_draws_each_series_on_its_charts_axes(run: dict[str, Any]) -> None:
    checked = 0
    for _r, charts, section in run["cases"].values():
        for chart in charts.values():
            xs: list[float] = []
            ys: list[float] = []
            points = []
            for i, s in enumerate(chart["series"]):
                pts = _drawn(section, f"{chart['id']}-s{i}")
                assert len(pts) == len(s["x"]), (chart["id"], s["name"])
                xs += s["x"]
                ys += s["y"]
                points.append(pts)
            # one affine map per axis for every series of the chart: the series share the axes
            fx = [math.log2(x) for x in xs] if chart["xscale"] == "log" else xs
            fy = [math.log10(y) for y in ys] if chart["yscale"] == "log" else ys
            drawn = np.vstack(points)
            assert len(set(fx)) >= 3 and _fit(fx, drawn[:, 0]) < 0.05, chart["id"]
            assert _fit(fy, drawn[:, 1]) < 0.05, chart["id"]
            checked += 1
    assert checked >= 9


# -- the page in a browser, the image files -------------------------------------------------------------


def test_load_views_in_headless_chromium(run: dict[str, Any]) -> None:
    chromium = chromium_path()
    if chromium is None:
        if os.environ.get("SPECPERF_REQUIRE_BROWSER") == "1":
            pytest.fail("SPECPERF_REQUIRE_BROWSER=1 but no chromium on PATH; install it: apt-get install -y chromium")
        pytest.skip("no chromium on PATH: the report is not checked in a browser (apt-get install -y chromium)")
    script = """JSON.stringify([...document.querySelectorAll('section.case')].map(s => ({
      nodeid: s.dataset.nodeid,
      charts: [...s.querySelectorAll('figure svg')].map(svg => svg.getBoundingClientRect().height > 50),
      facts: [...s.querySelectorAll('th')].map(th => th.textContent)
    })))"""
    seen = visit(run["dir"] / "report.html", script, chromium)
    assert seen.console_errors == [] and seen.requests == []
    by_node = {c["nodeid"]: c for c in seen.values}
    for kind, facts in (("load_sweep", "knee"), ("rate", "attainment"), ("capacity", "max rate")):
        r, charts, _ = run["cases"][kind]
        shown = by_node[r["nodeid"]]
        assert len(shown["charts"]) == len(charts) and all(shown["charts"]), kind  # every chart, laid out
        assert facts in shown["facts"], kind
    assert _not_blank(seen.screenshot) > 0.01


def test_plots_folder_has_an_image_per_load_case(run: dict[str, Any]) -> None:
    images = sorted(p.name for p in (run["dir"] / "plots").iterdir())
    assert images == sorted(f"test_load_cases.py_{n}.png" for n in ("test_sweep", "test_rate", "test_capacity"))
    for name in images:
        assert _not_blank((run["dir"] / "plots" / name).read_bytes()) > 0.01


def test_ab_speedup_chart_holds_the_crossover(run: dict[str, Any]) -> None:
    """A/B sweeps: B's per-user speedup per level with its interval, against the floor (here B = A, so ~1)."""
    r, _, _ = run["cases"]["load_sweep"]
    typed = load_record(r)
    r = {**r, "crossover": to_dict(crossover([typed], [typed], min_speedup=0.9))}
    view = view_of(r)
    chart = next(c for c in view.charts if c.id == "speedup")
    (s,) = chart.series
    levels = r["crossover"]["levels"]
    assert s.x == [lv["users"] for lv in levels] == [1, 4, 16]
    assert s.y == [lv["speedup"] for lv in levels] and [[lo, hi] for lo, hi in zip(s.low, s.high, strict=True)] == [
        lv["interval"] for lv in levels]
    assert [lv.y for lv in chart.levels] == [0.9]
    assert ("crossover", r["crossover"]["text"]) in view.facts
