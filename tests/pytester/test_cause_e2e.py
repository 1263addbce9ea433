"""A regression against a saved baseline names its cause, checked against the simulator's truth: slower steps are
named step time, fewer tokens per step acceptance, a colder prefix cache the cached share (real pytest runs of a
case against simulators whose profile differs in that one figure)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.compare.cause import value_text
from pytest_specperf.sim import SimServer, load_profile

# repeat="auto": a busy machine adds trials until the sequential test decides, so the verdict stays "regressed"
DECODE_CASE = """
import pytest

@pytest.mark.sustained(tokens=256, ctx=200, repeat="auto")
def test_decode(specperf):
    pass
"""
# A warm prefix cache (one untimed request per prompt first): TTFT is the uncached tail of a 6000-token prompt on a
# cache that keeps it, the whole prompt on one that keeps nothing (6000 / 20000 tok/s / speed 10 = 30 ms).
PREFILL_CASE = """
import pytest

@pytest.mark.sustained(tokens=32, ctx=6000, repeat=5, prefix_cache="warm")
def test_prefill(specperf):
    pass
"""
SPEED = 10


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimServer]]:
    """The healthy profile, and one each with slower steps, fewer tokens accepted per step, and no prefix cache (the
    cache reported in ``usage`` on the cache test's pair)."""
    with SimServer("healthy", speed=SPEED) as base, \
            SimServer("healthy", speed=SPEED, overrides={"step_ms": 25}) as slow, \
            SimServer("healthy", speed=SPEED, overrides={"accept_len": {"prose": 2.4}}) as low, \
            SimServer("healthy", speed=SPEED, overrides={"cache_report": True}) as warm, \
            SimServer("healthy", speed=SPEED, overrides={"cache_report": True, "prefix_cache_tokens": 0}) as cold:
        yield {"base": base, "slow": slow, "low": low, "warm": warm, "cold": cold}


def _result(path: Path) -> dict[str, Any]:
    (r,) = json.loads(path.read_text())["results"]
    return r


def _truth(sim: SimServer, r: dict[str, Any]) -> dict[str, float]:
    """Median over the case's streams, by the simulator's own record: tokens per decode step, the decode steps'
    spacing (ms, real time) and the cached share of the prompt."""
    per = []
    for s in r["streams"]:
        t = sim.truth(s["response_id"])
        steps = t["steps"]
        per.append({"accept": statistics.mean(x["tokens"] for x in steps[1:]),
                    "step_ms": 1000.0 * (steps[-1]["t_s"] - steps[0]["t_s"]) / (len(steps) - 1),
                    "share": t["cached_tokens"] / t["prompt_tokens"]})
    return {k: statistics.median(p[k] for p in per) for k in ("accept", "step_ms", "share")}


def _cause(r: dict[str, Any], metric: str) -> dict[str, Any]:
    (cc,) = [c for c in r["comparisons"] if c["metric"] == metric]
    assert "cause" in cc, cc["reason"]
    return cc


def _factor(cause: dict[str, Any], name: str) -> dict[str, Any]:
    (f,) = [f for f in cause["factors"] if f["name"] == name]
    return f


def _compare(p: pytest.Pytester, base: SimServer, cand: SimServer, case: str) -> tuple[pytest.RunResult, Path, Path]:
    p.makepyfile(test_perf=case)
    saved = p.path / "base.json"
    p.runpytest_subprocess(f"--endpoint={base.url}", "--specperf-save=base",
                           f"--specperf-json={saved}").assert_outcomes(passed=1)
    out = p.path / "r.json"
    res = p.runpytest_subprocess(f"--endpoint={cand.url}", "--specperf-compare=base", f"--specperf-json={out}",
                                 f"--specperf-html={p.path / 'r.html'}")
    return res, saved, out


def _sides_match_truth(cause: dict, before: dict, after: dict) -> tuple[dict, dict]:
    """The step-time and acceptance factors, each side's figures checked against what that side's server did."""
    step, accept = _factor(cause, "step time"), _factor(cause, "acceptance")
    assert step["base"] == pytest.approx(before["step_ms"], rel=0.08)
    assert step["now"] == pytest.approx(after["step_ms"], rel=0.08)
    assert accept["base"] == pytest.approx(before["accept"], rel=0.03)
    assert accept["now"] == pytest.approx(after["accept"], rel=0.03)
    return step, accept


def test_slower_steps_are_named_step_time(pytester: pytest.Pytester, sims: dict[str, SimServer]) -> None:
    res, saved, out = _compare(pytester, sims["base"], sims["slow"], DECODE_CASE)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*regressed beyond 5%; why decode_tps -*% (baseline -> now): step time * -> * ms*"])
    r = _result(out)
    cc = _cause(r, "decode_tps")
    assert cc["verdict"] == "regressed" and cc["cause"]["named"] == "step time"
    step, accept = _sides_match_truth(cc["cause"], _truth(sims["base"], _result(saved)), _truth(sims["slow"], r))
    assert step["share"] > 0.7 and abs(accept["share"]) < 0.2
    assert cc["cause"]["text"] in r["reason"]
    # the HTML report: the baseline's and this run's figures side by side, the cause first
    html = (pytester.path / "r.html").read_text()
    table = html[html.index('<table class="cause">'):]
    table = table[:table.index("</table>")]
    assert "<caption>why decode_tps regressed: the cause: step time</caption>" in table
    assert "<th></th><th>baseline</th><th>now</th><th>change</th><th>explains</th>" in table
    row = (f'<td>step time (ms)</td><td class="num">{value_text(step["base"], "ms")}</td>'
           f'<td class="num">{value_text(step["now"], "ms")}</td>')
    assert row in table and table.index(row) < table.index("<td>acceptance (tokens/step, from metrics)</td>")


def test_fewer_tokens_per_step_are_named_acceptance(pytester: pytest.Pytester, sims: dict[str, SimServer]) -> None:
    res, saved, out = _compare(pytester, sims["base"], sims["low"], DECODE_CASE)
    res.assert_outcomes(failed=1)
    r = _result(out)
    cc = _cause(r, "decode_tps")
    assert cc["verdict"] == "regressed" and cc["cause"]["named"] == "acceptance"
    _, accept = _sides_match_truth(cc["cause"], _truth(sims["base"], _result(saved)), _truth(sims["low"], r))
    assert accept["source"] == "metrics"  # the simulator exposes vLLM's counters: the server's count is used
    assert accept["share"] > 0.7


def test_a_colder_cache_is_named_cached_share(pytester: pytest.Pytester, sims: dict[str, SimServer]) -> None:
    res, saved, out = _compare(pytester, sims["warm"], sims["cold"], PREFILL_CASE)
    r = _result(out)
    cc = _cause(r, "ttft_s")
    # the sides' cached shares differ, so the gate calls the TTFT change the cache's (inconclusive), and says why
    assert cc["verdict"] in ("inconclusive", "regressed") and cc["cause"]["named"] == "cached share"
    before, after = _truth(sims["warm"], _result(saved)), _truth(sims["cold"], r)
    share = _factor(cc["cause"], "cached share")
    assert before["share"] > 0.9 and after["share"] == 0.0
    assert share["base"] == pytest.approx(before["share"], abs=0.01) and share["now"] == after["share"]
    assert share["share"] > 0.7
    assert "why ttft_s +" in cc["reason"] and "cached share" in cc["reason"]
    assert res.ret == 0 or "cached share" in r["reason"]


def _configured(overrides: dict[str, Any], ctx: int = 200) -> dict[str, float]:
    """What a simulator of the healthy profile with ``overrides`` is set to do at SPEED, read from its profile (not
    measured): one sequence's step time at ``ctx`` in real ms, and prose's tokens accepted per step."""
    raw = {**load_profile("healthy").to_dict(), **overrides}
    step = raw["step_ms"] + raw["step_ms_per_1k_ctx"] * ctx / 1000 + raw["step_ms_per_seq"]
    return {"step_ms": step / SPEED, "accept": raw["accept_len"]["prose"]}


@pytest.mark.parametrize(("candidate", "named", "overrides"), [
    ("slow", "step time", {"step_ms": 25}), ("low", "acceptance", {"accept_len": {"prose": 2.4}})])
def test_ab_names_the_cause_between_the_arms(pytester: pytest.Pytester, sims: dict[str, SimServer], candidate: str,
                                             named: str, overrides: dict[str, Any]) -> None:
    """A against B in one run (--specperf-ab): the regression's cause named with A's and B's figures, each as the
    arm's simulator is configured (an independent source: its profile, not a measurement)."""
    pytester.makepyfile(test_perf=DECODE_CASE)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(f"--specperf-ab={sims['base'].url},{sims[candidate].url}",
                                        "--specperf-ab-trials=3", f"--specperf-json={out}")
    res.assert_outcomes(failed=1)
    cc = _cause(_result(out), "decode_tps")
    cause = cc["cause"]
    assert cc["verdict"] == "regressed" and cause["named"] == named and cause["sides"] == ["A", "B"], cause
    a, b = _configured({}), _configured(overrides)
    step, accept = _factor(cause, "step time"), _factor(cause, "acceptance")
    assert step["base"] == pytest.approx(a["step_ms"], rel=0.12) and step["now"] == pytest.approx(b["step_ms"],
                                                                                                  rel=0.12), step
    assert accept["base"] == pytest.approx(a["accept"], rel=0.05) and accept["now"] == pytest.approx(b["accept"],
                                                                                                     rel=0.05), accept
    assert _factor(cause, named)["share"] > 0.7
    assert "why decode_tps -" in cc["reason"] and "(A -> B): " in cc["reason"]
