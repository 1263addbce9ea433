"""Outputs for other tools: Markdown (report/markdown.py), Bencher Metric Format (report/bencher.py), JUnit
properties (report/junit.py), pytest-benchmark feeds (report/pytest_benchmark.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from support import judged_json
from support.result_json import full

from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare.trials import compare_runs
from pytest_specperf.report.bencher import bencher_json
from pytest_specperf.report.junit import junit_properties
from pytest_specperf.report.markdown import COLUMNS, markdown_summary
from pytest_specperf.report.pytest_benchmark import benchmark_extra_info, per_token_seconds

LONG = full({"nodeid": "perf_cases/test_decode.py::test_long[a|b]", "kind": "sustained", "endpoint": "http://h:8000",
        "model": "m", "server": "vllm", "ctx": 5000, "prompt_tokens": 5003, "completion_tokens": 1500,
        "verdict": "passed", "reason": "", "decode_tps": 48.1, "ttft_s": 0.21, "client_tps": 45.0,
        "early_tps": 49.0, "late_tps": 47.5, "drift": 0.02, "repeat": 3,
        "window_tps": [49.0, 48.0, 47.5],
        "streams": [{"decode_tps": 48.0, "ttft_s": 0.20, "drift": 0.01, "client_tps": 44.0},
                    {"decode_tps": 48.1, "ttft_s": 0.21, "drift": -0.01, "client_tps": 45.0},
                    {"decode_tps": 48.5, "ttft_s": 0.23, "drift": 0.03, "client_tps": 45.5}]})
BURST = full({"nodeid": "perf_cases/test_decode.py::test_burst", "kind": "two_point", "ctx": 5000,
              "prompt_tokens": 5001, "short": 8, "long": 264, "verdict": "failed",
              "reason": "two-point decode 66.8 tok/s < min_tps 70", "decode_tps": 66.8,
              "samples_tps": [66.1, 66.8, 67.0]})
SWEEP = full({"nodeid": "perf_cases/test_decode.py::test_sweep", "kind": "ctx_sweep", "ctx": 1024,
              "verdict": "passed", "decode_tps": 50.2, "points": [
             {"ctx": 64, "prompt_tokens": 64, "decode_tps": 250.1, "samples_tps": [249.0, 250.1, 251.0]},
             {"ctx": 1024, "prompt_tokens": 1026, "decode_tps": 50.2, "samples_tps": [50.0, 50.2, 50.9]}]})
DOWN = full({"nodeid": "perf_cases/test_decode.py::test_down", "kind": "sustained", "verdict": "error",
             "reason": "connection refused"})
RESULTS = [LONG, BURST, SWEEP, DOWN]


def cells(line: str) -> list[str]:
    """A Markdown table row split on unescaped pipes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_markdown_columns_and_escaping() -> None:
    md = markdown_summary(RESULTS)
    # the diagnosis first: errors, then failures, each with its reason; then the table
    attention, rest = md.split("\n\n", 1)
    assert attention.splitlines() == ["- **error** [sustained] test_down: connection refused",
                                      "- **failed** [two_point] test_burst: " + BURST["reason"].replace("<", "&lt;")]
    lines = rest.splitlines()
    assert cells(lines[0]) == list(COLUMNS)
    assert all(len(cells(line)) == len(COLUMNS) for line in lines)
    long_row = next(line for line in lines if "test_long" in line)
    assert "test_long[a\\|b]" in long_row
    # ttft: the median of its 3 streams' (repeat=3), named so
    assert cells(long_row)[1:7] == ["5003", "1500", "p50 210 ms", "48.1", "49.0 -> 47.5", "0.02"]
    assert "failed: two-point decode 66.8 tok/s" in md and "error: connection refused" in md
    assert sum("test_sweep" in line for line in lines) == 3  # the sweep and one row per point
    assert "| `test_decode.py::test_sweep` @ ctx 64 | 64 |" in md


def _shifted(results: list[dict], factor: float) -> list[dict]:
    out = []
    for r in results:
        r = json.loads(json.dumps(r))
        for s in r.get("streams", []):
            s["decode_tps"] *= factor
        r["samples_tps"] = [x * factor for x in r.get("samples_tps", [])]
        out.append(r)
    return out


def test_markdown_with_comparisons() -> None:
    base = [LONG, BURST, full({"nodeid": "perf_cases/test_decode.py::test_gone", "kind": "two_point",
                               "verdict": "passed", "decode_tps": 60.0, "samples_tps": [60.0]})]
    rng = np.random.default_rng(0)
    noisy = {**BURST, "samples_tps": list(66 * np.exp(rng.normal(0, 0.3, 3)))}
    cand = [_shifted([LONG], 0.7)[0], noisy, SWEEP]
    ccs = compare_runs([load_record(r) for r in base], [load_record(r) for r in cand], max_regression=0.05,
                       metrics=("decode_tps",))
    md = markdown_summary(cand, ccs)
    lines = md.splitlines()
    assert cells(next(line for line in lines if line.startswith("|"))) == [*COLUMNS, "vs baseline"]
    table = [line for line in lines if line.startswith("|")]
    assert all(len(cells(line)) == len(COLUMNS) + 1 for line in table)
    long_row = next(line for line in table if "test_long" in line)
    assert re.search(r"decode_tps -30\.\d% \[.*\] \*\*regressed\*\*", cells(long_row)[-1])
    assert cells(next(line for line in table if "test_gone" in line))[-1] == "missing"
    assert cells(next(line for line in table if "test_sweep` @ ctx 64" in line))[-1] == "new"
    assert "Compared with the baseline: 1 regressed, 1 inconclusive" in md
    assert "Regressions:" in md and "regressed beyond 5%" in md
    mde = next(line for line in lines if line.startswith("- `test_decode.py::test_burst`"))
    assert "smallest detectable change is" in mde and "trials per side needed" in mde


def test_bencher_metric_format() -> None:
    bmf = bencher_json(RESULTS)
    json.dumps(bmf, allow_nan=False)  # strict JSON: no NaN
    assert set(bmf) == {LONG["nodeid"], BURST["nodeid"], f"{SWEEP['nodeid']}@ctx=64", f"{SWEEP['nodeid']}@ctx=1024"}
    long = bmf[LONG["nodeid"]]
    assert set(long) == {"decode-tps", "ttft-s", "client-tps", "early-tps", "late-tps", "drift"}
    assert long["decode-tps"] == {"value": 48.1, "lower_value": 48.0, "upper_value": 48.5}
    assert long["drift"] == {"value": 0.02, "lower_value": -0.01, "upper_value": 0.03}
    assert bmf[BURST["nodeid"]] == {"decode-tps": {"value": 66.8, "lower_value": 66.1, "upper_value": 67.0}}
    for measures in bmf.values():
        for m in measures.values():
            assert isinstance(m["value"], float)
            assert m.get("lower_value", m["value"]) <= m["value"] <= m.get("upper_value", m["value"])


def test_bencher_bounds_of_a_load_level_span_its_trials_not_its_users() -> None:
    # 2 trials x 3 users: the users' spread (40-60) is not a trial's; the bounds are the trials' medians and totals
    streams = [{"decode_tps": v, "trial": i // 3, "drift": 0.01 * i} for i, v in enumerate([40, 50, 60, 41, 52, 59])]
    level = {"concurrency": 3, "decode_tps": 51.0, "total_tps": 150.0, "drift": 0.02, "streams": streams,
             "trials": [{"decode_tps": 50.0, "ttft_s": 0.1, "total_tps": 148.0},
                        {"decode_tps": 52.0, "ttft_s": 0.12, "total_tps": 152.0}]}
    single = {"concurrency": 2, "decode_tps": 60.0, "total_tps": 119.0,
              "streams": [{"decode_tps": 55.0}, {"decode_tps": 65.0}]}
    sweep = full({"nodeid": "t.py::test_load", "kind": "load_sweep", "verdict": "passed", "levels": [level, single]})
    bmf = bencher_json([sweep])
    three, two = bmf["t.py::test_load@users=3"], bmf["t.py::test_load@users=2"]
    assert three["decode-tps"] == {"value": 51.0, "lower_value": 50.0, "upper_value": 52.0}
    assert three["total-tps"] == {"value": 150.0, "lower_value": 148.0, "upper_value": 152.0}
    assert three["drift"] == {"value": 0.02}  # no per-trial drift: no bounds rather than the users' spread
    assert two["decode-tps"] == {"value": 60.0}  # one trial: nothing to bound


def test_junit_properties_are_strings() -> None:
    props = junit_properties(LONG)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props)
    d = dict(props)
    assert d["specperf_verdict"] == "passed" and d["specperf_decode_tps"] == "48.1"
    assert d["specperf_drift"] == "0.02" and d["specperf_ttft_s"] == "0.21" and d["specperf_repeat"] == "3"
    ccs = compare_runs([load_record(LONG)], [load_record(r) for r in _shifted([LONG], 0.7)], max_regression=0.05)
    with_cmp = dict(junit_properties(LONG, ccs))
    assert with_cmp["specperf_cmp_decode_tps_verdict"] == "regressed"
    assert float(with_cmp["specperf_cmp_decode_tps_change"]) == pytest.approx(-0.3, abs=0.01)
    assert len(with_cmp["specperf_cmp_decode_tps_ci"].split(",")) == 2
    # the same from dicts riding on the result (e.g. after an xdist hop)
    riding = dict(junit_properties({**LONG, "comparisons": [cc.as_dict() for cc in ccs]}))
    assert riding == with_cmp
    assert all(isinstance(v, str) for _, v in junit_properties(DOWN))


def test_pytest_benchmark_feeds() -> None:
    info = benchmark_extra_info(LONG)
    json.dumps(info, allow_nan=False)
    assert info["decode_tps"] == 48.1 and info["model"] == "m" and info["nodeid"] == LONG["nodeid"]
    assert "streams" not in info and "window_tps" not in info
    assert per_token_seconds(LONG) == pytest.approx([1 / 48.0, 1 / 48.1, 1 / 48.5])
    assert per_token_seconds(BURST) == pytest.approx([1 / 66.1, 1 / 66.8, 1 / 67.0])
    assert per_token_seconds(SWEEP) == pytest.approx([1 / 50.0, 1 / 50.2, 1 / 50.9])  # the slowest point
    assert per_token_seconds(DOWN) == []


def test_markdown_carries_the_noise_floor_verdict_of_json_and_junit() -> None:
    from pytest_specperf.compare import gates as gating

    def case(ttft: float) -> dict:
        streams = [{"decode_tps": 100.0 + i * 0.1, "ttft_s": ttft + i * 1e-5} for i in range(5)]
        return full({"nodeid": "t::c", "kind": "sustained", "verdict": "passed", "reason": "", "decode_tps": 100.2,
                     "ttft_s": ttft, "streams": streams})

    base, cand = case(0.010), case(0.015)  # +50%, significant, but 5 ms: under the 10 ms floor
    judged_json.against_baseline(gating.Gate(), cand, [base])
    ttft = next(c for c in cand["comparisons"] if c["metric"] == "ttft_s")
    assert ttft["verdict"] == "passed" and ttft["comparison"]["verdict"] == "passed"
    props = dict(junit_properties(cand))
    assert props["specperf_cmp_ttft_s_verdict"] == "passed"
    md = markdown_summary([cand], gating.comparisons_of([load_record(cand)]))
    row = next(line for line in md.splitlines() if line.startswith("| `"))
    assert "ttft_s +49.9%" in row and "regressed" not in md


def test_loading_the_plugin_leaves_the_heavy_libraries_for_later() -> None:
    # Every pytest run in a project with the plugin installed pays for its import: scipy.stats (0.6 s of CPU)
    # waits for the first statistic, matplotlib for the first chart.
    code = ("import sys, pytest_specperf.pytest_plugin.hooks; "
            "sys.exit(','.join(m for m in ('scipy.stats', 'matplotlib') if m in sys.modules) or None)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-300:]
