"""The summary table and the atomic JSON file."""

import json
import os
from pathlib import Path

from support.result_json import full

from pytest_specperf.report.json_file import write_json_atomic
from pytest_specperf.report.output import Meta
from pytest_specperf.report.registry import OUTPUTS
from pytest_specperf.report.table import COLUMNS, count_text, n_users, signed_pct, summary, table


def _sustained(**kw):
    base = {"nodeid": "perf_cases/test_x.py::test_long", "kind": "sustained", "prompt_tokens": 5003, "ctx": 5000,
            "completion_tokens": 1500, "ttft_s": 0.25, "decode_tps": 33.4, "early_tps": 48.1, "late_tps": 28.4,
            "drift": 0.41, "verdict": "failed", "reason": "drift 0.41 > 0.15"}
    return full({**base, **kw})


def test_table_has_every_column_and_the_diagnosis():
    lines = table([_sustained(), full({"nodeid": "t.py::test_b", "kind": "two_point", "prompt_tokens": 5001,
                                        "short": 8, "long": 264, "decode_tps": 66.8, "verdict": "passed"})])
    assert lines[0].split() [:2] == ["case", "ctx"]
    for col in COLUMNS:
        assert col in lines[0]
    assert "[sustained] test_long" in lines[1]
    assert "48.1 -> 28.4" in lines[1] and "0.41" in lines[1] and "250 ms" in lines[1]
    assert lines[1].endswith("failed: drift 0.41 > 0.15")
    assert "256" in lines[2] and lines[2].endswith("passed")
    # columns align: the decode column ends at the same offset on every row
    ends = {line.index(v) + len(v) for line, v in zip(lines[1:], ["33.4", "66.8"], strict=True)}
    assert len(ends) == 1


def test_error_rows_show_the_reason():
    lines = table([full({"nodeid": "t.py::test_c", "kind": "sustained", "ctx": 1000, "verdict": "error",
                         "reason": "endpoint http://x is down"})])
    assert lines[1].endswith("error: endpoint http://x is down")


def test_json_is_atomic_and_redacts(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, [_sustained(reason="key sk-SECRET leaked")], {"endpoint": "http://e"},
                      redact=["sk-SECRET"])
    doc = json.loads(path.read_text())
    assert doc["results"][0]["decode_tps"] == 33.4 and doc["endpoint"] == "http://e"
    assert "sk-SECRET" not in path.read_text()
    assert os.listdir(tmp_path) == ["r.json"]  # no temp file left behind


def _level(n, decode, total, **kw):
    return {"concurrency": n, "decode_tps": decode, "decode_p10_tps": decode * 0.9, "total_tps": total,
            "prompt_tokens": 1000, "completion_tokens": 160, "ttft_s": 0.05, "verdict": "passed", "reason": "",
            "notes": ["drift not judged: 160 tokens are too few"], **kw}


def _cmp(users, metric, change, verdict, effect=None):
    return {"nodeid": "t.py::test_ab", "ctx": None, "users": users, "metric": metric, "verdict": verdict,
            "reason": f"at {users} users: {metric} {change * 100:+.1f}% vs A: {verdict}",
            "comparison": {"change": change, "effect": change if effect is None else effect}}


def _ab_sweep():
    cross = {"gated": True, "floor": 1.0, "users": 8, "speedup": 0.81, "interval": [0.79, 0.83],
             "text": "B slower for users from 8 users: speedup 0.81 [0.79, 0.83]",
             "levels": [{"users": 1, "speedup": 2.5, "interval": [2.4, 2.6], "verdict": "holds", "method": "welch",
                         "a_decode_tps": 48.0, "b_decode_tps": 120.0, "n_a": 3, "n_b": 3},
                        {"users": 8, "speedup": 0.81, "interval": [0.79, 0.83], "verdict": "below", "method": "welch",
                         "a_decode_tps": 30.9, "b_decode_tps": 25.0, "n_a": 3, "n_b": 3}]}
    levels = [_level(1, 120.0, 120.0), _level(8, 25.0, 200.0)]
    ccs = [_cmp(1, "decode_tps", 1.5, "improved"), _cmp(1, "total_tps", 1.5, "improved"),
           _cmp(8, "decode_tps", -0.192, "regressed"), _cmp(8, "total_tps", -0.2, "regressed")]
    return full({"nodeid": "t.py::test_ab", "kind": "load_sweep", "ctx": 1000, "tokens": 160, "concurrency": [1, 8],
            "levels": levels, "knee": 1, "total_tps": 200.0, "decode_tps": 25.0, "verdict": "failed",
            "reason": f"{cross['text']}; {ccs[2]['reason']}", "crossover": cross, "comparisons": ccs, "ab": {},
            "notes": ["knee at 1 user: aggregate 120.0 -> 190.0 tok/s at 8 users, under 10% growth per doubling",
                      "knee at 1 user: aggregate 118.0 -> 201.0 tok/s at 8 users, under 10% growth per doubling"]})


def test_each_level_carries_its_own_comparison_and_a_verdict_that_agrees_with_the_case():
    lines = table([_ab_sweep()])
    header, case, one, eight = lines
    assert "B vs A" in header
    # the case row: the worst comparison, labelled with its level; no chain of every level's verdicts
    assert "worst: total @ 8 users -20.0% regressed" in case and "improved" not in case
    assert "decode +150.0% improved" in one and "total +150.0% improved" in one and one.endswith("passed")
    assert "decode -19.2% regressed" in eight and "total -20.0% regressed" in eight
    assert eight.endswith("failed: speedup 0.81 [0.79, 0.83] under min_speedup 1; decode_tps -19.2% vs A: regressed")
    # the knee once (one per A/B trial in the notes), for the levels shown; the shared level note once
    assert case.count("knee at") == 1 and "knee at 1 user: aggregate 120.0 -> 200.0 tok/s at 8 users" in case
    assert case.count("drift not judged") == 1 and "drift not judged" not in one + eight
    assert " 25.0 (p10 22.5) " in eight and " 1..8 " in case  # per-user median and p10; the levels as users


def test_the_ttft_cell_of_a_load_row_names_its_percentile_as_its_goals_line_does():
    one = _sustained(nodeid="t.py::test_one", verdict="passed", reason="")
    four = _sustained(nodeid="t.py::test_four", concurrency=4, ttft_s=0.03, verdict="passed", reason="",
                      goals=[{"keyword": "max_ttft_s", "bound": 2.0, "figure": "ttft_s", "label": "ttft p50",
                              "unit": "s", "floor": False, "value": 0.03}])
    sweep = full({"nodeid": "t.py::test_w", "kind": "load_sweep", "ctx": 1000, "tokens": 160, "concurrency": [1, 8],
                  "levels": [_level(1, 120.0, 120.0, ttft_s=0.04), _level(8, 25.0, 200.0, ttft_s=0.07)],
                  "verdict": "passed", "decode_tps": 25.0, "total_tps": 200.0})
    lines = table([one, four, sweep], width=120)
    assert max(map(len, lines)) <= 120
    row = {name: next(x for x in lines if name in x and not x.startswith("    "))
           for name in ("test_one", "test_four", "@ 1 user", "@ 8 users")}
    # one stream's TTFT is that request's; under load the row's is the median request's, as the goals line says
    assert " 250 ms " in row["test_one"] and "p50" not in row["test_one"]
    assert " p50 30 ms " in row["test_four"] and "max_ttft_s 2 s: ttft p50 30 ms" in "".join(lines)
    assert " 40 ms " in row["@ 1 user"] and "p50" not in row["@ 1 user"]
    assert " p50 70 ms " in row["@ 8 users"]
    # a sustained case's repeats, and one user's requests one after another (refill): the median too
    assert " p50 250 ms " in table([_sustained(repeat=3)])[1]
    assert " p50 250 ms " in table([_sustained(requests=5)])[1]


def test_open_loop_rows_say_what_they_are_judged_on():
    rate = full({"nodeid": "t.py::test_rate", "kind": "rate", "ctx": 200, "achieved_rps": 3.9, "attainment": 0.95,
                 "goodput_rps": 3.7, "output_tps": 250.0, "verdict": "passed"})
    cap = full({"nodeid": "t.py::test_cap", "kind": "capacity", "ctx": 200, "max_rps": 4.2, "bracket": [4.2, 4.8],
                "verdict": "passed"})
    none = {**cap, "nodeid": "t.py::test_none", "max_rps": 0.0, "bracket": [None, 1.0]}
    header, r, c, n = table([rate, cap, none])
    users_at = header.index("users") + len("users")
    assert r[users_at - 1] == "-" and c[users_at - 1] == "-"  # no req/s under "users"
    assert "attainment 0.95, goodput 3.7 req/s" in r
    assert "capacity >= 4.2 req/s (bracket 4.2..4.8)" in c and "<=" not in c
    assert "no rate met the SLO (capacity < 1 req/s)" in n


def test_failures_and_errors_come_first_with_their_reasons():
    ok = _sustained(nodeid="t.py::test_ok", verdict="passed", reason="")
    err = full({"nodeid": "t.py::test_err", "kind": "sustained", "ctx": 1000, "concurrency": 2, "verdict": "error",
                "reason": "ctx 1000000 + 64 tokens > the 32768 the server serves", "call": 1, "content": "prose"})
    lines = summary([ok, _sustained(), err])
    assert lines[0] == f"ERROR [sustained] test_err (call 1, prose): {err['reason']}"
    assert lines[1] == "FAILED [sustained] test_long: drift 0.41 > 0.15" and lines[2] == ""
    assert lines[3].startswith("case ")
    row = next(line for line in lines if "test_err" in line and not line.startswith("ERROR"))
    assert row.split()[row.split().index("error:") - 2] == "2"  # an errored concurrency case still has 2 users
    assert summary([ok])[0].startswith("case ")  # nothing to diagnose: the table alone


def test_small_words():
    assert count_text(2, "error") == "2 errors" and count_text(1, "error") == "1 error"
    assert count_text(2, "failed") == "2 failed"
    assert signed_pct(-0.00001) == "0.0%" and signed_pct(0.123) == "+12.3%"
    assert n_users(1) == "1 user"


def test_html_summary_diagnosis_first_with_figures_per_kind():
    from pytest_specperf.report import html as html_report

    rate = full({"nodeid": "t.py::test_rate", "kind": "rate", "achieved_rps": 3.9, "attainment": 0.95,
                 "goodput_rps": 3.7, "verdict": "passed"})
    cap = full({"nodeid": "t.py::test_cap", "kind": "capacity", "max_rps": 4.2, "bracket": [4.2, 4.8],
                "verdict": "passed"})
    load = full({"nodeid": "t.py::test_load", "kind": "sustained", "concurrency": 4, "decode_tps": 40.0,
                 "decode_p10_tps": 36.0, "total_tps": 150.0, "min_total_tps": 200, "verdict": "failed",
                 "reason": "aggregate 150.0 tok/s < min_total_tps 200 with 4 users"})
    errs = [full({"nodeid": f"t.py::test_e{i}", "kind": "sustained", "verdict": "error", "reason": "server down"})
            for i in (1, 2)]
    ctx = html_report.context([rate, cap, load, *errs])
    rows = {c["short"].split("::")[-1]: c for c in ctx["summary"]}
    assert [c["verdict"] for c in ctx["summary"]] == ["error", "error", "failed", "passed", "passed"]
    assert ctx["counts_text"] == "2 errors, 1 failed, 2 passed"
    assert rows["test_rate"]["headline"] == "attainment 0.95, goodput 3.7 req/s at 3.9 req/s offered"
    assert rows["test_cap"]["headline"] == "capacity >= 4.2 req/s (bracket 4.2..4.8)"
    assert rows["test_load"]["headline"] == "4 users: aggregate 150.0 (min 200) tok/s; per user 40.0 tok/s (p10 36.0)"
    html = html_report.render([rate, cap, load, *errs])
    summary_table = html.split('<table class="summary">', 1)[1].split("</table>", 1)[0]
    assert "decode tok/s" not in summary_table and "2 errors" in html
    assert summary_table.index("server down") < summary_table.index("aggregate 150.0 tok/s &lt; min_total_tps 200")


def test_ab_header_names_both_endpoints_and_the_server_version():
    from pytest_specperf.report import html as html_report
    from pytest_specperf.storage import saved_runs as storage

    ab = {"a_endpoint": "http://a:8000", "b_endpoint": "http://b:8001", "trials": 5}
    sweep = full({"nodeid": "t.py::test_s", "kind": "load_sweep", "endpoint": "http://b:8001", "server": "vllm",
                  "verdict": "passed", "ab": ab})  # a result without the version first
    r = full({"nodeid": "t.py::test_x", "kind": "sustained", "endpoint": "http://b:8001", "server": "vllm",
              "server_version": "0.11.0", "verdict": "passed", "ab": ab})
    meta = dict(html_report.metadata([sweep, r], storage.run_meta([sweep, r], root=".")))
    assert meta["endpoint"] == "A http://a:8000 (baseline), B http://b:8001 (candidate)"
    assert meta["server"] == "vllm 0.11.0"


def test_slowdown_split_only_for_a_slowdown():
    from pytest_specperf.run.acceptance import slowdown_split
    from pytest_specperf.run.drift import split_log_change

    def att(a0, a1, s0, s1):
        shares = split_log_change(a0, a1, s0, s1)
        return {"accept_early": a0, "accept_late": a1, "step_ms_early": s0, "step_ms_late": s1,
                "accept_share": shares[0], "step_share": shares[1]}

    # steady: 0.1% slower from step-time jitter; the shares (-0%, 100%) would say nothing true
    assert slowdown_split(att(3.0, 3.0, 20.0, 20.02)) == "none to split: late rate +0% vs early"
    assert slowdown_split(att(3.0, 3.3, 20.0, 20.0)) == "none to split: late rate +10% vs early"  # faster
    assert slowdown_split(att(5.0, 2.9, 31.0, 39.0)) == "acceptance 70%, step time 30%"
    assert slowdown_split(None) == "-"


# -- issue 37: every row says who and which level; counts, notes and error rows read right ------------------------


def _cat(n, n_prompts, **kw):
    return {"n": n, "n_prompts": n_prompts, "decode_tps_p50": 50.0, "decode_tps_p10": 45.0, "ttft_p50_s": 0.02,
            "accept_len": 2.5, "prompt_tokens_p50": 100, **kw}


def _cells(line):
    return line.split()


def test_session_and_category_rows_say_their_users_and_a_sweeps_categories_their_level():
    from pytest_specperf.report.table import category_rows, users

    session = full({"nodeid": "t.py::test_s", "kind": "session", "users": 2, "turns": 3, "ctx": 200,
                    "verdict": "passed", "decode_tps": 40.0, "decode_p10_tps": 36.0, "total_tps": 80.0})
    assert users(session) == "2"
    loaded = full({"nodeid": "t.py::test_c", "kind": "sustained", "concurrency": 4, "verdict": "passed",
                   "decode_tps": 50.0, "categories": {"qa": _cat(2, 2), "rag": _cat(1, 1)}})
    assert [users(row) for _, row in category_rows(loaded)] == ["4", "4"]
    sweep = full({"nodeid": "t.py::test_w", "kind": "load_sweep", "concurrency": [1, 2, 8], "verdict": "passed",
                  "levels": [{"concurrency": n, "decode_tps": 50.0} for n in (1, 2, 8)],
                  "categories": {"qa": _cat(3, 3)}, "categories_users": 8})
    ((where, row),) = category_rows(sweep)
    assert where == " [qa] @ 8 users" and users(row) == "8"
    lines = table([session, loaded, sweep])
    header = lines[0].split("  ")
    users_at = [h.strip() for h in header if h.strip()].index("users")
    # the label has a word more, the decode cell ("40.0 (p10 36.0)") two
    assert next(line for line in lines if "[session]" in line).split()[users_at + 3] == "2"
    assert any(line.strip().startswith("[qa] @ 8 users") for line in lines)


def test_counts_read_as_counts():
    from pytest_specperf.report import html as html_report
    from pytest_specperf.report.table import category_count, plural

    assert category_count(_cat(1, 1)) == "n=1 (1 prompt)"
    assert category_count(_cat(3, 1, trials=3)) == "n=3 (1 prompt; 3 trials of n=1)"
    assert plural(2, "session") == "2 sessions" and plural(1, "turn") == "1 turn"
    levels = [{"nodeid": "t.py::w", "users": n, "metric": "decode_tps", "verdict": "improved",
               "comparison": {"metric": "decode_tps", "change": ch}} for n, ch in ((1, 1.96), (2, 1.5), (4, 1.2))]
    text = html_report._cmp_summary(full({"kind": "load_sweep", "comparisons": levels}))
    assert text == "decode_tps improved at every level (+120.0% to +196.0%; 3 levels)"
    one = html_report._cmp_summary(full({"kind": "load_sweep", "comparisons": levels[:1]}))
    assert one == "decode_tps improved at 1 user (+196.0%; 1 level compared)"


def test_a_level_row_on_arms_agrees_with_its_case_and_the_arms_table():
    from pytest_specperf.cases.result_parts import ArmsGateLevel
    from pytest_specperf.report.table import level_rows

    gate_levels = [{"users": 4, "verdict": "below", "ratio": 0.5, "interval": [0.4, 0.6], "best": "fast",
                    "deployed_tps": 550.3, "best_tps": 1100.0}]
    reason = ArmsGateLevel(**gate_levels[0]).loss_text("slow", 0.05)
    r = full({"nodeid": "t.py::test_w", "kind": "load_sweep", "concurrency": [1, 4], "verdict": "failed",
              "reason": reason,
         "levels": [{"concurrency": 1, "decode_tps": 700.0, "verdict": "passed"},
                    {"concurrency": 4, "decode_tps": 542.5, "decode_p10_tps": 530.0, "total_tps": 2170.0,
                     "verdict": "passed"}],
         "arms": {"names": ["slow", "fast"], "deployed": "slow", "baseline": "slow",
                  "levels": [{"users": 1, "arms": {"slow": {"decode_tps": 701.0, "total_tps": 701.0}}},
                             {"users": 4, "arms": {"slow": {"decode_tps": 550.3, "total_tps": 2201.2}}}],
                  "gate": {"deployed": "slow", "max_loss_vs_best": 0.05, "levels": gate_levels}}})
    rows = dict(level_rows(r))
    assert rows[" @ 4 users"].verdict == "failed" and "slow loses more than" in str(rows[" @ 4 users"].reason)
    assert rows[" @ 1 user"].verdict == "passed"
    assert rows[" @ 4 users"].decode_tps == 550.3  # the arms table's figure, not the median's 542.5
    lines = table([r])
    assert "550.3" in lines[1] and "542.5" not in "".join(lines)


def test_a_level_row_takes_the_short_historys_regression_kept_apart_from_a_named_baseline():
    from pytest_specperf.report.table import level_rows

    why = "history, against run 3: at 4 users: decode_tps -20.0% [-25.0%, -15.0%] vs baseline: regressed"
    named = {**_cmp(4, "decode_tps", 0.01, "passed"), "nodeid": "t.py::test_w",
             "reason": "at 4 users: decode_tps +1.0% vs baseline: passed"}
    r = full({"nodeid": "t.py::test_w", "kind": "load_sweep", "concurrency": [1, 4], "verdict": "failed",
              "reason": why, "levels": [_level(1, 120.0, 120.0), _level(4, 80.0, 320.0)],
              "comparisons": [named],
              "history_comparisons": [{**_cmp(4, "decode_tps", -0.2, "regressed"), "nodeid": "t.py::test_w",
                                       "reason": why}]})
    rows = dict(level_rows(r))
    four = rows[" @ 4 users"]
    assert four.verdict == "failed" and four.reason == "history, against run 3: decode_tps -20.0% [-25.0%, -15.0%] " \
        "vs baseline: regressed"
    assert [c.verdict for c in four.comparisons or []] == ["passed"]  # its vs baseline cell: the named baseline's
    assert rows[" @ 1 user"].verdict == "passed"


def test_early_late_beside_drift_says_which_aggregation():
    from pytest_specperf.report.table import notes

    ab = _sustained(verdict="passed", early_tps=714.2, late_tps=668.1, drift=0.01, repeat=3, ab={"a": {}})
    (said,) = [n for n in notes(ab) if "median" in n]
    assert said.startswith("early -> late and drift are each the median over 3 trials")
    assert not [n for n in notes(_sustained()) if "median over" in n]  # 48.1 -> 28.4 is drift 0.41: nothing to say


def test_notes_once_in_the_html():
    from pytest_specperf.report import html as html_report

    knee = "no knee up to 8 users: aggregate grows >= 10% per doubling"
    sweep = full({"nodeid": "t.py::test_w", "kind": "load_sweep", "concurrency": [1, 8], "verdict": "passed",
                  "notes": [knee, knee, knee],
                  "levels": [{"concurrency": 1, "total_tps": 50.0}, {"concurrency": 8, "total_tps": 400.0}]})
    why = "drift not judged: 64 tokens per turn are too few for windows"
    session = full({"nodeid": "t.py::test_s", "kind": "session", "users": 2, "turns": 3, "verdict": "passed",
                    "notes": [why, why, why]})
    import re

    page = html_report.render([sweep, session])
    shown = re.findall(r'<ul class="warnings">(.*?)</ul>', page, re.S)  # the sections' lists, not the embedded data
    assert [x.count("<li>") for x in shown] == [1, 2]  # the session adds its "2 sessions x 3 turns" line
    assert "".join(shown).count("no knee up to 8 users") == 1 and "".join(shown).count(why) == 1


def test_an_errored_session_row_says_what_was_asked():
    from pytest_specperf.report.views.registry import view

    err = full({"nodeid": "t.py::test_s", "kind": "session", "ctx": 500, "users": 2, "turns": 3, "tokens": 64,
                "verdict": "error", "reason": "endpoint down"})
    (line,) = table([err])[1:]
    assert "None" not in line and "session(s)" not in line and "ttft p90" not in line
    assert _cells(line)[2] == "500"  # its ctx as the case asked (a recorded error carries it), not its last turn's
    huge = full({"nodeid": "t.py::test_h", "kind": "sustained", "ctx": 300000, "verdict": "error",
                 "reason": "too long"})
    assert ("ctx", "300000") in view(huge).facts  # never 3e+05


# -- issue 36: the outputs read typed results; an error record and a result's JSON as they were written -------------


def _error_record():
    """A case that could not be measured, as the plugin records it: what was asked, none of a result's figures."""
    return {"nodeid": "t.py::test_down", "kind": "sustained", "ctx": 1000, "content": "prose", "verdict": "error",
            "reason": "endpoint http://127.0.0.1:9 is down", "tokens": 64, "concurrency": 2}


def test_an_error_record_reads_as_it_was_written():
    from pytest_specperf.report import html as html_report
    from pytest_specperf.report.bencher import bencher_json
    from pytest_specperf.report.junit import junit_properties
    from pytest_specperf.report.markdown import markdown_summary
    from pytest_specperf.report.pytest_benchmark import benchmark_extra_info, per_token_seconds

    err = _error_record()
    row = _cells(table([_sustained(), err])[2])
    # ctx and tokens as asked, users 2; no figure it never measured (a record's 0.0 defaults would read as measured)
    assert row[2:8] == ["1000", "64", "-", "-", "-", "-"] and row[row.index("error:") - 2] == "2"
    assert "| 1000 | 64 | - | - | - | - | 2 | - | error: endpoint" in markdown_summary([_sustained(), err])
    assert dict(junit_properties(err)) == {"specperf_verdict": "error", "specperf_concurrency": "2"}
    assert bencher_json([err]) == {} and per_token_seconds(err) == []
    assert benchmark_extra_info(err) == {"kind": "sustained", "content": "prose", "ctx": 1000, "tokens": 64,
                                         "verdict": "error", "reason": err["reason"], "nodeid": err["nodeid"]}
    (case,) = html_report.context([err])["cases"]
    assert case["decode"] == "-" and case["headline"] == "2 users: aggregate - tok/s; per user - tok/s (p10 -)"


def test_json_writes_a_record_as_its_json_and_given_json_as_it_is(tmp_path):
    from pytest_specperf.cases.json_form import to_dict
    from pytest_specperf.cases.saved_results import load_result

    typed = load_result(_sustained())
    given = {**_sustained(nodeid="t.py::test_old"), "field_of_a_later_version": 1}  # a saved run's, as read
    path = tmp_path / "r.json"
    write_json_atomic(path, [typed, given, _error_record()], {})
    written = json.loads(path.read_text())["results"]
    assert written == [to_dict(typed), given, _error_record()]
    assert list(written[1]) == list(given)  # its keys in their order: the file reads as the run it came from


def test_a_baseline_with_a_case_it_could_not_measure_still_draws_the_html(tmp_path: Path) -> None:
    """A baseline run keeps its errored cases as error records (no figures); drawing the comparison charts of the
    cases it did measure must not try to read those as results (seen: `specperf report RUN --baseline BASE` and
    --specperf-html both lost, benchmarks/report_cost.py crashed)."""
    results = json.loads((Path(__file__).parent / "saved_runs" / "against_baseline.json").read_text())["results"]
    errored = {"nodeid": "t.py::test_gone", "kind": "two_point", "ctx": 2000, "content": "prose", "verdict": "error",
               "reason": "two-point inconclusive: raise long=", "short": 8, "long": 264}
    out = tmp_path / "r.html"
    OUTPUTS["html"]().write(results, Meta(about={}, baseline=[*results, errored]), out)
    assert "<svg" in out.read_text()  # the comparison charts of the measured cases are drawn
