"""What a new user sees: a table within 120 columns that says once what one-trial comparisons cannot decide, the
goals a passing case was judged against with their margins, TTFT named by its percentile, and the small mistakes
(a case file's name, an unclosed brace, a wrong endpoint, a wrong unit) answered in one line that names the fix."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from support.load_helpers import true_aggregate, true_decode
from support.table_lines import WIDTH, block, section

from pytest_specperf.report.table import signed_pct
from pytest_specperf.sim import SimServer

FAST = "--specperf-sim-speed=20"
STEADY = "--specperf-sim-speed=5"  # compared runs: slow enough that a loaded host's one trial moves a few per cent
NO_CACHE = ("-p", "no:cacheprovider")
FOUR = """
import pytest

@pytest.mark.sustained(tokens=300, ctx=500, min_tps=40, max_ttft_s=2)
def test_single_user(specperf): pass

@pytest.mark.sustained(tokens=100, ctx=200, concurrency=4, max_ttft_s=2)
def test_four_users(specperf): pass

@pytest.mark.two_point(ctx=256, long=1032)
def test_two_point(specperf): pass

@pytest.mark.sustained(tokens=120, ctx=64, content="code")
def test_code(specperf): pass
"""


def _table(res: pytest.RunResult) -> list[str]:
    lines = section(res.outlines)
    return lines[next(i for i, line in enumerate(lines) if line.startswith("case ")):]


def test_four_cases_against_a_baseline_fit_120_columns_and_say_once_what_one_trial_cannot(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_four=FOUR)
    pytester.runpytest_subprocess(STEADY, "--specperf-save=base", *NO_CACHE).assert_outcomes(passed=4)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(STEADY, "--specperf-compare=base", f"--specperf-json={out}", *NO_CACHE)
    results = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
    shown = section(res.outlines)
    assert max(map(len, shown)) <= WIDTH, max(shown, key=len)
    lines = _table(res)
    one_trial = [c for r in results.values() for c in r["comparisons"]
                 if c["comparison"] and c["comparison"]["method"].startswith("noise-floor")
                 and c["verdict"] == "inconclusive"]
    assert one_trial, "no comparison was left undecided by one trial per side: nothing to say once"
    # said once per run, not once per metric: one note under the table, no per-metric warning in pytest's summary
    text = "\n".join(res.outlines)
    assert text.count("had one trial on each side") == 1
    assert not [x for x in res.outlines if "SpecperfWarning" in x and "1 trial per side" in x]
    need = max(c["comparison"]["trials_needed"] for c in one_trial)
    note = " ".join(x.strip() for x in shown[next(i for i, x in enumerate(shown) if x.startswith("note: ")):])
    assert f"{len(one_trial)} comparisons had one trial on each side" in note and f"repeat={need}" in note
    # every comparison of every case is still shown, with its change and verdict, on or under its row
    for name, r in results.items():
        where = block(lines, name)
        for c in r["comparisons"]:
            metric = {"decode_tps": "decode", "ttft_s": "ttft", "total_tps": "total"}[c["metric"]]
            assert f"{metric} " in where and c["verdict"] in where, (name, where)


TWO = """
import pytest

@pytest.mark.sustained(tokens=300, ctx=500)
def test_single_user(specperf): pass

@pytest.mark.sustained(tokens=100, ctx=200, concurrency=4)
def test_four_users(specperf): pass
"""


def test_the_named_baseline_stays_the_rows_comparison_beside_a_short_history_and_one_trial_is_said_once(
        pytester: pytest.Pytester) -> None:
    # --specperf-compare=base with a history of two runs whose latest is not base: the row, the JSON's comparisons
    # and the table's "vs baseline" are against base; the history's fall-back (the baseline rule against its latest
    # run) is kept apart, and one trial per side is said once for both
    pytester.makepyfile(test_two=TWO)
    for name in ("base", "latest"):  # a saved run is recorded in the default history too: runs 1 and 2
        pytester.runpytest_subprocess(STEADY, f"--specperf-save={name}", *NO_CACHE).assert_outcomes(passed=2)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(STEADY, "--specperf-compare=base", "--specperf-history",
                                        f"--specperf-json={out}", *NO_CACHE)
    ran = res.parseoutcomes()  # one trial a side: a loaded host can move one by more than it can decide, and fail it
    assert ran.get("passed", 0) + ran.get("failed", 0) == 2, res.outlines[-3:]
    saved = {name: {r["nodeid"]: r for r in json.loads(path.read_text())["results"]}
             for name in ("base", "latest") for path in (pytester.path / ".specperf" / "runs").glob(f"*_{name}.json")}
    results = json.loads(out.read_text())["results"]
    checked = 0
    for r in results:
        base, latest = saved["base"][r["nodeid"]], saved["latest"][r["nodeid"]]
        for metric in ("decode_tps", "total_tps"):
            if r.get(metric) is None or base.get(metric) is None:
                continue
            # one trial a side: the change is exactly this run's figure over the other side's
            assert abs(base[metric] / latest[metric] - 1) > 1e-6, "base and latest alike: nothing tells them apart"
            (named,) = [c for c in r["comparisons"] if c["metric"] == metric]
            assert 1 + named["comparison"]["change"] == pytest.approx(r[metric] / base[metric], rel=1e-9), named
            (kept,) = [c for c in r["history_comparisons"] if c["metric"] == metric]
            assert 1 + kept["comparison"]["change"] == pytest.approx(r[metric] / latest[metric], rel=1e-9), kept
            assert kept["reason"].startswith("history, against run 2: "), kept["reason"]
            checked += 1
    assert checked == 3  # decode of both cases, the aggregate of the four users
    lines = _table(res)
    one = block(lines, "test_single_user")
    (single,) = [r for r in results if r["nodeid"].endswith("::test_single_user")]
    (decode,) = [c for c in single["comparisons"] if c["metric"] == "decode_tps"]
    assert f"decode {signed_pct(decode['comparison']['change'])} {decode['verdict']}" in one, one  # vs baseline
    assert "judged against the latest (run 2, " in one and "apart from the --specperf-compare baseline" in one, one
    # the advice is said once per run, for the named baseline's and the history's comparisons alike
    text = "\n".join(res.outlines)
    assert text.count("had one trial on each side") == 1, text
    assert not [x for x in res.outlines if "SpecperfWarning" in x and "1 trial per side" in x]
    undecided = [c for r in results for key in ("comparisons", "history_comparisons") for c in r[key]
                 if c["verdict"] == "inconclusive" and c["comparison"]["method"].startswith("noise-floor")
                 and c["comparison"]["n_base"] == 1 == c["comparison"]["n_cand"]]
    note = " ".join(x.strip() for x in lines[next(i for i, x in enumerate(lines) if x.startswith("note: ")):])
    assert f"{len(undecided)} comparisons had one trial on each side" in note, note


LONG = "test_load_curve_with_a_long_name_for_width"


def test_a_long_test_name_is_cut_in_its_middle_to_fit_120_columns_and_said_whole_under_its_row(
        pytester: pytest.Pytester) -> None:
    # a load sweep's row is wide (users, aggregate with its floor, p10 decode): with a 42-character test name it
    # would pass 120 columns after every movable column has gone under the rows
    pytester.makepyfile(test_long=f"""
        import pytest

        @pytest.mark.load_sweep(concurrency=[1, 4], tokens=128, ctx=200, min_total_tps=200)
        def {LONG}(specperf): pass
    """)
    out = pytester.path / "r.json"
    # 5x: at 20x a loaded host's four streams of 64 tokens could share no window to measure
    res = pytester.runpytest_subprocess(STEADY, f"--specperf-json={out}", *NO_CACHE)
    res.assert_outcomes(passed=1)
    shown = section(res.outlines)
    assert max(map(len, shown)) <= WIDTH, max(shown, key=len)
    lines = _table(res)
    (i,) = [i for i, line in enumerate(lines) if line.startswith("[load_sweep] ")]
    head, cut, tail = lines[i].split()[1].partition("...")  # the name's start and end, the middle cut
    assert cut and head.startswith("test_") and LONG.startswith(head), lines[i]
    assert len(tail) >= 8 and LONG.endswith(tail), lines[i]  # both ends kept
    assert lines[i].split()[2:4] == ["200", "128"]  # its ctx and tokens stay in their columns
    # nothing is lost: the whole node id on the row's first line under it, and in the JSON
    (r,) = json.loads(out.read_text())["results"]
    assert r["nodeid"].endswith(f"::{LONG}")
    assert lines[i + 1] == f"    case: [load_sweep] {r['nodeid']}", lines[i + 1]
    assert [line.split()[1] for line in lines if line.startswith("  @ ")] == ["1", "4"]  # its levels' rows


def test_a_passing_row_shows_its_goals_and_margins_against_the_simulator(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_goals="""
        import pytest

        @pytest.mark.sustained(tokens=300, ctx=500, min_tps=40, max_ttft_s=2)
        def test_single_user(specperf): pass

        @pytest.mark.sustained(tokens=64, ctx=200, concurrency=6, max_ttft_s=2, max_ttft_p90_s=3)
        def test_six_users(specperf): pass
    """)
    out, page = pytester.path / "r.json", pytester.path / "r.html"
    with SimServer("healthy", speed=5.0, overrides={"max_batch": 2}) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}",
                                            f"--specperf-html={page}", *NO_CACHE)
        results = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
        truth = {name: [sim.truth(s["response_id"]) for s in r["streams"]] for name, r in results.items()}
    res.assert_outcomes(passed=2)
    lines = _table(res)
    assert max(map(len, section(res.outlines))) <= WIDTH
    one = block(lines, "test_single_user")
    found = re.search(r"min_tps 40 tok/s: decode (\d+\.\d) tok/s \(\+(\d+\.\d)%\)", one)
    assert found, one
    decode = float(found.group(1))
    assert abs(decode / true_decode(truth["test_single_user"][0]) - 1) < 0.03  # the simulator's own rate
    # the margin is the unrounded figure's: the shown decode's rounding (0.05 tok/s) moves it by up to 0.125 points,
    # and its own rounding by 0.05
    assert float(found.group(2)) == pytest.approx((decode / 40 - 1) * 100, abs=0.05 / 40 * 100 + 0.05)
    assert "max_ttft_s 2 s: ttft " in one
    # under load max_ttft_s reads the median request and says so; max_ttft_p90_s the 90th percentile
    six = block(lines, "test_six_users")
    true_ttft = np.array([t["ttft_s"] for t in truth["test_six_users"]])
    p50 = re.search(r"max_ttft_s 2 s: ttft p50 (\d+) ms \(\+(\d+\.\d)%\)", six)
    p90 = re.search(r"max_ttft_p90_s 3 s: ttft p90 (\d+) ms \(\+(\d+\.\d)%\)", six)
    assert p50 and p90, six
    t50, t90 = np.percentile(true_ttft, [50, 90]) * 1000
    assert t50 - 1 <= int(p50.group(1)) <= t50 + 50 and t90 - 1 <= int(p90.group(1)) <= t90 + 50
    assert t90 > 1.5 * t50  # the queue behind two batch slots: the percentiles are told apart
    assert float(p50.group(2)) == pytest.approx((1 - int(p50.group(1)) / 2000) * 100, abs=0.06)
    # the HTML: the same goals, TTFT ceilings included, and TTFT named by its percentiles
    doc = html.unescape(page.read_text(encoding="utf-8"))
    assert f"min_tps 40 tok/s: decode {decode:.1f} tok/s" in doc
    assert f"max_ttft_s 2 s: ttft p50 {p50.group(1)} ms" in doc and f"ttft p90 {p90.group(1)} ms" in doc
    assert re.search(r"<th>ttft p50 / p90 / p99</th><td>\d+ / \d+ / \d+ ms</td>", doc)


def test_a_passing_load_sweep_level_shows_its_goals_and_margins_against_the_simulator(
        pytester: pytest.Pytester) -> None:
    # a sweep's floors are per level: min_tps names 4 users only, min_total_tps holds at every level
    pytester.makepyfile(test_sweep_goals="""
        import pytest

        @pytest.mark.load_sweep(concurrency=[1, 4], tokens=128, ctx=200, min_tps={4: 100}, min_total_tps=200)
        def test_sweep(specperf): pass
    """)
    out, page = pytester.path / "r.json", pytester.path / "r.html"
    with SimServer("healthy", speed=5.0) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", f"--specperf-json={out}",
                                            f"--specperf-html={page}", *NO_CACHE)
        r = json.loads(out.read_text())["results"][0]
        truth = {lv["concurrency"]: [sim.truth(s["response_id"]) for s in lv["streams"]] for lv in r["levels"]}
    res.assert_outcomes(passed=1)
    lines = _table(res)
    assert max(map(len, section(res.outlines))) <= WIDTH
    assert r.get("goals") is None  # the case's floors are its levels' (a None is left out)
    four, one = block(lines, "@ 4 users"), block(lines, "@ 1 user")
    p10 = re.search(r"min_tps 100 tok/s: p10 user decode (\d+\.\d) tok/s \(\+(\d+\.\d)%\)", four)
    total = re.search(r"min_total_tps 200 tok/s: aggregate (\d+\.\d) tok/s \(\+(\d+\.\d)%\)", four)
    assert p10 and total, four
    decode, aggregate = float(p10.group(1)), float(total.group(1))
    # the simulator's own rates: the 10th-percentile user's decode, and what every user truly produced at once
    true_p10 = float(np.percentile([true_decode(rec) for rec in truth[4]], 10))
    assert abs(decode / true_p10 - 1) < 0.03, (decode, true_p10)
    assert abs(aggregate / true_aggregate(truth[4]) - 1) < 0.05, (aggregate, true_aggregate(truth[4]))
    # each margin is the figure's distance over its floor, as a share of the floor (the shown figure's rounding,
    # 0.05 tok/s, moves it by up to 0.05 / bound, and its own rounding by 0.05 points)
    assert float(p10.group(2)) == pytest.approx((decode / 100 - 1) * 100, abs=0.05 / 100 * 100 + 0.05)
    assert float(total.group(2)) == pytest.approx((aggregate / 200 - 1) * 100, abs=0.05 / 200 * 100 + 0.05)
    # min_tps was not set at 1 user: that level was judged on the aggregate floor alone
    assert "min_total_tps 200 tok/s: aggregate " in one and "min_tps 100" not in one
    assert [[g["keyword"] for g in lv["goals"]] for lv in r["levels"]] == [["min_total_tps"],
                                                                          ["min_tps", "min_total_tps"]]
    # the HTML: each level's goals, with its users, its figure and its margin
    doc = html.unescape(page.read_text(encoding="utf-8"))
    assert f"min_tps 100 tok/s at 4 users: p10 user decode {decode:.1f} tok/s (+{p10.group(2)}%)" in doc
    assert f"min_total_tps 200 tok/s at 4 users: aggregate {aggregate:.1f} tok/s (+{total.group(2)}%)" in doc
    assert "min_total_tps 200 tok/s at 1 user: aggregate " in doc


def test_a_value_in_the_wrong_unit_is_an_error_row_in_the_table_and_the_saved_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_units="""
        import pytest

        @pytest.mark.sustained(tokens=64, ctx=64, max_ttft_s=2000)
        def test_ms_meant(specperf): pass

        @pytest.mark.sustained(tokens=64, ctx=64)
        def test_fine(specperf): pass
    """)
    (pytester.path / "cases.specperf.yaml").write_text("typo:\n  sustained: {tokens: 64, ctxx: 64}\n")
    res = pytester.runpytest_subprocess(FAST, "--specperf-save=run", *NO_CACHE)
    res.assert_outcomes(passed=1, failed=2)
    unit = "max_ttft_s=2000 is 33.3 minutes: max_ttft_s is in seconds (2 s = 2, 200 ms = 0.2)"
    res.stdout.fnmatch_lines(["*test_units.py::test_ms_meant - Failed: sustained(): max_ttft_s=2000 is*"])
    assert unit in res.stdout.str()
    lines = _table(res)
    for case, why in (("test_ms_meant", unit), ("typo", "unknown keyword 'ctxx'; did you mean 'ctx'?")):
        where = block(lines, case)
        assert where.startswith(f"[sustained] {case} ") and " error | error: " in where and why in where
    saved = json.loads(next((pytester.path / ".specperf" / "runs").glob("*.json")).read_text())["results"]
    verdicts = {r["nodeid"].split("::")[-1]: (r["verdict"], r.get("kind"), r.get("reason", "")) for r in saved}
    assert verdicts["test_ms_meant"][:2] == ("error", "sustained") and unit in verdicts["test_ms_meant"][2]
    assert verdicts["typo"][:2] == ("error", "sustained") and verdicts["test_fine"][0] == "passed"


def test_a_yaml_file_named_without_specperf_says_how_case_files_are_named(pytester: pytest.Pytester) -> None:
    (pytester.path / "chat.yaml").write_text("chat:\n  sustained: {tokens: 64}\n")
    res = pytester.runpytest_subprocess("chat.yaml", FAST, *NO_CACHE)
    assert res.ret != 0
    res.stdout.fnmatch_lines(["chat.yaml is not read as perf cases: case files end in .specperf.yaml or "
                              ".specperf.yml; rename it to chat.specperf.yaml"])
    assert "no match" not in res.stdout.str()
    # a folder's other YAML files are not the plugin's business: a run of the folder collects nothing from them
    pytester.makepyfile(test_x="def test_x(): pass")
    res = pytester.runpytest_subprocess(FAST, *NO_CACHE)
    res.assert_outcomes(passed=1)
    assert "not read as perf cases" not in res.stdout.str()


def test_a_folder_holding_only_other_yaml_says_how_case_files_are_named(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("cases")
    (folder / "chat.yml").write_text("chat:\n  sustained: {tokens: 64}\n")
    res = pytester.runpytest_subprocess("cases", FAST, *NO_CACHE)
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    res.stdout.fnmatch_lines(["specperf: chat.yml is not read as perf cases: case files end in .specperf.yaml or "
                              ".specperf.yml; rename it to chat.specperf.yaml"])


def test_an_unclosed_brace_is_reported_on_the_line_it_opened(pytester: pytest.Pytester) -> None:
    (pytester.path / "chat.specperf.yaml").write_text(
        "short:\n  sustained: {tokens: 64, ctx: 64\nlong:\n  sustained: {tokens: 128}\n")
    res = pytester.runpytest_subprocess(FAST, *NO_CACHE)
    res.stdout.fnmatch_lines(["chat.specperf.yaml: line 2 is not valid YAML: the '{' opened there is not closed "
                              "(*on line 3)"])


def test_a_404_on_the_models_list_names_the_endpoint_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="""
        import pytest

        @pytest.mark.sustained(tokens=64, ctx=64)
        def test_one(specperf): pass
    """)
    with SimServer("healthy", speed=20.0) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}/openai", *NO_CACHE)
    out = res.stdout.str()
    assert "GET /v1/models: HTTP 404" in out
    assert "is --endpoint the server's base URL? It should answer GET /v1/models" in out


def test_a_404_on_the_b_endpoints_models_list_names_the_ab_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="""
        import pytest

        @pytest.mark.sustained(tokens=64, ctx=64)
        def test_one(specperf): pass
    """)
    with SimServer("healthy", speed=20.0) as a, SimServer("healthy", speed=20.0) as b:
        wrong = f"{b.url}/openai"  # B's URL with a path the server does not serve
        res = pytester.runpytest_subprocess(f"--specperf-ab={a.url},{wrong}", *NO_CACHE)
    out = res.stdout.str()
    said = next(line for line in res.outlines if "GET /v1/models: HTTP 404" in line)
    # the URL came from --specperf-ab, not --endpoint (which was not given): the fix names the option to change
    assert f"HTTP 404 from {wrong}; is this --specperf-ab URL the server's base URL? It should answer " \
           "GET /v1/models, e.g. --specperf-ab=http://a:8000,http://b:8000" in out, said
    assert "--endpoint" not in out, said


def test_help_lists_every_built_in_simulator_profile(pytester: pytest.Pytester) -> None:
    folder = Path(__file__).resolve().parents[2] / "pytest_specperf" / "sim" / "profiles"
    profiles = sorted(p.stem for p in folder.glob("*.yaml"))
    assert len(profiles) >= 6
    res = pytester.runpytest_subprocess("--help")
    text = " ".join(res.stdout.str().split())  # argparse wraps the help
    listed = re.search(r"a built-in name \(([^)]*)\)", text)
    assert listed and listed.group(1).split(", ") == profiles
