"""User mistakes and faults as a user meets them: real pytest runs against real simulators, no traceback.

Each test runs pytest (or specperf-sim) in a subprocess and checks the exit code and the one-line message.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.table_lines import block, section

from pytest_specperf.sim import SimServer

FAST = "--specperf-sim-speed=20"
DOWN = "http://127.0.0.1:9"


def _no_traceback(res: pytest.RunResult) -> None:
    text = res.stdout.str() + res.stderr.str()
    assert "Traceback" not in text and "raise " not in text, text[-3000:]


def _results(path: Path) -> list[dict]:
    return json.loads(path.read_text())["results"]


# -- 1. direct calls -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "message"), [
    ("specperf.sustained(tokens=-3)", "specperf.sustained(): tokens must be an integer >= 16, got -3"),
    ("specperf.two_point(min_tsp=5)", "specperf.two_point(): unknown keyword 'min_tsp'; did you mean 'min_tps'?"),
    ("specperf.result", "specperf.result needs a perf marker on the test"),
])
def test_direct_call_mistake_is_one_line(pytester: pytest.Pytester, body: str, message: str) -> None:
    pytester.makepyfile(f"""
        def test_x(specperf):
            {body}
    """)
    res = pytester.runpytest_subprocess(f"--endpoint={DOWN}")  # nothing is measured: the mistake comes first
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines([f"*{message}*"])
    _no_traceback(res)


def test_direct_call_that_cannot_measure_is_an_error_with_a_row(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_ad_hoc(specperf):
            specperf.two_point(ctx=64, long=1032)
    """)
    out, md = pytester.path / "r.json", pytester.path / "s.md"
    res = pytester.runpytest_subprocess(f"--endpoint={DOWN}", "--specperf-timeout=5", f"--specperf-json={out}",
                                        f"--specperf-markdown={md}", "--junitxml=junit.xml")
    res.assert_outcomes(errors=1)
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(["*ERROR at call of test_ad_hoc*",
                              "could not measure: endpoint http://127.0.0.1:9 is down*"])
    _no_traceback(res)
    (row,) = _results(out)
    assert row["verdict"] == "error" and row["kind"] == "two_point" and row["ctx"] == 64
    assert "error: endpoint" in block(section(res.outlines), "[two_point] test_ad_hoc (call 1, prose)")
    assert "| error: endpoint http://127.0.0.1:9 is down" in md.read_text()
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "junit.xml").iter("property")}
    assert props["specperf_verdict"] == "error"


# -- 2. a cut connection on non-streamed requests ------------------------------------------------------------------


def test_cut_connection_on_two_point_and_sweep_is_a_named_error(pytester: pytest.Pytester) -> None:
    # Every request's connection drops after 100 tokens: the 8-token requests pass, the long ones are cut.
    (pytester.path / "cut.yaml").write_text("faults: 'disconnect@100'\n")
    pytester.makepyfile("""
        import pytest

        @pytest.mark.two_point(ctx=64, long=1032)
        def test_tp(specperf): pass

        @pytest.mark.ctx_sweep(ctxs=[64, 128], tokens=200)
        def test_sweep(specperf): pass
    """)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(FAST, "--specperf-sim=cut.yaml", f"--specperf-json={out}")
    res.assert_outcomes(errors=2)
    res.stdout.fnmatch_lines(["*could not measure: server closed the connection after * s without a complete "
                              "answer to POST /v1/completions*"])
    _no_traceback(res)
    rows = _results(out)
    assert sorted(r["kind"] for r in rows) == ["ctx_sweep", "two_point"]
    assert all(r["verdict"] == "error" and "server closed the connection" in r["reason"] for r in rows)
    # each records the ctx it asked for: the sweep its longest, not the default ctx it never used
    assert {r["kind"]: r["ctx"] for r in rows} == {"two_point": 64, "ctx_sweep": 128}


# -- 3. output paths -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "named"), [
    (["--specperf-json=/proc/x.json"], "--specperf-json=/proc/x.json"),
    (["--specperf-markdown=/proc/x.md"], "--specperf-markdown=/proc/x.md"),
    (["--specperf-bencher=/proc/x.json"], "--specperf-bencher=/proc/x.json"),
    (["--specperf-save", "--specperf-storage=/proc/runs"], "--specperf-storage=/proc/runs"),
    (["--specperf-markdown=ok.md", "env:GITHUB_STEP_SUMMARY=/proc/summary.md"], "$GITHUB_STEP_SUMMARY=/proc/"),
])
def test_unwritable_output_is_a_usage_error_at_start(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                     options: list[str], named: str) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("needs /proc, a folder nothing can be written in")
    args = []
    for option in options:
        if option.startswith("env:"):
            monkeypatch.setenv(*option[4:].split("=", 1))
        else:
            args.append(option)
    pytester.makepyfile("""
        import pytest
        @pytest.mark.two_point(ctx=64, long=1032)
        def test_x(specperf): pass
    """)
    res = pytester.runpytest_subprocess(FAST, *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert named in res.stderr.str() and "nothing can be written in /proc" in res.stderr.str()
    assert "test_x" not in res.stdout.str()  # nothing ran
    _no_traceback(res)


def test_write_failing_mid_run_is_a_warning_and_the_run_completes(pytester: pytest.Pytester) -> None:
    outdir = pytester.path / "out"
    outdir.mkdir()
    pytester.makepyfile(f"""
        import shutil
        import pytest

        @pytest.mark.two_point(ctx=64, long=1032)
        def test_first(specperf):
            # the output folder becomes a file while the run goes on (a folder that only disappears is made again)
            shutil.rmtree({str(outdir)!r})
            open({str(outdir)!r}, "w").close()

        @pytest.mark.two_point(ctx=64, long=1032)
        def test_second(specperf): pass
    """)
    res = pytester.runpytest_subprocess(FAST, f"--specperf-json={outdir / 'r.json'}",
                                        f"--specperf-markdown={outdir / 's.md'}")
    assert res.ret == pytest.ExitCode.OK
    res.assert_outcomes(passed=2, warnings=2)
    res.stdout.fnmatch_lines(["*SpecperfWarning: --specperf-json: could not write */out/r.json*",
                              "*SpecperfWarning: --specperf-markdown: could not write */out/s.md*"])
    assert sum(1 for line in res.outlines if line.startswith("[two_point] test_")) == 2  # the table is complete
    assert "results written to" not in res.stdout.str()
    _no_traceback(res)


# -- 4. options parsed when used -----------------------------------------------------------------------------------


def test_engine_args_are_parsed_only_for_an_engine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): pass")
    bad = "--specperf-engine-args=--threads '2"
    pytester.runpytest_subprocess(bad).assert_outcomes(passed=1)  # no engine asked for: not read
    res = pytester.runpytest_subprocess(bad, "--specperf-engine=llamacpp")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--specperf-engine-args=\"--threads '2\" is not valid shell quoting (No closing quotation)" in \
        res.stderr.str()
    _no_traceback(res)


def test_sim_port_out_of_range_is_an_argparse_error() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_specperf.sim", "--port", "99999"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "specperf-sim: error: argument --port: 99999 is out of range" in done.stderr
    assert "Traceback" not in done.stderr


def test_api_key_env_naming_an_unset_variable_is_a_usage_error(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECPERF_TEST_NO_SUCH_KEY", raising=False)
    pytester.makepyfile("def test_plain(): pass")
    res = pytester.runpytest_subprocess("--api-key-env=SPECPERF_TEST_NO_SUCH_KEY")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--api-key-env=SPECPERF_TEST_NO_SUCH_KEY: the variable SPECPERF_TEST_NO_SUCH_KEY is not set" in \
        res.stderr.str()
    monkeypatch.setenv("SPECPERF_TEST_NO_SUCH_KEY", "sk-x")
    pytester.runpytest_subprocess("--api-key-env=SPECPERF_TEST_NO_SUCH_KEY").assert_outcomes(passed=1)


# -- 5. the advertised context -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dialect", "source"), [("vllm", "max_model_len in /v1/models"),
                                                 ("llamacpp", "n_ctx in /props")])
def test_ctx_beyond_the_advertised_context_fails_before_any_request(pytester: pytest.Pytester, speed: float,
                                                                    dialect: str, source: str) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.sustained(ctx=10_000_000, tokens=64)
        def test_huge(specperf): pass
    """)
    with SimServer("healthy", speed=speed, overrides={"dialect": dialect, "max_model_len": 4096}) as sim:
        url = sim.url
        res = pytester.runpytest_subprocess(f"--endpoint={url}")
        generated = sim.requests()
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([f"*could not measure: ctx 10000000 + 64 generated tokens need 10000064 tokens of "
                              f"context, but {url} serves specperf-sim with 4096 ({source}); lower ctx*"])
    assert generated == []  # failed before the warm-up, before any prompt was built


def test_a_session_too_long_for_the_context_is_an_error_row_that_reads_right(pytester: pytest.Pytester,
                                                                             speed: float) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.session(users=2, turns=3, tokens=64, ctx=500)
        def test_chat(specperf): pass
    """)
    with SimServer("healthy", speed=speed, overrides={"max_model_len": 700}) as sim:
        res = pytester.runpytest_subprocess(f"--endpoint={sim.url}", "--specperf-json=r.json")
    res.assert_outcomes(errors=1)
    # the last turn holds ctx 500 + 2 x (32 user + 64 answer) tokens: the reason says so, not "ctx 692"
    res.stdout.fnmatch_lines(["*could not measure: a 3-turn conversation's last prompt of 692 tokens "
                              "(ctx 500 and the 2 turns and answers before it) + 64 generated tokens need 756 tokens "
                              "of context*"])
    (r,) = json.loads((pytester.path / "r.json").read_text())["results"]
    assert (r["ctx"], r["users"], r["turns"]) == (500, 2, 3)  # the case as asked
    (row,) = [line for line in res.outlines if line.startswith("[session] test_chat")]
    assert "None" not in row and "ttft p90" not in row and row.split()[2] == "500"
    _no_traceback(res)


# -- 6. YAML and ini edge cases ------------------------------------------------------------------------------------


def test_empty_yaml_file_is_named_in_a_warning(pytester: pytest.Pytester) -> None:
    (pytester.path / "empty.specperf.yaml").write_text("# cases to come\n")
    pytester.makepyfile("def test_plain(): pass")
    res = pytester.runpytest_subprocess()
    res.assert_outcomes(passed=1, warnings=1)
    res.stdout.fnmatch_lines(["*SpecperfWarning: empty.specperf.yaml holds no perf cases*"])


def test_yaml_marks_select_without_unknown_mark_warning(pytester: pytest.Pytester) -> None:
    (pytester.path / "c.specperf.yaml").write_text("a:\n  two_point: {ctx: 64}\n  marks: [smoke]\n"
                                                   "b:\n  two_point: {ctx: 64}\n")
    res = pytester.runpytest_subprocess("-m", "smoke", "--collect-only", "-q")
    assert [line for line in res.outlines if "::" in line] == ["c.specperf.yaml::a"]
    assert "PytestUnknownMarkWarning" not in res.stdout.str()
    strict = pytester.runpytest_subprocess("--strict-markers", "--collect-only", "-q")
    assert strict.ret == pytest.ExitCode.INTERRUPTED  # strict markers stay strict: register it in the ini
    strict.stdout.fnmatch_lines(["*'smoke' not found in `markers` configuration option*"])


@pytest.mark.parametrize(("value", "saved"), [("true", True), ("yes", True), ("false", False)])
def test_ini_save_words(pytester: pytest.Pytester, value: str, saved: bool) -> None:
    pytester.makeini(f"[pytest]\nspecperf_save = {value}\n")
    pytester.makepyfile("""
        import pytest
        @pytest.mark.two_point(ctx=64, long=1032)
        def test_x(specperf): pass
    """)
    pytester.runpytest_subprocess(FAST).assert_outcomes(passed=1)
    runs = sorted(p.name for p in (pytester.path / ".specperf" / "runs").glob("*.json"))
    assert len(runs) == (1 if saved else 0)
    assert not any(value in name for name in runs)  # an automatic name, never a run called "true"


def test_save_name_with_a_slash_round_trips_to_compare(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.two_point(ctx=64, long=1032)
        def test_x(specperf): pass
    """)
    saved = pytester.runpytest_subprocess(FAST, "--specperf-save=feature/fast-path")
    saved.stdout.fnmatch_lines(["run saved as *0001_feature-fast-path.json"])
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(FAST, "--specperf-compare=feature/fast-path", f"--specperf-json={out}")
    # Found the saved run: every figure compared, none "new". The verdict itself is the machine's: two embedded
    # simulators a few seconds apart on a busy host can really differ, and that is not what this test is about.
    (row,) = _results(out)
    assert row["comparisons"] and all(c["verdict"] != "new" for c in row["comparisons"])
    assert res.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and "errors" not in res.parseoutcomes()
    bad = pytester.runpytest_subprocess(FAST, "--specperf-save=//")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--specperf-save='//' has no letter or digit to name a run by" in bad.stderr.str()


def test_ab_with_one_url_twice_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): pass")
    res = pytester.runpytest_subprocess("--specperf-ab=http://h:8000,http://h:8000/v1")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--specperf-ab names http://h:8000 twice; A and B must be two different servers" in res.stderr.str()


def test_down_ab_endpoint_names_the_ab_option(pytester: pytest.Pytester, healthy_sim: SimServer) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.two_point(ctx=64, long=1032)
        def test_x(specperf): pass
    """)
    res = pytester.runpytest_subprocess(f"--specperf-ab={DOWN},{healthy_sim.url}", "--specperf-ab-trials=2")
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([f"*endpoint {DOWN} is down (*): start the server or fix --specperf-ab*"])
    assert "--endpoint" not in res.stdout.str()


def test_every_written_file_gets_the_same_ordinary_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.sustained(tokens=300, ctx=64)
        def test_x(specperf): pass
    """)
    out = pytester.path / "out"
    out.mkdir()
    umask = os.umask(0o027)  # not the usual 022, so a writer with a fixed mode shows
    try:
        res = pytester.runpytest_subprocess(FAST, f"--specperf-json={out / 'r.json'}",
                                            f"--specperf-markdown={out / 's.md'}",
                                            f"--specperf-bencher={out / 'b.json'}", f"--specperf-html={out / 'r.html'}",
                                            f"--specperf-plots={out / 'plots'}", "--specperf-save=m")
        (out / "plain.txt").write_text("x")  # what any program's new file gets under this umask
    finally:
        os.umask(umask)
    res.assert_outcomes(passed=1)
    written = [out / "r.json", out / "s.md", out / "b.json", out / "r.html", *(out / "plots").iterdir(),
               *(pytester.path / ".specperf" / "runs").glob("*.json")]
    assert len(written) == 6
    expected = stat.S_IMODE(os.stat(out / "plain.txt").st_mode)
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in written} == {p.name: expected for p in written}
