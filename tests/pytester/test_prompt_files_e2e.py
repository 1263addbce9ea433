"""Cases over a prompt file as a user runs them: marker, YAML, direct call, the ini default, per-category
floors, a bad file at collection, and the categories in the JSON, the table, Markdown and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pytest_specperf.sim import SimServer

PROMPTS = "\n".join([
    '{"question_id": 1, "category": "qa", "turns": ["Question: why is the sky blue?", "And at dusk?"]}',
    '{"question_id": 2, "category": "qa", "turns": ["Question: what makes bread rise?"]}',
    '{"question_id": 3, "category": "tool_call", "turns": ["Return JSON with the fields name and age for Ada."]}',
    '{"question_id": 4, "category": "tool_call", "turns": ["Give the JSON object for a meeting at 10:00."]}',
]) + "\n"

CASES = """
import numpy as np
import pytest

from pytest_specperf.sim import SimServer

@pytest.mark.sustained(prompts="data/p.jsonl", tokens=48, min_accept_len={"qa": 4})
def test_marker(specperf):
    assert specperf.result.repeat == 4

def test_direct(specperf):
    r = specperf.rate(prompts="data/p.jsonl", tokens=24, rps=50, requests=8, slo={"ttft_s": 5})
    assert set(r.categories) == {"qa", "tool_call"}

@pytest.mark.sustained(tokens=48, concurrency=2)
def test_default(specperf):
    assert specperf.result.prompts.endswith("p.jsonl")
"""

YAML = """
sweep:
  load_sweep: {prompts: data/p.jsonl, concurrency: [1, 4], tokens: 32, sample: 2, categories: [tool_call, qa]}
"""


def test_prompt_file_cases_report_per_category(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=CASES)
    pytester.makefile(".specperf.yaml", cases=YAML)
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "p.jsonl").write_text(PROMPTS)
    out, md, xml = pytester.path / "r.json", pytester.path / "r.md", pytester.path / "j.xml"
    page = pytester.path / "r.html"
    res = pytester.runpytest_subprocess("--specperf-sim=categories", "--specperf-sim-speed=20",
                                        f"--specperf-html={page}", "--specperf-prompts=data/p.jsonl",
                                        f"--specperf-json={out}",
                                        f"--specperf-markdown={md}", f"--junitxml={xml}", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=3, failed=1)
    by = {r["nodeid"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}
    marker = by["test_marker"]
    # qa accepts 2.8 tokens a step in this profile, tool_call 5.6: only qa misses its floor, and says so
    assert marker["verdict"] == "failed" and marker["reason"].startswith("qa: acceptance 2.")
    assert "tool_call" not in marker["reason"]
    cats = marker["categories"]
    assert {c: f["n"] for c, f in cats.items()} == {"qa": 2, "tool_call": 2}
    assert cats["tool_call"]["accept_len"] > 4 > cats["qa"]["accept_len"] and cats["qa"]["min_accept_len"] == 4
    assert {s["category"] for s in marker["streams"]} == {"qa", "tool_call"}
    assert all(s["prompt_tokens"] for s in marker["streams"])
    assert by["sweep"]["verdict"] == "passed" and set(by["sweep"]["categories"]) <= {"qa", "tool_call"}
    assert sum(f["n"] for f in by["sweep"]["categories"].values()) == 4  # the highest level's 4 users
    assert by["test_default"]["categories"] and by["test_direct"]["verdict"] == "passed"
    text = res.stdout.str()
    assert "  [qa]" in text and "  [tool_call]" in text
    assert "`test_cases.py::test_marker` [qa]" in md.read_text()
    html = page.read_text()
    assert "categories-accept_len" in html and "categories-decode_tps_p50" in html  # the category x metric charts
    case = next(c for c in ET.parse(xml).iter("testcase") if c.get("name") == "test_marker")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["specperf_cat_qa_n"] == "2" and float(props["specperf_cat_tool_call_accept_len"]) > 4


def test_a_bad_prompt_file_fails_each_case_naming_file_and_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="""
import numpy as np
import pytest

from pytest_specperf.sim import SimServer

@pytest.mark.rate(prompts="bad.jsonl", rps=5, requests=4)
def test_bad(specperf):
    pass

@pytest.mark.two_point(prompts="bad.jsonl")
def test_two_point(specperf):
    pass
""")
    (pytester.path / "bad.jsonl").write_text('{"prompt": "fine"}\n{"prompt": "cut\n')
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(failed=2)  # each bad case fails with its own reason, not only the first; none is measured
    text = res.stdout.str()
    assert "bad.jsonl' line 2: not valid JSON" in text
    assert "two_point(): prompts= does not apply to two_point" in text


def test_a_plain_text_file_runs_and_a_whole_large_file_warns_before_running(pytester: pytest.Pytester) -> None:
    (pytester.path / "mine.prompts").write_text("Name a planet.\nWrite a haiku about rain.\nCount to five.\n")
    (pytester.path / "big.txt").write_text("".join(f"Say something about {i}.\n" for i in range(300)))
    pytester.makepyfile(test_files="""
import pytest

@pytest.mark.sustained(prompts="mine.prompts", prompts_format="plain", tokens=16)
def test_plain(specperf):
    cat = specperf.result.categories["uncategorized"]
    assert (cat["n"], cat["n_prompts"]) == (3, 3)  # one trial per line of the file

@pytest.mark.sustained(prompts="big.txt", tokens=16)
def test_whole(specperf):
    pass

@pytest.mark.sustained(prompts="big.txt", tokens=16, sample=2)
def test_sampled(specperf):
    pass
""")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--specperf-sim-speed=20", "-k", "test_plain")
    res.assert_outcomes(passed=1, deselected=2)
    collected = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    text = collected.stdout.str()
    assert text.count("SpecperfWarning") == 1  # test_whole only: the sampled case and the small file say nothing
    assert "big.txt has 300 prompts and no sample=, so this case runs 300 trials, one per prompt" in text


AB_CASE = """
import numpy as np
import pytest

from pytest_specperf.sim import SimServer

@pytest.mark.sustained(prompts="builtin:specbench-mini", categories=["qa", "tool_call"], sample=4, tokens=256)
def test_ab(specperf):
    pass
"""


def test_ab_gives_the_speedup_per_category_with_its_interval(pytester: pytest.Pytester) -> None:
    """Speculation off (A) vs on (B) on the categories profile: each category's speedup is the truth's ratio of
    decode rates, and a category that accepts more gets more of it."""
    pytester.makepyfile(test_ab=AB_CASE)
    out = pytester.path / "r.json"
    with SimServer("categories", speed=4, overrides={"speculation": False, "jitter": 0.0}) as a, \
            SimServer("categories", speed=4, overrides={"jitter": 0.0}) as b:
        res = pytester.runpytest_subprocess(f"--specperf-ab={a.url},{b.url}", "--specperf-ab-trials=3",
                                            f"--specperf-json={out}", f"--specperf-html={out.with_suffix('.html')}",
                                            "-p", "no:cacheprovider")
        res.assert_outcomes(passed=1)
        (case,) = json.loads(out.read_text())["results"]
        cats = case["categories"]
        assert set(cats) == {"qa", "tool_call"}
        # The truth per trial: each arm's server recorded every stream's steps; a trial is one pass over the prompts
        truth_a, truth_b = _truth_per_trial(a, trials=3), _truth_per_trial(b, trials=3)
        for cat, f in cats.items():
            assert f["speedup_n_a"] == f["speedup_n_b"] == 3 and f["trials"] == 3
            lo, hi = f["speedup_interval"]
            assert lo <= f["speedup"] <= hi
            # a trial's value is its category's median stream; B's row shows the median trial, the speedup
            # compares geometric means over trials. 256 tokens make B's fastest streams last about 200 ms, so a
            # few ms of a late wake-up on a busy machine (client or server) stay within the bounds.
            tb, ta = truth_b[cat], truth_a[cat]
            assert abs(f["decode_tps_p50"] / np.median(tb) - 1) < 0.03, (cat, f["decode_tps_p50"], tb)
            assert abs(f["a_decode_tps"] / _geomean(ta) - 1) < 0.03, (cat, f["a_decode_tps"], ta)
            assert abs(f["speedup"] / (_geomean(tb) / _geomean(ta)) - 1) < 0.04, (cat, f["speedup"], tb, ta)
        assert cats["tool_call"]["speedup"] > cats["qa"]["speedup"] > 1.5
    assert "  [tool_call]" in res.stdout.str() and "x [" in res.stdout.str()  # the speedup and its interval
    assert "categories-speedup-s0" in out.with_suffix(".html").read_text()  # drawn with its intervals


def _truth_per_trial(server: SimServer, trials: int) -> dict[str, list[float]]:
    """Per category, each trial's median decode rate by the server's recorded steps (the warm-up left out)."""
    recs = [r for r in server.requests() if r.get("category")]
    per = len(recs) // trials
    assert per * trials == len(recs), [r["category"] for r in recs]
    out: dict[str, list[float]] = {}
    for t in range(trials):
        chunk = recs[t * per:(t + 1) * per]
        for cat in {r["category"] for r in chunk}:
            rates = [_truth_decode(server.truth(r["id"])) for r in chunk if r["category"] == cat]
            out.setdefault(cat, []).append(float(np.median(rates)))
    return out


def _geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def _truth_decode(truth: dict) -> float:
    steps = truth["steps"]
    return (sum(s["tokens"] for s in steps) - steps[0]["tokens"]) / (steps[-1]["t_s"] - steps[0]["t_s"])
