"""Three simulator arms that differ only in speculative tokens (0, 1, 4), as a user runs them: the best arm per
level and the schedule checked against what the profile implies (``expected_user_tps``), every arm's per-trial
figure against the simulator's recorded steps, the deployed arm's loss gate, and the users x arms table in the
terminal, JSON, Markdown and HTML."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest
from support.load_helpers import true_decode
from support.records import record

from pytest_specperf.cases.results import Recorded
from pytest_specperf.compare import arms
from pytest_specperf.sim import SimServer, load_profile, start_all
from pytest_specperf.sim.model import expected_user_tps

# 96 tokens: a stream of 210-540 ms at 1 and 4 users. At 64 (140-360 ms) the client's reads stalled tens of ms
# beside CPU hogs (load 10-11) put two of four trials at 1 user 14-26 % under the simulator's truth. 12 users, not
# 16: off leads by 35 %, and 16 streams of 128 tokens per arm and round took 215 s there (the limit is 300 s)
SWEEP_TOKENS = 96
CASES = f"""
import pytest

@pytest.mark.load_sweep(concurrency=[1, 4, 12], tokens={SWEEP_TOKENS}, ctx=200, max_loss_vs_best=0.05, deployed="k4",
                        repeat="auto", max_repeat=10)
def test_sweep(specperf):
    pass

@pytest.mark.sustained(concurrency=4, tokens=48, ctx=200, max_loss_vs_best=0.05, deployed="k1")
def test_four_users(specperf):
    pass
"""
ARMS = {"off": 0, "k1": 1, "k4": 4}  # the best arm leads the next by 26 % or more at every level
PROFILE = {"accept_dist": "geometric", "max_accept": 7}
SPEED = 4
LEVELS = (1, 4, 12)


@pytest.fixture(scope="module")
def arm_sims() -> Iterator[dict[str, SimServer]]:
    """The three simulator arms."""
    sims = {n: SimServer("batching", speed=SPEED, overrides={**PROFILE, "num_speculative_tokens": k})
            for n, k in ARMS.items()}
    start_all(sims.values())
    try:
        yield sims
    finally:
        for s in sims.values():
            s.stop()


def _truth() -> dict[int, dict[str, float]]:
    return {users: {name: SPEED * expected_user_tps(load_profile("batching", {**PROFILE, "num_speculative_tokens": k}),
                                                    users, 200, SWEEP_TOKENS) for name, k in ARMS.items()}
            for users in LEVELS}


def _urls(sims: dict[str, SimServer]) -> str:
    return ",".join(f"{n}={s.url}" for n, s in sims.items())


def _run_arms(pytester: pytest.Pytester, sims: dict[str, SimServer], cases: str, *args: str
              ) -> tuple[pytest.RunResult, dict]:
    """Run ``cases`` on every simulator arm; the pytest run and the first result's JSON."""
    pytester.makepyfile(test_arms_cases=cases)
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess(f"--specperf-arms={_urls(sims)}", *args, f"--specperf-json={out}",
                                        "-p", "no:cacheprovider")
    return res, json.loads(out.read_text())["results"][0]


def _true_trials(sim: SimServer, trials: dict[int, int]) -> dict[int, list[float]]:
    """Per level, each trial's median user as the simulator ran it. ``trials``: per level, the trials the arm ran.
    The sweep's requests (SWEEP_TOKENS) in arrival order are, round after round, 1, 4 and 12 requests started
    together, a round sweeping only the levels still open (repeat="auto": a level that had n trials was in the
    first n rounds)."""
    recs = sorted((r for r in sim.requests() if r["max_tokens"] == SWEEP_TOKENS), key=lambda r: r["arrival_monotonic"])
    assert len(recs) == sum(u * n for u, n in trials.items())
    out: dict[int, list[float]] = {u: [] for u in LEVELS}
    i = 0
    for round_ in range(max(trials.values())):
        for users in LEVELS:
            if trials[users] > round_:
                chunk = recs[i:i + users]
                i += users
                out[users].append(float(np.median([true_decode(sim.truth(r["id"])) for r in chunk])))
    return out


def test_three_arms_find_the_schedule_the_profile_implies(pytester: pytest.Pytester,
                                                          arm_sims: dict[str, SimServer]) -> None:
    truth = _truth()
    best = {str(u): max(t, key=lambda n: t[n]) for u, t in truth.items()}
    assert best == {"1": "k4", "4": "k1", "12": "off"}  # the profile's known answer: the best K falls with load
    pytester.makepyfile(test_arms=CASES)
    out, md, html = (pytester.path / n for n in ("r.json", "s.md", "r.html"))
    res = pytester.runpytest_subprocess(f"--specperf-arms={_urls(arm_sims)}",
                                        "--specperf-arms-tokens=off=0,k1=1,k4=4", f"--specperf-json={out}",
                                        f"--specperf-markdown={md}", f"--specperf-html={html}",
                                        "-p", "no:cacheprovider")
    results = {x["nodeid"].split("::")[-1]: x for x in json.loads(out.read_text())["results"]}
    # sustained(concurrency=4) is one level: k1 is the best there and deployed, so the gate holds
    four = results["test_four_users"]
    assert four["verdict"] == "passed" and four["arms"]["schedule"] == {"4": "k1"}
    assert four["arms"]["gate"]["levels"][0]["verdict"] == "holds"
    r = results["test_sweep"]
    t = r["arms"]
    assert t["schedule"] == best
    assert t["num_speculative_tokens"] == {"1": 4, "4": 1, "12": 0}
    recorded = {name: _true_trials(sim, {row["users"]: len(row["arms"][name]["trials"]) for row in t["levels"]})
                for name, sim in arm_sims.items()}
    for row in t["levels"]:
        for name, fig in row["arms"].items():
            # every trial's median user as measured against the simulator's recorded steps: the trials' median
            # within 5 %, and each trial within 10 % but one in four (at least one): at 64 tokens the client's
            # read of a trial's first tokens, stalled 46 ms beside CPU hogs (load 11), put one trial of twelve 29 %
            # above its truth. A figure from the wrong trial, level or arm misses every trial.
            got, want = fig["trials"], recorded[name][row["users"]]
            assert np.median(got) == pytest.approx(np.median(want), rel=0.05), (row["users"], name)
            off = [(g, w) for g, w in zip(got, want, strict=True) if abs(g / w - 1) > 0.10]
            assert len(off) <= max(1, len(got) // 4), (row["users"], name, off)
    # k4 is deployed: best alone, 25 % or more behind at 4 and 12 users; the reason names the levels and figures.
    # repeat="auto" decides each: three trials on a quiet machine, more where a busy one adds noise per trial
    assert r["verdict"] == "failed"
    gate = {lv["users"]: lv["verdict"] for lv in t["gate"]["levels"]}
    assert gate == {1: "holds", 4: "below", 12: "below"}
    assert "at 12 users k4 loses more than max_loss_vs_best 0.05 against the best arm off" in r["reason"]
    assert "at 4 users k4 loses more than max_loss_vs_best 0.05 against the best arm k1" in r["reason"]
    assert "at 1 user" not in r["reason"]
    res.assert_outcomes(failed=1, passed=1)
    text = res.stdout.str()
    assert "arms of test_arms.py::test_sweep" in text and '{"1": 4, "4": 1, "12": 0}' in text
    assert "| users | off | k1 | k4 |" in md.read_text()
    page = html.read_text()
    assert "per-user decode against users, one line per arm" in page
    assert all(f"{n} http://127.0.0.1:" in page for n in ARMS)  # the header names every arm's endpoint


AUTO_REPEAT = 6
# 56 tokens: streams of about 200 ms at 4 users (32 tokens' 110 ms left trials 20 % apart beside CPU hogs, as a
# late wake-up of tens of ms is a larger share of a shorter stream), and a length no other case here asks for,
# so the sweep's truth (SWEEP_TOKENS) stays its own
AUTO = f"""
import pytest

@pytest.mark.load_sweep(concurrency=[4, 16], tokens=56, ctx=200, repeat="auto", max_repeat={AUTO_REPEAT})
def test_auto(specperf):
    pass
"""


def test_auto_stops_when_every_best_arm_is_decided(pytester: pytest.Pytester,
                                                   arm_sims: dict[str, SimServer]) -> None:
    # The best arm leads by 26 % or more at both levels: on a quiet machine decided at the first look (three trials
    # per arm). Beside other jobs a trial can be noisy enough to need more, so what is checked is the rule itself:
    # rounds go on while a level is open and the budget allows one more, and stop at the first look where every
    # level is decided (some level still open one round before).
    res, r = _run_arms(pytester, arm_sims, AUTO)
    res.assert_outcomes(passed=1)
    t = r["arms"]
    n = t["trials"]["off"]
    assert t["trials"] == {"off": n, "k1": n, "k4": n} and n >= 3
    # the budget is max_repeat full sweeps in level-trials: a level decided early leaves its share to the open ones,
    # and a round costs one level-trial per open level
    budget = AUTO_REPEAT * len(t["levels"])
    spent = sum(len(row["arms"]["off"]["trials"]) for row in t["levels"])
    still_open = [row["users"] for row in t["levels"] if not row["decided"]]
    assert spent <= budget
    assert not still_open or spent + len(still_open) > budget, f"stopped with {still_open} open and budget left"
    assert {u: b for u, b in t["schedule"].items() if int(u) not in still_open} == \
        {u: b for u, b in {"4": "k1", "16": "off"}.items() if int(u) not in still_open}
    assert len(still_open) < len(t["levels"]), "no level decided"
    if n > 3 and not still_open:
        last = [row for row in t["levels"] if len(row["arms"]["off"]["trials"]) == n]
        assert last, "a round ran with every level already decided"

        def trials_until(row: dict, k: int) -> dict[str, list[Recorded]]:
            # each arm's first k trials at the level, as the records the rule reads (a dict is none: it reads
            # records only, so a dict's level has no value and the level is None)
            return {name: [record({"kind": "load_sweep", "concurrency": [row["users"]], "levels": [
                {"kind": "sustained", "concurrency": row["users"], "trials": [{"decode_tps": v}]}]})
                for v in a["trials"][:k]] for name, a in row["arms"].items()}

        assert any(not arms.level(row["users"], trials_until(row, n - 1), levels=len(t["levels"])).decided
                   for row in last)


BASELINE = """
import pytest

@pytest.mark.sustained(concurrency=4, tokens=48, ctx=200, max_loss_vs_best=0.05)
def test_four_users(specperf):
    pass
"""


def test_without_deployed_the_named_baseline_is_judged(pytester: pytest.Pytester,
                                                        arm_sims: dict[str, SimServer]) -> None:
    # k4 is not the first arm: only --specperf-arms-baseline makes it the one the gate judges (k1 is best at 4 users)
    res, r = _run_arms(pytester, arm_sims, BASELINE, "--specperf-arms-baseline=k4")
    res.assert_outcomes(failed=1)
    assert (r["arms"]["baseline"], r["arms"]["deployed"]) == ("k4", "k4")
    assert r["reason"].startswith("at 4 users k4 loses more than max_loss_vs_best 0.05 against the best arm k1")
