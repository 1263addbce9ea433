"""A change across runs split into its causes (compare/cause.py) on hand-built records with known answers: a rate into
tokens per step and step time, a TTFT into cached share and prefill rate, shares that add to 1, and the cause carried
by a comparison through the gate, its reason and its JSON."""

from __future__ import annotations

import math
import random

import pytest

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import Acceptance
from pytest_specperf.cases.results import LoadLevel, LoadSweepResult, StreamResult, SustainedResult
from pytest_specperf.cases.saved_results import load_record, load_result
from pytest_specperf.compare import cause, gates
from pytest_specperf.measure import interleaved
from pytest_specperf.report.views import cause as views_cause
from tests.support.records import record


def _stream(decode: float, ttft: float, tpc: float, prompt: int, cached: int | None) -> StreamResult:
    return StreamResult(prompt_tokens=prompt, completion_tokens=256, ttft_s=ttft, total_s=2.0, decode_tps=decode,
                        client_tps=decode, window_tokens=None, window_tps=[], early_tps=None, late_tps=None,
                        drift=None, trend_p=None, stalls=[], tokens_per_chunk=tpc, count_source="usage",
                        counts_exact=True, cached_tokens=cached)


def _case(step_ms: float, accept: float, *, ttft: float = 0.1, share: float | None = 0.0, prompt: int = 2000,
          server_accept: float | None = None, jitter: float = 0.004, seed: int = 0) -> SustainedResult:
    """A sustained case whose every stream decodes at ``accept`` tokens per ``step_ms`` (decode = accept / step), the
    server counting ``server_accept`` tokens per step where given; streams spread by ``jitter`` (relative)."""
    rng = random.Random(seed)
    decode = 1000.0 * accept / step_ms
    cached = None if share is None else round(prompt * share)
    streams = [_stream(decode * (1 + rng.uniform(-jitter, jitter)), ttft * (1 + rng.uniform(-jitter, jitter)),
                       accept, prompt, cached) for _ in range(5)]
    acc = None if server_accept is None else Acceptance(server_accept, None, "metrics", True)
    return SustainedResult(kind="sustained", endpoint="http://x", model="m", server="vllm", ctx=prompt,
                           prompt_tokens=prompt, nodeid="t::c", decode_tps=decode, ttft_s=ttft, tokens_per_chunk=accept,
                           cached_share=share, acceptance=acc, streams=streams, repeat=5)


def _shares(c: cause.Cause) -> dict[str, float]:
    return {f.name: f.share for f in c.factors if f.share is not None}


def test_slower_steps_are_named_step_time_with_both_sides() -> None:
    base, now = _case(20.0, 3.0, jitter=0), _case(22.0, 3.0, jitter=0)
    effect = (3.0 / 22.0) / (3.0 / 20.0) - 1  # the decode rate's true change: -9.1%
    c = cause.explain("decode_tps", effect, [base], [now])
    assert c is not None and c.named == "step time"
    step = next(f for f in c.factors if f.name == "step time")
    assert (step.base, step.now) == pytest.approx((20.0, 22.0)) and step.change == pytest.approx(0.10)
    accept = next(f for f in c.factors if f.name == "acceptance")
    assert (accept.base, accept.now, accept.source) == (3.0, 3.0, "chunks")
    assert _shares(c) == pytest.approx({"step time": 1.0, "acceptance": 0.0, "other": 0.0}, abs=1e-9)
    assert c.text == ("why decode_tps -9.1% (baseline -> now): step time 20.0 -> 22.0 ms (+10.0%, explains 100%), "
                      "acceptance 3.00 -> 3.00 tokens/step from chunks (+0.0%, explains 0%), other explains 0%")


def test_fewer_tokens_per_step_are_named_acceptance_from_the_servers_count() -> None:
    # The server counts 3.2 then 2.4 tokens per step while chunks say 3.0 then 2.0: the server's count is the one
    # used, and a step time that held (decode / server tokens per step) is named as holding.
    base = _case(20.0, 3.2, server_accept=3.2, jitter=0)
    now = _case(20.0, 2.4, server_accept=2.4, jitter=0)
    for r, tpc in ((base, 3.0), (now, 2.0)):
        r.tokens_per_chunk = tpc
    c = cause.explain("decode_tps", 2.4 / 3.2 - 1, [base], [now])
    assert c is not None and c.named == "acceptance"
    accept = next(f for f in c.factors if f.name == "acceptance")
    assert (accept.base, accept.now, accept.source) == (3.2, 2.4, "metrics")
    assert _shares(c) == pytest.approx({"acceptance": 1.0, "step time": 0.0, "other": 0.0}, abs=1e-9)


def test_both_moved_split_by_their_log_terms() -> None:
    # acceptance 3.0 -> 2.7 (x0.9) and step time 20 -> 25 ms (x1.25): decode x0.72
    c = cause.explain("decode_tps", 0.9 / 1.25 - 1, [_case(20.0, 3.0)], [_case(25.0, 2.7)])
    assert c is not None and c.named == "step time"
    g = math.log(0.9 / 1.25)
    assert _shares(c)["acceptance"] == pytest.approx(math.log(0.9) / g, rel=1e-9)
    assert _shares(c)["step time"] == pytest.approx(-math.log(1.25) / g, rel=1e-9)


def test_a_colder_cache_is_named_cached_share() -> None:
    # 90% of a 2000-token prompt cached, then none: 200 -> 2000 tokens to prefill at the same 20000 tok/s
    base = _case(20.0, 3.0, ttft=200 / 20000, share=0.9, jitter=0)
    now = _case(20.0, 3.0, ttft=2000 / 20000, share=0.0, jitter=0)
    c = cause.explain("ttft_s", 0.01 / 0.1 - 1, [base], [now])  # effect is better-is-positive: TTFT x10 is -90%
    assert c is not None and c.named == "cached share" and c.change == pytest.approx(9.0)
    assert _shares(c) == pytest.approx({"cached share": 1.0, "prefill": 0.0, "other": 0.0}, abs=1e-9)
    prefill = next(f for f in c.factors if f.name == "prefill")
    assert (prefill.base, prefill.now) == pytest.approx((20000.0, 20000.0))
    assert "cached share 0.90 -> 0.00 of the prompt (explains 100%)" in c.text
    # the report's table shows the TTFT in ms, as the results table does: 200 and 2000 tokens at 20000 tok/s
    assert views_cause.table(c, "why").rows[0][:3] == ["ttft_s (ms)", "10.0", "100.0"]
    # the same cache, a slower prefill: named prefill
    c = cause.explain("ttft_s", 1 / 1.5 - 1, [_case(20.0, 3.0, ttft=0.1)], [_case(20.0, 3.0, ttft=0.15)])
    assert c is not None and c.named == "prefill" and "cached share" not in c.text


def test_shares_add_to_one_whatever_moved() -> None:
    rng = random.Random(7)
    for _ in range(500):
        metric = rng.choice(["decode_tps", "total_tps", "tpot_p90_ms", "ttft_s", "ttft_p90_s"])
        base = _case(rng.uniform(5, 50), rng.uniform(1, 6), ttft=rng.uniform(0.01, 2), share=rng.uniform(0, 0.99),
                     prompt=rng.randrange(100, 9000), seed=rng.randrange(1000))
        now = _case(rng.uniform(5, 50), rng.uniform(1, 6), ttft=rng.uniform(0.01, 2), share=rng.uniform(0, 0.99),
                    prompt=rng.randrange(100, 9000), seed=rng.randrange(1000))
        sides = []
        for r in (base, now):
            r.total_tps, r.ttft_p90_s = r.decode_tps * 4, r.ttft_s * 1.3
            # as JSON, with a rate case's per-token latency beside: the split reads either form
            sides.append(load_record({**to_dict(r), "tpot_p90_ms": 1000.0 / r.decode_tps}))
        effect = math.exp(rng.uniform(-0.7, 0.7)) - 1
        c = cause.explain(metric, effect, sides[:1], sides[1:])
        assert c is not None
        shares = [f.share for f in c.factors if f.share is not None]
        if c.named is None:
            assert abs(math.log1p(effect)) < 0.01 and not shares
            continue
        assert math.fsum(shares) == pytest.approx(1.0, abs=1e-9), c
        assert c.named == max((f for f in c.factors if f.share is not None), key=lambda f: f.share or 0).name


def test_a_true_rate_change_is_explained_by_its_factors_not_by_other() -> None:
    """Shares add to 1 by construction (``other`` is the rest): what can fail is how much the measured factors explain.
    With the change the sides' true decode ratio (decode = tokens per step / step time, as built), acceptance and
    step time explain it and ``other`` holds only the streams' jitter."""
    rng = random.Random(11)
    for _ in range(300):
        base = _case(rng.uniform(5, 50), rng.uniform(1, 6), seed=rng.randrange(1000))
        now = _case(rng.uniform(5, 50), rng.uniform(1, 6), seed=rng.randrange(1000))
        ratio = now.decode_tps / base.decode_tps
        if abs(math.log(ratio)) < 0.05:  # a change of a few % is within the streams' jitter: nothing to attribute
            continue
        c = cause.explain("decode_tps", ratio - 1, [base], [now])
        assert c is not None and c.named in ("acceptance", "step time"), c
        (other,) = [f for f in c.factors if f.name == "other"]
        assert other.share is not None and abs(other.share) < 0.15, c


def test_a_change_too_small_to_split_names_no_cause() -> None:
    c = cause.explain("decode_tps", -0.005, [_case(20.0, 3.0)], [_case(20.1, 3.0)])
    assert c is not None and c.named is None and all(f.share is None for f in c.factors)
    assert "too small or too little measured to split" in c.text
    # a metric neither a rate nor a TTFT, or sides without figures: nothing to say
    assert cause.explain("attainment", -0.2, [_case(20.0, 3.0)], [_case(22.0, 3.0)]) is None
    assert cause.explain("decode_tps", -0.2, [record({"kind": "two_point", "decode_tps": 100.0})],
                         [record({"kind": "two_point", "decode_tps": 80.0})]) is None


def test_a_regression_against_a_baseline_carries_its_cause_in_reason_and_json() -> None:
    base, now = _case(20.0, 3.0), _case(22.0, 3.0, seed=1)
    gates.against_baseline(gates.Gate(), now, [load_record(base.as_dict())])
    assert now.verdict == "failed"
    (dec,) = [cc for cc in now.comparisons or [] if cc.metric == "decode_tps"]
    assert dec.verdict == "regressed" and dec.cause is not None and dec.cause.named == "step time"
    assert dec.cause.text in now.reason and "step time 20.0 -> 22.0 ms" in now.reason
    assert dec.comparison is not None and dec.cause.text in dec.comparison.reason
    # the JSON keeps it as a typed record: saved and loaded back, byte for byte
    data = to_dict(now)
    loaded = load_result(data)
    assert to_dict(loaded) == data
    (back,) = [cc for cc in loaded.comparisons or [] if cc.metric == "decode_tps"]
    assert back.cause == dec.cause
    # a passing comparison (TTFT held) carries none, and writes no key
    (ttft,) = [cc for cc in now.comparisons or [] if cc.metric == "ttft_s"]
    assert ttft.verdict == "passed" and ttft.cause is None and "cause" not in to_dict(ttft)


def test_ab_names_the_cause_per_level_with_a_and_b() -> None:
    def sweep(step_ms: float, accept: float, trial: int) -> LoadSweepResult:
        decode = 1000.0 * accept / step_ms * (1 + 0.003 * (trial % 3 - 1))
        level = LoadLevel(concurrency=4, decode_tps=decode, total_tps=4 * decode, ttft_s=0.1, step_ms=step_ms,
                          accept_len=accept, accept_source="metrics", tokens_per_chunk=accept)
        return LoadSweepResult(kind="load_sweep", endpoint="http://x", model="m", server="vllm", ctx=200,
                               prompt_tokens=200, nodeid="t::s", concurrency=[4], levels=[level],
                               decode_tps=decode)

    a = [sweep(20.0, 3.0, i) for i in range(5)]
    b = [sweep(20.0, 2.4, i) for i in range(5)]
    it_a, it_b = iter(a), iter(b)
    row, _ = interleaved.run_ab(lambda: next(it_a), lambda: next(it_b), 5, gates.Gate())
    (dec,) = [cc for cc in row.comparisons or [] if cc.metric == "decode_tps" and cc.users == 4]
    assert dec.verdict == "regressed" and dec.cause is not None
    assert dec.cause.sides == ["A", "B"] and dec.cause.named == "acceptance"
    assert "why decode_tps -20.0% (A -> B): acceptance 3.00 -> 2.40 tokens/step from metrics" in dec.reason


def test_an_arm_below_the_best_names_the_cause_against_the_best_arm() -> None:
    # at 8 users the deployed arm k4 verifies more drafts per step: 4.0 tokens per step but 40 ms steps, against the
    # best arm k2's 3.0 per 20 ms step (per-user decode 100 vs 150 tok/s): step time is the cause, acceptance won back
    # part of it. At 1 user k4 is the best.
    figures = {"k2": {1: (20.0, 3.0), 8: (20.0, 3.0)}, "k4": {1: (20.0, 4.0), 8: (40.0, 4.0)}}
    rng = random.Random(3)

    def measure(name: str, levels: list[int] | None) -> LoadSweepResult:
        rows = []
        for users, (step, accept) in figures[name].items():
            decode = 1000.0 * accept / step * (1 + rng.uniform(-0.004, 0.004))
            rows.append(LoadLevel(concurrency=users, decode_tps=decode, total_tps=users * decode, ttft_s=0.1,
                                  step_ms=step, accept_len=accept, accept_source="metrics", tokens_per_chunk=accept))
        return LoadSweepResult(kind="load_sweep", endpoint=name, model="m", server="vllm", ctx=200, prompt_tokens=200,
                               nodeid="t::s", concurrency=[1, 8], levels=rows, decode_tps=rows[-1].decode_tps)

    row, _ = interleaved.run_arms(measure, ["k2", "k4"], 5, gates.Gate(), baseline="k2", deployed="k4", max_loss=0.05)
    assert row.arms is not None and row.arms.gate is not None
    (lv,) = [lv for lv in row.arms.gate.levels if lv.users == 8]
    assert lv.verdict == "below" and lv.cause is not None
    assert lv.cause.sides == ["k2", "k4"] and lv.cause.named == "step time"
    shares = _shares(lv.cause)
    g = math.log(100.0 / 150.0)
    assert shares["step time"] == pytest.approx(-math.log(2.0) / g, rel=0.02)
    assert shares["acceptance"] == pytest.approx(math.log(4.0 / 3.0) / g, rel=0.02)
    assert lv.cause.text in row.reason and "why decode_tps -33." in row.reason
    assert all(x.cause is None for x in row.arms.gate.levels if x.verdict == "holds")
    # the report's table: the best arm's and the deployed arm's figures side by side, the cause first
    (shown,) = views_cause.tables(row)
    assert shown.title == "why k4 at 8 users is below against the best arm k2: the cause: step time"
    assert shown.header == ["", "k2", "k4", "change", "explains"]
    assert shown.rows[1][:4] == ["step time (ms)", "20.0", "40.0", "+100.0%"]
    assert shown.rows[2][:3] == ["acceptance (tokens/step, from metrics)", "3.00", "4.00"]
