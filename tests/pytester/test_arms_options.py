"""Bad arms options and keywords: a one-line usage error that names the fix, before anything is measured."""

from __future__ import annotations

import pytest

CASE = """
import pytest

@pytest.mark.load_sweep(concurrency=[1], tokens=32, deployed="k9", max_loss_vs_best=0.05)
def test_sweep(specperf):
    pass
"""
A, B = "http://127.0.0.1:9", "http://127.0.0.1:10"  # never reached: each run stops at its usage error


@pytest.mark.parametrize(("args", "message"), [
    ([f"--specperf-arms=a={A}"], "needs two or more arms"),
    ([f"--specperf-arms=a={A},a={B}"], "names the arm 'a' twice"),
    ([f"--specperf-arms=a={A},b={A}"], "for two arms; every arm must be its own server"),
    ([f"--specperf-arms=a={A},b"], "'b' is not NAME=VALUE"),
    ([f"--specperf-arms=off={A},k2=notaurl"], "arm 'k2': 'notaurl' is not an http(s) URL; give e.g. "
                                               "--specperf-arms=off=http://a:8000,k2=http://b:8000"),
    ([f"--specperf-arms=a={A},b={B}", "--specperf-arms-baseline=c"], "--specperf-arms-baseline='c' is not an arm"),
    ([f"--specperf-arms=a={A},b={B}", "--specperf-arms-tokens=a=2,c=4"], "names 'c', which is not an arm"),
    ([f"--specperf-arms=a={A},b={B}", "--specperf-arms-tokens=a=two"], "each K must be a whole number"),
    ([f"--specperf-arms=a={A},b={B}", f"--endpoint={A}"], "drop --endpoint"),
    (["--specperf-arms-baseline=a"], "needs --specperf-arms=NAME=URL"),
    (["--specperf-engine-arms=none,2"], "from --specperf-engine=llamacpp|vllm"),
    (["--specperf-engine=llamacpp", "--specperf-engine-arms=none,none"], "two or more different arms"),
])
def test_a_bad_arms_option_is_a_one_line_usage_error(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    res = pytester.runpytest(*args, "-p", "no:cacheprovider")  # in process: a usage error starts nothing
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in res.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], res.stderr.str()


def test_a_deployed_arm_that_is_not_an_arm_fails_its_case_before_anything_is_measured(
        pytester: pytest.Pytester) -> None:
    # The arms' URLs are never reached (nothing listens there): the case fails at collection, unmeasured.
    pytester.makepyfile(test_arms=CASE)
    pytester.makefile(".specperf.yaml",
                      arms="yaml_sweep:\n  load_sweep: {concurrency: [1], tokens: 32, deployed: k4}\n")
    res = pytester.runpytest_subprocess(f"--specperf-arms=a={A},b={B}", "-p", "no:cacheprovider")
    res.assert_outcomes(failed=2)
    text = res.stdout.str()
    assert "deployed='k9' is not an arm of --specperf-arms; name one of a, b" in text
    assert "case 'yaml_sweep': deployed='k4' is not an arm of --specperf-arms; name one of a, b" in text
    assert "could not measure" not in text and "is down" not in text


@pytest.mark.parametrize("bad", ["max_loss_vs_best=1.5", "max_loss_vs_best=0", "deployed=''"])
def test_bad_arms_keywords_fail_their_cases(pytester: pytest.Pytester, bad: str) -> None:
    pytester.makepyfile(test_arms=f"""
import pytest

@pytest.mark.load_sweep(concurrency=[1], tokens=32, {bad})
def test_sweep(specperf):
    pass
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret != 0
    assert "load_sweep(): " + ("max_loss_vs_best must be a fraction" if "loss" in bad else "deployed must be") \
        in res.stdout.str()


def test_the_ini_twin_is_read_and_checked_alike(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\nspecperf_arms = solo={A}\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--specperf-arms='solo=" in res.stderr.str() and "needs two or more arms" in res.stderr.str()
