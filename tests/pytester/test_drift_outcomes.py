"""The drift gate never skips silently: passed, failed, inconclusive or 'not judged', said everywhere."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from support.table_lines import block, section

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.cases.results import SustainedResult
from pytest_specperf.run import drift as stats
from pytest_specperf.run.floors import JudgeSettings, judge_sustained
from pytest_specperf.sim import load_profile

CASES = '''
import pytest

@pytest.mark.sustained(tokens=300, ctx=200)
def test_stalled_late(specperf):
    pass

@pytest.mark.sustained(tokens=200, ctx=100)
def test_short(specperf):
    pass
'''


@pytest.fixture
def stalled_profile(tmp_path: Path) -> Path:
    """The shipped healthy profile with late delays and two early ones: a large drift the trend test cannot
    back up (the early delays break the monotone trend), so the gate is inconclusive. Each delay is under the
    stall limit (8 step gaps, 20 ms at speed 8), so it is the stream's pace: a stall would be left out of it."""
    raw = load_profile("healthy").to_dict()
    late = ", ".join(f"stall=0.12@{n}" for n in range(196, 290, 12))
    raw.update({"jitter": 0.0, "faults": f"stall=0.15@4, stall=0.15@20, {late}"})
    path = tmp_path / "stalled.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _run(pytester: pytest.Pytester, profile: Path, *args: str) -> tuple[pytest.RunResult, dict, ET.Element, str]:
    pytester.makepyfile(test_cases=CASES)
    out, junit, md = (pytester.path / n for n in ("r.json", "junit.xml", "summary.md"))
    res = pytester.runpytest_subprocess(f"--specperf-sim={profile}", "--specperf-sim-speed=8", f"--specperf-json={out}",
                                        f"--junitxml={junit}", f"--specperf-markdown={md}", "-p", "no:cacheprovider",
                                        *args)
    return res, json.loads(out.read_text()), ET.parse(junit).getroot(), md.read_text()


def _props(root: ET.Element, name: str) -> dict[str, str]:
    case = next(c for c in root.iter("testcase") if c.get("name") == name)
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_inconclusive_drift_warns_everywhere_by_default(pytester: pytest.Pytester, stalled_profile: Path) -> None:
    res, doc, junit, md = _run(pytester, stalled_profile)
    res.assert_outcomes(passed=2)
    by = {r["nodeid"].split("::")[-1]: r for r in doc["results"]}
    late = by["test_stalled_late"]
    assert late["drift_verdict"] == "inconclusive" and late["drift"] > 0.15
    assert late["warnings"] and "inconclusive" in late["warnings"][0]
    res.stdout.fnmatch_lines(["*SpecperfWarning: drift 0.* > 0.15 but not significant*inconclusive*"])
    row = block(section(res.outlines), "test_stalled_late")
    assert "passed; warning: drift" in row or " passed | warning: drift" in row
    assert _props(junit, "test_stalled_late")["specperf_drift_verdict"] == "inconclusive"
    assert "warning: drift" in md
    # the short case: drift is not judged, and every output says so
    short = by["test_short"]
    assert short["drift_verdict"] == "not judged" and short["drift"] is None
    assert any("drift not judged: 200 tokens are too few" in n for n in short["notes"])
    assert "drift not judged" in block(section(res.outlines), "test_short")
    assert "drift not judged" in _props(junit, "test_short")["specperf_notes"]


def test_inconclusive_drift_fails_when_the_policy_says_so(pytester: pytest.Pytester, stalled_profile: Path) -> None:
    res, doc, _, _ = _run(pytester, stalled_profile, "--specperf-inconclusive=fail", "-k", "stalled")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*drift 0.* > 0.15 but not significant*inconclusive*: early * -> late * tok/s*"])
    assert doc["results"][0]["verdict"] == "failed"


def test_explicit_max_drift_on_a_short_case_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.sustained(tokens=200, max_drift=0.1)
        def test_short(specperf):
            pass
    """)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)  # the case fails alone at collection, unmeasured
    res.stdout.fnmatch_lines(["*max_drift needs tokens >= 264*got tokens=200; raise tokens or drop max_drift*"])


def _ramp(rng: np.random.Generator, slow: float) -> stats.Drift:
    """A 600-token stream with 30 % per-step jitter and random acceptance; ``slow`` = late rate drop (ramp)."""
    per = 1 + rng.binomial(4, rng.uniform(0.3, 0.7), size=600)
    n = int(np.searchsorted(np.cumsum(per), 600)) + 1
    per = per[:n]
    per[-1] -= int(per.sum()) - 600
    start = np.concatenate([[0], np.cumsum(per)[:-1]]) / 600
    steps = 0.02 * rng.lognormal(0.0, 0.3, n) * (1 + (1 / (1 - slow) - 1) * start)
    t = 0.1 + np.concatenate([[0.0], np.cumsum(steps)])
    return stats.drift(stats.window_rates(t, np.concatenate([[1], per])))


def test_a_noisy_ramp_is_never_passed_with_a_drift_above_the_limit() -> None:
    rng = np.random.default_rng(7)
    ramps = [stats.drift_gate([_ramp(rng, 0.27)], max_drift=0.15) for _ in range(100)]
    flat = [stats.drift_gate([_ramp(rng, 0.0)], max_drift=0.15) for _ in range(100)]
    # Every ramp measured above the limit ends as a failed case or one carrying a warning, never a bare pass:
    # judged by the same verdict code a measured case goes through, under the default policy.
    above = [g for g in ramps if g.drift > 0.15]
    assert len(above) >= 50
    for g in above:
        r = SustainedResult(kind="sustained", endpoint="", model="", server="", ctx=200, prompt_tokens=200,
                            completion_tokens=600, drift=g.drift, drift_gate=g.reason, drift_failed=g.failed,
                            drift_verdict=g.outcome, early_tps=100.0, late_tps=100.0 * (1 - g.drift))
        judge_sustained(r, SustainedSpec(tokens=600), JudgeSettings(max_drift=0.15, inconclusive="warn"))
        assert r.verdict == "failed" or any("inconclusive; more tokens or repeat=5" in w for w in r.warnings), g
    # ... and nothing stationary fails.
    assert sum(g.outcome == "failed" for g in flat) == 0
