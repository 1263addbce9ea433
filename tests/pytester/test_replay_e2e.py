"""The replay case as a user runs it: the marker, its YAML twin, the JSON's per-request fidelity and a floor per
input-length bucket, on the embedded simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_specperf.sim.launcher import SimServer

CASES = """
import pytest

@pytest.mark.replay(trace="builtin:mooncake-conversation", speed=4, duration_s=3)
def test_replayed(specperf):
    assert specperf.result.requests == 10

@pytest.mark.replay(trace="builtin:mooncake-conversation", speed=4, duration_s=3, max_ttft_p90_s={"4-16k": 0.0001})
def test_long_prompts_miss_a_tiny_ttft(specperf):
    pass
"""

YAML = """
yaml_replay:
  replay: {trace: traces/az.csv, timestamp_unit: datetime, speed: 4}
"""

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2024-05-10 00:00:0{i}.500000+00:00,{100 + 10 * i},{8 + i}\n" for i in range(4))


def test_marker_yaml_json_and_a_bucket_floor(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_replay=CASES)
    pytester.makefile(".specperf.yaml", cases=YAML)
    (pytester.path / "traces").mkdir()
    (pytester.path / "traces" / "az.csv").write_text(AZURE, encoding="utf-8")
    out = pytester.path / "r.json"
    res = pytester.runpytest_subprocess("--specperf-sim-speed=20", f"--specperf-json={out}", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2, failed=1)
    assert "TTFT p90 of the 4-16k prompts" in res.stdout.str() and "> max_ttft_p90_s 0.0001" in res.stdout.str()
    results = {r["nodeid"].split("::")[-1]: r for r in json.loads(Path(out).read_text())["results"]}
    yaml_case = results["yaml_replay"]
    assert yaml_case["format"] == "azure" and yaml_case["requests"] == 4
    assert [p["prompt_tokens"] for p in yaml_case["per_request"]] == [100, 110, 120, 130]
    assert [p["output_tokens"] for p in yaml_case["per_request"]] == [8, 9, 10, 11]
    # each row at its own time (1 s apart in the file, 0.25 s at speed 4)
    assert [p["scheduled_s"] for p in yaml_case["per_request"]] == pytest.approx([0, 0.25, 0.5, 0.75])
    r = results["test_replayed"]
    for key in ("scheduled_s", "sent_s", "late_s", "prompt_tokens", "output_tokens", "cached_tokens", "row"):
        assert key in r["per_request"][0], key
    for key in ("late_p50_s", "late_p99_s", "rps", "achieved_rps", "refused", "failed", "not_sent",
                "client_cpu_share", "reusable_share", "cached_share", "buckets", "prompts_build_s"):
        assert key in r, key
    assert r["reusable_share"] > 0 and set(r["buckets"]) <= {"<1k", "1-4k", "4-16k", ">16k"}


def test_a_wrong_unit_is_a_collection_error_naming_the_unit(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.replay(trace="builtin:mooncake-conversation", timestamp_unit="s")
        def test_x(specperf): pass
    """)
    res = pytester.runpytest_subprocess("--specperf-sim-speed=20", "-p", "no:cacheprovider")
    assert "give timestamp_unit='ms'" in res.stdout.str()
    assert res.ret != 0


def test_a_replay_compares_against_its_baseline_on_the_rate_metrics(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.replay(trace="builtin:mooncake-conversation", speed=4, duration_s=3)
        def test_r(specperf): pass
    """)
    first = pytester.runpytest_subprocess("--specperf-sim-speed=20", "--specperf-save=base", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1)
    out = pytester.path / "r.json"
    again = pytester.runpytest_subprocess("--specperf-sim-speed=20", "--specperf-compare=base",
                                          f"--specperf-json={out}", "-p", "no:cacheprovider")
    [r] = json.loads(out.read_text())["results"]
    metrics = {c["metric"] for c in r["comparisons"]}
    # the same trace rows on both sides, judged on what a rate case is judged on (TTFT, TPOT, e2e p90)
    assert {"ttft_p90_s", "tpot_p90_ms", "e2e_p90_s"} <= metrics and "decode_tps" not in metrics, (metrics,
                                                                                                  again.stdout.str())


def _mix(pytester: pytest.Pytester, marker: str) -> None:
    """Nine rows 250 ms apart, each answered before the next arrives (no shared steps, no queueing): five of 12,000
    prompt tokens, four of 1,000 between them, 120 tokens out each; a case replaying them."""
    rows = [(i * 250, 12_000 if i % 2 == 0 else 1_000) for i in range(9)]
    pytester.path.joinpath("mix.csv").write_text("timestamp,input_length,output_length\n" + "".join(
        f"{t},{n},120\n" for t, n in rows))
    pytester.makepyfile(f"""
        import pytest
        @pytest.mark.replay(trace="mix.csv", timestamp_unit="ms"{marker})
        def test_r(specperf): pass
    """)


#: the arms' profile: 1 ms per 1,000 tokens of context on every step, so the long rows make the slowest steps
MIX_PROFILE = {"step_ms_per_1k_ctx": 1.0, "jitter": 0.0}
#: a server 25 % slower per step whose context (8,000 tokens) cannot take the mix's long rows
SHORT_SLOW = {**MIX_PROFILE, "max_model_len": 8_000, "step_ms": 25}


def test_arms_rank_a_replay_over_the_rows_every_arm_answered(pytester: pytest.Pytester) -> None:
    # "short" decodes 25 % slower but, not sent the long rows, its own median request decodes faster (a short row's
    # against the other's long one); over the four rows both arms answered "full" leads and the deployed "short" is
    # below it.
    _mix(pytester, ", max_loss_vs_best=0.05, deployed='short'")
    out = pytester.path / "r.json"
    with SimServer("healthy", speed=10, overrides=MIX_PROFILE) as a, \
            SimServer("healthy", speed=10, overrides=SHORT_SLOW) as b:
        res = pytester.runpytest_subprocess(f"--specperf-arms=full={a.url},short={b.url}",
                                            "--specperf-ab-trials=3", f"--specperf-json={out}",
                                            "-p", "no:cacheprovider")
    [r] = json.loads(out.read_text())["results"]
    [level] = r["arms"]["levels"]
    assert level["label"] == "the trace's 4 rows every arm answered", (level, res.stdout.str())
    # its steps: 25 ms against 20 plus each short row's context term (1 ms on both): 0.81 of the other's decode
    assert level["best"] == "full" and 0.72 < level["vs_best"]["short"]["ratio"] < 0.88, level
    [gated] = r["arms"]["gate"]["levels"]
    # below its 5 % loss on a quiet machine; beside other jobs three trials may leave it inconclusive, never holding
    assert gated["verdict"] in ("below", "inconclusive"), (gated, res.stdout.str())
    if gated["verdict"] == "below":
        assert r["verdict"] == "failed" and "over the trace's 4 rows every arm answered short loses more than " \
            "max_loss_vs_best 0.05" in r["reason"], r["reason"]
    assert r["arms"]["text"].startswith("best arm over the trace's 4 rows every arm answered -> "), r["arms"]


def test_ab_judges_a_replay_over_the_rows_both_servers_answered(pytester: pytest.Pytester) -> None:
    # B decodes 25 % slower (25 ms steps against 20) and its context cannot take the mix's five long rows, whose
    # long contexts make the slowest steps. Each side's own p90 puts B ahead on TPOT and far ahead on TTFT (no long
    # prefill left); over the four rows both answered B is slower on TPOT and the same on TTFT.
    _mix(pytester, "")
    out = pytester.path / "r.json"
    with SimServer("healthy", speed=10, overrides=MIX_PROFILE) as a, \
            SimServer("healthy", speed=10, overrides=SHORT_SLOW) as b:
        res = pytester.runpytest_subprocess(f"--specperf-ab={a.url},{b.url}", "--specperf-ab-trials=3",
                                            f"--specperf-json={out}", "-p", "no:cacheprovider")
    [r] = json.loads(out.read_text())["results"]
    assert r["not_sent"] == 5, res.stdout.str()
    got = {c["metric"]: c for c in r["comparisons"]}
    for c in (got["tpot_p90_ms"], got["ttft_p90_s"]):
        assert "over the 4 trace rows every trial of both sides answered; 5 answered only on some left out" in \
            c["reason"], c
    # B's steps: 25 ms against 20 plus each short row's context term (1 ms on both): 24 % slower. Three trials a side
    # decide it on a quiet machine; beside other jobs the interval can stay wide (CI read +20.0 % [+5.0 %, +37.1 %],
    # p 0.0047 against the case's 0.0033), so the estimate is what is held: slower by about the truth, never passed.
    # Each side over its own rows (an earlier form of this test: B 15 % slower, twelve rows) read TPOT -26.6 %,
    # TTFT -75.7 % and e2e -39 %, all "improved".
    tpot = got["tpot_p90_ms"]
    assert tpot["verdict"] in ("regressed", "inconclusive") and 0.12 < tpot["comparison"]["change"] < 0.35, \
        (tpot, res.stdout.str())
    assert got["ttft_p90_s"]["verdict"] != "improved", got["ttft_p90_s"]  # the same prefill on the same rows
    assert r["verdict"] == "failed" or tpot["verdict"] == "inconclusive"
