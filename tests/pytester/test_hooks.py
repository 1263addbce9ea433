"""Hooks a team's conftest.py implements: run metadata into every output, verdicts vetoed or annotated."""

from __future__ import annotations

import json

import pytest

CONFTEST = '''
def pytest_specperf_run_metadata(config):
    return {"gpu": "8x test-gpu", "deploy_id": "d-42"}


def pytest_specperf_verdict(config, result):
    if result["nodeid"].endswith("test_waived"):
        return {"verdict": "passed", "reason": "waived until ticket 123"}
    if result["nodeid"].endswith("test_noted"):
        return {"note": "speculation: ngram k=4"}
'''
CASES = '''
import pytest

@pytest.mark.two_point(ctx=100, min_tps=1e5, long=1032)
def test_waived(specperf):
    pass

@pytest.mark.two_point(ctx=100, min_tps=1e5, long=1032)
def test_failing(specperf):
    pass

@pytest.mark.two_point(ctx=100, long=1032)
def test_noted(specperf):
    pass
'''


def test_hooks_add_metadata_and_judge(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=CASES)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess("--specperf-sim-speed=20", f"--specperf-json={out}", "--specperf-save=x",
                                        "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2, failed=1)
    doc = json.loads(out.read_text())
    assert doc["run"] == {"gpu": "8x test-gpu", "deploy_id": "d-42"}
    saved = json.loads(next((pytester.path / ".specperf" / "runs").glob("*.json")).read_text())
    assert saved["meta"]["run"] == {"gpu": "8x test-gpu", "deploy_id": "d-42"}
    by = {r["nodeid"].split("::")[-1]: r for r in doc["results"]}
    waived = by["test_waived"]
    assert waived["verdict"] == "passed"
    assert waived["reason"].startswith("passed by pytest_specperf_verdict (waived until ticket 123); the plugin "
                                       "said failed: two-point decode")
    assert by["test_failing"]["verdict"] == "failed"
    assert by["test_noted"]["notes"] == ["speculation: ngram k=4"]
    assert any("test_noted" in line and "speculation: ngram k=4" in line for line in res.outlines)


def test_hookspecs_are_registered(pytester: pytest.Pytester) -> None:
    # a misspelt hook argument is an error pytest reports, because the specs are registered
    pytester.makeconftest("def pytest_specperf_verdict(config, results):\n    return None\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret != 0
    assert "pytest_specperf_verdict" in res.stdout.str() + res.stderr.str()
