"""The HTML report, the per-case plots and the Markdown links, from a real run of the shipped perf_cases/.

One pytest run of perf_cases/ on the simulator's `seed` profile (time-compressed) writes the JSON, the
HTML report, the plots and the Markdown summary; the tests check them against each other and in a
real headless Chromium.
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from support.cdp_browser import chromium_path, visit
from support.result_json import full
from support.run_once import shared_folder

from pytest_specperf.report import html as html_report
from pytest_specperf.report.views import base as figures
from pytest_specperf.report.views import registry

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 3 * 1024 * 1024


def _seed_run(out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_cases/", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--specperf-sim=seed", "--specperf-sim-speed=10", f"--specperf-json={out / 'r.json'}",
         f"--specperf-html={out / 'report.html'}", f"--specperf-plots={out / 'plots'}",
         f"--specperf-markdown={out / 'summary.md'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert (out / "report.html").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    (out / "stdout.txt").write_text(done.stdout, encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = shared_folder(tmp_path_factory, "seed-report", _seed_run)  # a minute: once, whichever worker asks
    page = (out / "report.html").read_text(encoding="utf-8")
    embedded = re.search(r'<script type="application/json" id="specperf-data">(.*?)</script>', page, re.S)
    assert embedded
    stdout = (out / "stdout.txt").read_text(encoding="utf-8")
    return {"dir": out, "stdout": stdout, "html": page, "data": json.loads(embedded.group(1)),
            "results": json.loads((out / "r.json").read_text())["results"]}


def _sections(page: str) -> list[str]:
    return re.findall(r'<section class="case[^"]*" id="[^"]+".*?</section>', page, re.S)


def test_report_is_one_small_file_with_a_section_per_case(run: dict[str, Any]) -> None:
    page = run["html"]
    assert len(page.encode()) < MAX_BYTES
    # self-contained: no external script, style sheet, image or frame (SVG namespaces are not requests)
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)=', page)
    nodeids = [html.unescape(n) for n in re.findall(r'<section class="case[^"]*" id="[^"]+" data-nodeid="([^"]+)"',
                                                    page)]
    assert nodeids == [r["nodeid"] for r in run["results"]]
    for label in ("endpoint", "model", "server", "commit", "machine", "pytest-specperf", "time"):
        assert f"<th>{label}</th>" in page


def test_failing_case_opens_with_the_terminal_diagnosis(run: dict[str, Any]) -> None:
    failed = [r for r in run["results"] if r["verdict"] == "failed"]
    assert failed, "the seed profile makes the long reasoning case drift"
    sections = _sections(run["html"])
    for r, section in zip(run["results"], sections, strict=True):
        first = re.search(r"</header>\s*<(\w+)[^>]*>(.*?)</\1>", section, re.S)
        assert first
        if r["verdict"] == "failed":
            assert first.group(1) == "p" and html.unescape(first.group(2)) == r["reason"]
            assert r["reason"] in run["stdout"]  # the same line the terminal printed
        else:
            assert 'class="diagnosis"' not in section


def test_summary_lists_failures_first(run: dict[str, Any]) -> None:
    summary = run["html"].split('<table class="summary">', 1)[1].split("</table>", 1)[0]
    verdicts = re.findall(r'data-verdict="(\w+)"', summary)
    assert sorted(verdicts) == sorted(r["verdict"] for r in run["results"])
    ranks = [html_report.VERDICT_ORDER[v] for v in verdicts]
    assert ranks == sorted(ranks) and verdicts[0] == "failed"


def _svg_points(section: str, gid: str) -> np.ndarray:
    """The points of the path drawn for series ``gid`` in the SVG (pixel space)."""
    group = re.search(rf'<g id="{re.escape(gid)}">\s*<path d="([^"]+)"', section)
    assert group, gid
    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", group.group(1))]
    return np.array(nums).reshape(-1, 2)


def _affine(data: list[float], drawn: np.ndarray) -> float:
    """Largest residual (px) of the best affine map from data values to drawn coordinates."""
    a = np.vstack([np.asarray(data, dtype=float), np.ones(len(data))]).T
    coef, *_ = np.linalg.lstsq(a, drawn, rcond=None)
    return float(np.max(np.abs(a @ coef - drawn)))


def test_values_drawn_are_the_values_in_the_json(run: dict[str, Any]) -> None:
    sections = _sections(run["html"])
    charts = run["data"]["charts"]
    checked = 0
    for i, (r, section) in enumerate(zip(run["results"], sections, strict=True)):
        by_id = {c["id"]: c for c in charts[f"case-{i + 1}"]}
        if r["kind"] == "sustained":
            rate = by_id["window_rate"]
            for s, stream in zip(rate["series"], r["streams"], strict=True):
                assert s["y"] == stream["window_tps"]
                w = stream["window_tokens"]
                assert s["x"] == [(j + 0.5) * w for j in range(len(stream["window_tps"]))]
            levels = {lv["label"].split()[0]: lv["y"] for lv in rate["levels"]}
            # no line where the JSON has no figure (windows too short to time: drift not judged)
            assert levels.get("early") == r["early_tps"] and levels.get("late") == r["late_tps"]
            assert levels.get("floor") == r["min_tps"]  # no line where the case has no floor
            assert by_id["accept"]["series"][0]["y"] == r["window_accept_len"]
            assert by_id["step_ms"]["series"][0]["y"] == r["window_step_ms"]
            cum = by_id["cumulative"]["series"][0]
            # rebuilt from the windows: every window adds W tokens in W / rate seconds after the first token (a
            # stall inside a window adds a flat run before the window's closing point, the last at its edge)
            first = r["streams"][0]
            w0, rates0 = first["window_tokens"], first["window_tps"]
            closing = {y: x for x, y in zip(cum["x"], cum["y"], strict=True)}
            edges = [cum["x"][0]] + [closing[float((j + 1) * w0)] for j in range(len(rates0))]
            assert cum["x"][0] == first["ttft_s"]
            assert np.allclose(np.diff(edges), w0 / np.asarray(rates0))
            drawn = ["window_rate", "accept", "step_ms", "cumulative"]
        elif r["kind"] == "ctx_sweep":
            s = by_id["rate_vs_ctx"]["series"][0]
            assert s["y"] == [p["decode_tps"] for p in r["points"]]
            assert s["x"] == [p["prompt_tokens"] for p in r["points"]]
            drawn = ["rate_vs_ctx"]
        elif r["kind"] == "load_sweep":  # perf_cases/test_load.py: aggregate and per-user decode per level
            # a level without a common window (too short at this speed) has no aggregate, and no point drawn
            total = [(lv["concurrency"], lv["total_tps"]) for lv in r["levels"] if lv["total_tps"] is not None]
            assert by_id["aggregate"]["series"][0]["y"] == [t for _, t in total]
            assert by_id["aggregate"]["series"][0]["x"] == [n for n, _ in total]
            assert by_id["per_user"]["series"][0]["y"] == [lv["decode_tps"] for lv in r["levels"]]
            continue
        elif r["kind"] == "replay":  # perf_cases/test_replay.py: each request's TTFT at its scheduled send
            s = by_id["ttft_s_per_request"]["series"][0]
            answered = [p for p in r["per_request"] if p["status"] == 200]
            assert s["y"] == [p["ttft_s"] for p in answered] and s["x"] == [p["at_s"] for p in answered]
            continue  # drawn as points, not a path
        else:
            assert by_id["samples"]["series"][0]["y"] == r["samples_tps"]
            continue
        # ...and the SVG path of each series is exactly those points, mapped onto the axes.
        for chart_id in drawn:
            s = by_id[chart_id]["series"][0]
            pts = _svg_points(section, f"{chart_id}-s0")
            assert len(pts) == len(s["x"])
            assert _affine(s["x"], pts[:, 0]) < 0.05 and _affine(s["y"], pts[:, 1]) < 0.05
            checked += 1
    assert checked >= 5


def _require_browser() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("SPECPERF_REQUIRE_BROWSER") == "1":
            pytest.fail("SPECPERF_REQUIRE_BROWSER=1 but no chromium on PATH; install it: apt-get install -y chromium")
        pytest.skip("no chromium on PATH: the report is not checked in a browser (apt-get install -y chromium)")
    return path


def _not_blank(png: bytes) -> float:
    img = Image.open(io.BytesIO(png)).convert("L")
    px = np.asarray(img)
    return float((px < 200).mean())  # share of dark pixels: text, lines, table rules


def test_report_in_headless_chromium(run: dict[str, Any]) -> None:
    chromium = _require_browser()
    script = """JSON.stringify({
      sections: [...document.querySelectorAll('section.case')].map(s => s.dataset.nodeid),
      svgs: [...document.querySelectorAll('section.case')].map(s => s.querySelectorAll('figure svg').length),
      results: JSON.parse(document.getElementById('specperf-data').textContent).results.length,
      diagnosis: [...document.querySelectorAll('p.diagnosis')].map(p => p.textContent)
    })"""
    seen = visit(run["dir"] / "report.html", script, chromium)
    assert seen.console_errors == []
    assert seen.requests == []
    assert seen.values["sections"] == [r["nodeid"] for r in run["results"]]
    assert seen.values["results"] == len(run["results"])
    assert all(n >= 1 for n in seen.values["svgs"])
    assert seen.values["diagnosis"] == [r["reason"] for r in run["results"] if r["verdict"] == "failed"]
    assert _not_blank(seen.screenshot) > 0.01


def test_browser_check_sees_a_network_request_and_a_script_error(tmp_path: Path) -> None:
    """The browser check itself can fail: a page that fetches something and throws is caught."""
    chromium = _require_browser()
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><img src="http://127.0.0.1:9/pixel.png">'
                    "<script>undefinedFunction();</script></body></html>")
    seen = visit(page, "JSON.stringify(1)", chromium)
    assert any("127.0.0.1:9" in u for u in seen.requests)
    assert any("undefinedFunction" in e for e in seen.console_errors)


def test_plots_folder_has_an_image_per_case_linked_from_markdown(run: dict[str, Any]) -> None:
    images = sorted((run["dir"] / "plots").iterdir())
    assert len(images) == len(run["results"])  # every shipped case draws something
    summary = (run["dir"] / "summary.md").read_text()
    links = re.findall(r"\]\(([^)]+\.png)\)", summary)
    assert sorted(run["dir"] / link for link in links) == images
    for image in images:
        assert _not_blank(image.read_bytes()) > 0.01


def test_unknown_kind_is_a_field_table_and_a_new_kind_adds_one_renderer() -> None:
    result = {"nodeid": "t.py::test_load", "kind": "load", "verdict": "failed", "reason": "goodput 0.71 < 0.9",
              "concurrency": 8, "goodput": 0.71, "note": "a <b> field"}
    page = html_report.render([result])
    assert "<th>concurrency</th><td>8</td>" in page and "<th>goodput</th><td>0.71</td>" in page
    assert "a &lt;b&gt; field" in page  # escaped, never markup
    assert '<p class="diagnosis">goodput 0.71 &lt; 0.9</p>' in page

    def _load(r: dict[str, Any], baseline: list[dict[str, Any]]) -> figures.CaseView:
        chart = figures.Chart("goodput", "goodput", "users", "share",
                              [figures.Series("goodput", [1.0, 8.0], [1.0, r["goodput"]])])
        return figures.CaseView([("goodput", str(r["goodput"]))], [chart])

    registry.VIEWS["load"] = _load  # a new kind: its view and one line in the registry
    try:
        page = html_report.render([result])
    finally:
        del registry.VIEWS["load"]
    assert 'data-chart="goodput"' in page and '<g id="goodput-s0">' in page


def test_ini_twin_writes_the_report(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nspecperf_html = out/report.html\nspecperf_sim_speed = 8\n")
    pytester.mkdir("out")
    pytester.makepyfile("""
        import pytest
        @pytest.mark.two_point(ctx=100, long=1032)
        def test_tp(specperf): pass
    """)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    page = (pytester.path / "out" / "report.html").read_text()
    assert re.findall(r'data-nodeid="([^"]+)"', page) == ["test_ini_twin_writes_the_report.py::test_tp"]
    res.stdout.fnmatch_lines(["HTML report written to out/report.html"])


def test_ab_run_draws_each_arms_trials_and_the_verdict(pytester: pytest.Pytester) -> None:
    from pytest_specperf.sim import SimServer

    pytester.makepyfile("""
        import pytest
        @pytest.mark.sustained(tokens=300, ctx=100)
        def test_case(specperf): pass
    """)
    with SimServer("healthy", speed=20) as a, SimServer("healthy", speed=10) as b:  # B decodes at half A's rate
        res = pytester.runpytest_subprocess(f"--specperf-ab={a.url},{b.url}", "--specperf-html=r.html",
                                            "--specperf-json=r.json", "-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    (r,) = json.loads((pytester.path / "r.json").read_text())["results"]
    page = (pytester.path / "r.html").read_text()
    data = json.loads(re.search(r'id="specperf-data">(.*?)</script>', page, re.S).group(1))
    chart = next(c for c in data["charts"]["case-1"] if c["title"].startswith("decode_tps"))
    assert chart["categories"] == ["A", "B"] and "regressed" in chart["title"]
    assert chart["series"][0]["y"] == r["ab"]["a_decode_tps"] and chart["series"][1]["y"] == r["ab"]["b_decode_tps"]
    low, high = chart["series"][2]["low"][0], chart["series"][2]["high"][0]
    a_median = float(np.median(r["ab"]["a_decode_tps"]))
    c = next(cc["comparison"] for cc in r["comparisons"] if cc["metric"] == "decode_tps")
    assert np.allclose([low, high], [a_median * (1 + x) for x in c["change_ci"]])
    assert f'<g id="{chart["id"]}-s2">' in page  # the interval is drawn


def test_stalls_are_marked_where_the_stream_stalled(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", stall="faults: 'stall=4@200'\n")  # every request stalls 4 model-seconds at token 200
    pytester.makepyfile("""
        import pytest
        @pytest.mark.sustained(tokens=600, ctx=100)
        def test_case(specperf): pass
    """)
    res = pytester.runpytest_subprocess("--specperf-sim=stall.yaml", "--specperf-sim-speed=4", "--specperf-html=r.html",
                                        "--specperf-json=r.json", "-p", "no:cacheprovider")
    (r,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert r["stalls"] >= 1, res.stdout.str()[-2000:]
    page = (pytester.path / "r.html").read_text()
    data = json.loads(re.search(r'id="specperf-data">(.*?)</script>', page, re.S).group(1))
    cumulative = next(c for c in data["charts"]["case-1"] if c["id"] == "cumulative")
    (marks,) = [s for s in cumulative["series"] if s["name"].startswith("stalls")]
    assert marks["y"] == [s["at_token"] for s in r["streams"][0]["stalls"]]
    line = cumulative["series"][0]
    # the curve stays flat for the stall's gap and the mark is where it resumes
    gap = r["streams"][0]["stalls"][0]["gap_s"]
    at = line["x"].index(marks["x"][0])
    assert line["y"][at - 1] == line["y"][at] == marks["y"][0]
    assert line["x"][at] - line["x"][at - 1] == pytest.approx(gap)
    # and still passes through every window edge: W tokens in W / rate seconds each
    w, rates = r["streams"][0]["window_tokens"], r["streams"][0]["window_tps"]
    edges = [x for x, y in zip(line["x"], line["y"], strict=True) if y % w == 0 and y not in marks["y"]]
    assert np.allclose(np.diff(edges), w / np.asarray(rates))
    assert '<g id="cumulative-s1">' in page


def test_embedded_data_is_strict_json() -> None:
    """A window with no step (NaN in the result) must not make the embedded data unparsable in a browser."""
    result = full({"nodeid": "t.py::test_x", "kind": "sustained", "verdict": "passed",
                   "window_step_ms": [5.0, float("nan")], "drift": float("inf")})
    page = html_report.render([result])
    text = re.search(r'id="specperf-data">(.*?)</script>', page, re.S).group(1)
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the embedded JSON"))
    assert data["results"][0]["window_step_ms"] == [5.0, None] and data["results"][0]["drift"] is None


# -- issue 37: a report holding every kind of row, read at 1366 and 1920 px ----------------------------------------

CATS = ["multi_turn", "translation", "summarization", "qa", "math_reasoning", "rag", "coding", "tool_call"]


def _stream(i: int) -> dict[str, Any]:
    rates = [60.0 + i + 3 * j for j in range(9)]
    return {"prompt_tokens": 100, "completion_tokens": 300, "ttft_s": 0.05 + 0.01 * i, "window_tokens": 32,
            "window_tps": rates, "early_tps": rates[1], "late_tps": rates[-2], "drift": 0.01, "stalls": []}


def _everything() -> list[dict[str, Any]]:
    """Hand-built results of the kinds issue 37 found unreadable: many streams, a prompt file's categories with
    per-category floors, a sweep's categories, a session A/B, an errored session and an error at ctx 300000."""
    knee = "no knee up to 8 users: aggregate grows >= 10% per doubling"
    cats = {c: {"n": 3, "n_prompts": 1, "trials": 3, "decode_tps_p50": 50.0 + i, "decode_tps_p10": 45.0 + i,
                "ttft_p50_s": 0.002 + 0.001 * i, "accept_len": 2.5 + 0.1 * i, "drift": 0.01}
            for i, c in enumerate(CATS)}
    cats["math_reasoning"]["min_accept_len"] = 4.0
    cats["summarization"]["min_accept_len"] = 2.0
    levels = [{"concurrency": n, "decode_tps": 60.0 / n ** 0.2, "decode_p10_tps": 55.0 / n ** 0.2,
               "total_tps": 60.0 * n ** 0.8, "ttft_p50_s": 0.01 * n, "ttft_p90_s": 0.012 * n, "verdict": "passed",
               "notes": [knee]} for n in (1, 2, 4, 8)]
    session_cc = [{"nodeid": "t.py::test_session", "users": 2, "metric": m, "verdict": "passed",
                   "comparison": {"metric": m, "change": 0.1, "change_ci": [0.05, 0.15], "threshold": 0.05}}
                  for m in ("decode_tps", "ttft_s")]
    # the measured ones complete (support.result_json); the error records as the plugin writes them
    return [
        full({"nodeid": "t.py::test_many_streams", "kind": "sustained", "verdict": "passed", "ctx": 100,
              "concurrency": 24, "decode_tps": 70.0, "decode_p10_tps": 62.0, "early_tps": 63.0, "late_tps": 84.0,
              "drift": 0.01, "streams": [_stream(i) for i in range(24)],
              "notes": ["drift not judged: too few tokens"] * 3}),
        full({"nodeid": "t.py::test_categories", "kind": "sustained", "verdict": "failed", "ctx": 120,
              "decode_tps": 52.0,
              "reason": "math_reasoning: acceptance 2.90 tokens/step < min_accept_len 4 (n=1 (1 prompt), chunks)",
              "prompts": "builtin:specbench-mini", "categories": cats}),
        full({"nodeid": "t.py::test_sweep", "kind": "load_sweep", "verdict": "passed", "ctx": 100,
              "concurrency": [1, 2, 4, 8], "levels": levels, "notes": [knee, knee, knee],
              "categories": dict(list(cats.items())[:3]), "categories_users": 8, "total_tps": 320.0,
              "decode_tps": 39.0}),
        full({"nodeid": "t.py::test_session", "kind": "session", "verdict": "passed", "ctx": 200, "users": 2,
              "turns": 3, "decode_tps": 50.0, "comparisons": session_cc,
              "ab": {"a_decode_tps": [45.0, 46.0], "b_decode_tps": [50, 51]},
              "notes": ["drift not judged: 64 tokens per turn are too few for windows"] * 3}),
        {"nodeid": "t.py::test_session_error", "kind": "session", "verdict": "error", "ctx": 500, "users": 2,
         "turns": 3, "tokens": 64, "reason": "endpoint http://127.0.0.1:9 is down"},
        {"nodeid": "t.py::test_huge", "kind": "sustained", "verdict": "error", "ctx": 300000, "tokens": 64,
         "reason": "ctx 300000 + 64 generated tokens need 300064 tokens of context"},
    ]


#: Per section: the notes shown, each chart's texts (rotated ones aside) that overlap, and the figure's overflow.
FIT_SCRIPT = """JSON.stringify({
  overflow: document.documentElement.scrollWidth - window.innerWidth,
  sections: [...document.querySelectorAll('section.case')].map(s => ({
    nodeid: s.dataset.nodeid,
    notes: [...s.querySelectorAll('ul.warnings li')].map(li => li.textContent),
    facts: Object.fromEntries([...s.querySelectorAll('table.facts tr')].map(
      tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent])),
    overlaps: [...s.querySelectorAll('figure.chart svg')].flatMap(svg => {
      const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() &&
        !/rotate\\((-?30|-?90)/.test((t.getAttribute('transform') || '') +
                                   (t.parentElement.getAttribute('transform') || '')));
      const boxes = texts.map(t => [t.textContent, t.getBoundingClientRect()]);
      const out = [];
      for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
        const [a, ra] = boxes[i], [b, rb] = boxes[j];
        if (ra.left < rb.right - 1 && rb.left < ra.right - 1 && ra.top < rb.bottom - 1 && rb.top < ra.bottom - 1)
          out.push(a + ' | ' + b);
      }
      return out;
    })
  }))
})"""


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)], ids=["laptop", "wide"])
def test_every_row_reads_right_in_chromium(tmp_path: Path, size: tuple[int, int]) -> None:
    chromium = _require_browser()
    page = tmp_path / "r.html"
    html_report.write(page, _everything())
    seen = visit(page, FIT_SCRIPT, chromium, size=size)
    assert seen.console_errors == [] and seen.values["overflow"] <= 0
    by = {s["nodeid"]: s for s in seen.values["sections"]}
    for s in by.values():
        assert len(s["notes"]) == len(set(s["notes"])), s["nodeid"]  # notes once
        assert s["overlaps"] == [], (s["nodeid"], s["overlaps"])  # no text drawn over another (legend, labels)
    assert by["t.py::test_sweep"]["notes"].count("no knee up to 8 users: aggregate grows >= 10% per doubling") == 1
    assert "category multi_turn @ 8 users" in by["t.py::test_sweep"]["facts"]
    assert by["t.py::test_categories"]["facts"]["category qa"].startswith("n=3 (1 prompt; 3 trials of n=1)")
    assert "TTFT p50 5.0 ms" in by["t.py::test_categories"]["facts"]["category qa"]  # as its chart, in ms
    assert by["t.py::test_huge"]["facts"]["ctx"] == "300000"
    assert not any("None" in n for n in by["t.py::test_session_error"]["notes"])
    assert by["t.py::test_session_error"]["facts"]["ctx"] == "500"
    data = json.loads(re.search(r'id="specperf-data">(.*?)</script>', page.read_text(), re.S).group(1))
    session_charts = data["charts"][f"case-{list(by).index('t.py::test_session') + 1}"]
    assert session_charts and all(c["xlabel"] != "users" for c in session_charts)  # no one-point users axis
