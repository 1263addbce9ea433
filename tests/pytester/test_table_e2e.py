"""The end-of-run table shows what matters, in real pytest runs against real simulators."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.load_helpers import true_decode
from support.result_json import full
from support.table_lines import WIDTH, block, joined, section

from pytest_specperf.report.table import table
from pytest_specperf.sim import FAULT_HEADER, SimServer, faults

REPO = Path(__file__).resolve().parents[2]
SPEED = 20.0
FAST = f"--specperf-sim-speed={SPEED:g}"
CASES = """
import pytest

@pytest.mark.sustained(tokens=300, ctx=64)
def test_stalled(specperf): pass

@pytest.mark.ctx_sweep(ctxs=[64, 2048], tokens=512)  # a span past the timing noise
def test_sweep(specperf): pass

def test_ad_hoc(specperf):
    specperf.sustained(tokens=64, ctx=64, content="prose")
    specperf.sustained(tokens=80, ctx=128, content="code")
"""


def _table(res: pytest.RunResult) -> list[str]:
    start = next(i for i, line in enumerate(res.outlines) if line.startswith("case "))
    return [line for line in res.outlines[start:] if line.startswith(("case ", "["))]


def _lines(res: pytest.RunResult) -> list[str]:
    """The table with the lines under its rows."""
    lines = section(res.outlines)
    return lines[next(i for i, line in enumerate(lines) if line.startswith("case ")):]


def _row(lines: list[str], case: str) -> str:
    return next(line for line in lines if case in line)


def test_stalls_sweep_figure_and_direct_calls_are_shown(pytester: pytest.Pytester) -> None:
    # One stall of 1 s of real time (20 model seconds at speed 20) after 100 tokens of every long enough request.
    (pytester.path / "stall.yaml").write_text(f"faults: 'stall={SPEED:g}@100'\n")
    pytester.makepyfile(test_perf=CASES)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(FAST, "--specperf-sim=stall.yaml", f"--specperf-json={out}",
                                        "-p", "no:cacheprovider")
    res.assert_outcomes(passed=3)
    lines = _table(res)
    rows = {r["nodeid"].split("::")[-1] + str(r.get("call", "")): r for r in json.loads(out.read_text())["results"]}

    stalled = rows["test_stalled"]
    assert stalled["stalls"] == 1 and 0.95 <= stalled["stall_s"] <= 2.0  # the truth: 1.0 s
    # a column where the table fits 120 columns with it, else a line under the row: in one place, not both
    shown = block(_lines(res), "test_stalled")
    assert (" stalls " in lines[0]) != (f"stalls: 1 ({stalled['stall_s']:.1f} s)" in shown)
    assert f"1 ({stalled['stall_s']:.1f} s)" in shown

    points = rows["test_sweep"]["points"]
    slowest = min(points, key=lambda p: p["decode_tps"])
    assert f"{slowest['decode_tps']:.1f} (min, ctx {slowest['ctx']})" in _row(lines, "test_sweep")

    first, second = _row(lines, "test_ad_hoc (call 1, prose)"), _row(lines, "test_ad_hoc (call 2, code)")
    assert rows["test_ad_hoc1"]["content"] == "prose" and rows["test_ad_hoc2"]["content"] == "code"
    assert " 80 " in second and " 64 " in first  # tokens told apart too


def test_comparison_column_when_comparing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf="""
        import pytest
        @pytest.mark.two_point(ctx=64, long=1032, repeat=3)
        def test_tp(specperf): pass
    """)
    first = pytester.runpytest_subprocess(FAST, "--specperf-save=base", "-p", "no:cacheprovider")
    assert "vs baseline" not in _table(first)[0]
    res = pytester.runpytest_subprocess(FAST, "--specperf-compare=base", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    header, row = _table(res)[:2]
    assert "vs baseline" in header
    assert re.search(r"decode ([+-]\d|0\.0%)", row) and row.split("%")[1].split()[0] in (  # 0.0% carries no sign
        "passed", "improved", "inconclusive", "regressed")


def test_comparison_column_in_ab(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf="""
        import pytest
        @pytest.mark.two_point(ctx=64, long=1032)
        def test_tp(specperf): pass
    """)
    with SimServer("healthy", speed=SPEED) as a, SimServer("healthy", speed=SPEED) as b:
        res = pytester.runpytest_subprocess(f"--specperf-ab={a.url},{b.url}", "--specperf-ab-trials=2",
                                            "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    header, row = _table(res)[:2]
    assert "B vs A" in header and "decode " in row


def test_no_negative_zero() -> None:
    lines = table([full({"nodeid": "t.py::test_x", "kind": "sustained", "ctx": 64, "completion_tokens": 300,
                         "decode_tps": 50.0, "early_tps": 50.0, "late_tps": 50.02, "drift": -0.0004,
                         "verdict": "passed"})])
    assert "-0.00" not in lines[1] and " 0.00 " in lines[1]
    assert "stalls" not in lines[0] and "vs baseline" not in lines[0]  # columns only when they say something


def test_fault_syntax_is_in_help_and_readme() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_specperf.sim", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    readme = (REPO / "README.md").read_text()
    items = [line.split()[0] for line in (faults.__doc__ or "").splitlines() if line.startswith("    ")]
    assert {"stall=S@N", "status=CODE*K", "retry_after=S", "retry_date=S"} <= set(items)  # the parse found them
    for item in items:
        assert item in done.stdout and f"`{item}`" in readme
    assert FAULT_HEADER in done.stdout and FAULT_HEADER in readme


LOAD_SPEED = 5.0  # slow enough that two streams of 600 tokens decode together for most of their length
LOAD_CASES = f"""
import pytest

@pytest.mark.sustained(concurrency=2, tokens=600, ctx=200, min_total_tps=1)
def test_two_users(specperf): pass

@pytest.mark.rate(rps={0.5 * LOAD_SPEED}, requests=8, tokens=32, ctx=100, slo={{"tpot_ms": 1000}})
def test_rate(specperf): pass

def test_too_long(specperf):
    specperf.sustained(concurrency=2, tokens=64, ctx=300_000)
"""


def test_concurrency_and_rate_rows_say_what_they_are(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=LOAD_CASES)
    out = pytester.path / "r.json"
    with SimServer("healthy", speed=LOAD_SPEED) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}", "-p",
                                            "no:cacheprovider")
        rows = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
        two = rows["test_two_users"]
        truth = [sim.truth(s["response_id"]) for s in two["streams"]]
    res.assert_outcomes(passed=2, errors=1)
    lines = _table(res)
    header = lines[0].split()
    # Each user's decode the row stands on is the simulator's, from its records of the steps it took (the
    # aggregate's accuracy is test_load_e2e's; here its window is under a second on a busy machine).
    for stream, rec in zip(two["streams"], truth, strict=True):
        assert abs(stream["decode_tps"] / true_decode(rec) - 1) < 0.03, (stream["decode_tps"], true_decode(rec))
    row = _row(lines, "test_two_users")
    assert f" {two['decode_tps']:.1f} (p10 {two['decode_p10_tps']:.1f}) " in row
    assert f" p50 {two['ttft_s'] * 1000:.0f} ms " in row  # the median user's TTFT, named so
    assert f"  2  {two['total_tps']:.1f} (min 1)  passed" in row
    # The errored direct call is still a 2-user case, in the JSON and in the table.
    err = rows["test_too_long"]
    assert err["verdict"] == "error" and err["concurrency"] == 2
    cells = _row(lines, "test_too_long").split()
    assert cells[-1] == "error" and cells[-3] == "2"  # users, total, verdict; its reason under the row
    assert f"error: {err['reason']}" in block(_lines(res), "test_too_long")
    # The rate row: its load is a request rate, said with the verdict, not under "users".
    rate = rows["test_rate"]
    cells = _row(lines, "test_rate").split()
    assert "users" in header and cells[-3] == "-"
    assert f"attainment {rate['attainment']:.2f}, goodput {rate['goodput_rps']:.3g} req/s" in block(_lines(res),
                                                                                                      "test_rate")
    # The diagnosis comes first: the errored call, with its reason, above the table (wrapped at its width).
    shown = section(res.outlines)
    assert joined(shown, 0) == f"ERROR [sustained] test_too_long (call 1, prose): {err['reason']}"
    assert max(map(len, shown)) <= WIDTH
