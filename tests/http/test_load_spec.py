"""Load keywords validate alike on every route; the knee, the common window and SSE framing on known inputs."""

from __future__ import annotations

import pytest

from pytest_specperf.cases.closed_loop import LoadSweepSpec, SustainedSpec
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import LoadLevel, SustainedResult
from pytest_specperf.cases.yaml_cases import load_cases
from pytest_specperf.endpoint.sse import Chunk, Trace, split_events
from pytest_specperf.errors import ConfigError
from pytest_specperf.run.floors import JudgeSettings, judge_sustained
from pytest_specperf.run.load import aggregate_tps, knee, knee_text


@pytest.mark.parametrize(
    ("kind", "kwargs", "needle"),
    [
        ("sustained", {"concurrency": 0}, r"concurrency must be an integer >= 1"),
        ("sustained", {"concurrency": True}, r"concurrency must be an integer >= 1"),
        ("sustained", {"concurrency": 4, "max_burst_gap": 0.5}, "runs its streams at once: drop max_burst_gap"),
        ("sustained", {"ramp_s": -1}, r"ramp_s must be a number of seconds >= 0"),
        ("sustained", {"min_total_tps": 0}, "min_total_tps must be a positive number"),
        ("load_sweep", {"concurrency": [4, 2]}, "concurrency must be a rising list"),
        ("load_sweep", {"concurrency": []}, "concurrency must be a rising list"),
        ("load_sweep", {"min_tps": {3: 10}}, r"min_tps names level 3, which is not in concurrency \[1, 2, 4, 8\]"),
        ("load_sweep", {"min_total_tps": {8: -1}}, "min_total_tps must be a positive number"),
        ("load_sweep", {"min_speedup": 0}, "min_speedup must be a positive ratio"),
        ("load_sweep", {"repeat": 0}, "repeat must be an integer >= 1 or 'auto'"),
        ("load_sweep", {"max_drift": 0.1, "tokens": 100}, "max_drift needs tokens >= 264"),
        ("load_sweep", {"concurency": [1, 2]}, "did you mean 'concurrency'"),
    ],
)
def test_bad_load_values_are_named(kind: str, kwargs: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        build_spec(kind, kwargs)


def test_yaml_sweep_with_per_level_floors(tmp_path) -> None:
    f = tmp_path / "x.specperf.yaml"
    f.write_text("s:\n  load_sweep: {concurrency: [1, 4], tokens: 100, min_tps: {4: 20}, min_total_tps: 90}\n")
    [(_, spec, _, _)] = load_cases(f)
    assert isinstance(spec, LoadSweepSpec) and spec.concurrency == (1, 4)
    one, four = spec.level(1), spec.level(4)
    assert (one.min_tps, four.min_tps, one.min_total_tps, four.min_total_tps) == (None, 20, 90, 90)
    assert four.concurrency == 4 and four.tokens == 100


def test_knee_is_the_first_level_past_which_doubling_adds_under_ten_percent() -> None:
    assert knee([(1, 100.0), (2, 190.0), (4, 300.0), (8, 320.0), (16, 330.0)]) == 4
    assert knee([(1, 100.0), (2, 190.0), (4, 300.0)]) is None
    # Uneven steps are put per doubling: 1 -> 4 users growing 15% is ~7% per doubling.
    assert knee([(1, 100.0), (4, 115.0)]) == 1
    assert knee([(1, 100.0), (4, 125.0)]) is None


def _levels(*points: tuple[int, float | None]) -> list[LoadLevel]:
    return [LoadLevel(concurrency=c, total_tps=t) for c, t in points]


def test_the_knee_note_speaks_only_of_measured_levels() -> None:
    # 4 users' aggregate was not measured: nothing is said of growth past 2 users, though 8 grew from 2.
    points = [(1, 100.0), (2, 190.0), (4, None), (8, 700.0)]
    assert knee(points) is None
    text = knee_text(None, _levels(*points))
    assert text == ("no knee up to 2 users: aggregate grows >= 10% per doubling; knee not judged past 2 users "
                    "(aggregate not measured at 4 users)")
    # a knee before the gap is still named
    assert knee([(1, 100.0), (2, 105.0), (4, None)]) == 1
    assert knee_text(None, _levels((1, 100.0), (2, None), (4, 300.0))) == (
        "knee not judged: aggregate tok/s not measured at 2 users")
    assert knee_text(None, _levels((1, 100.0), (2, 190.0))).startswith("no knee up to 2 users")


def test_one_level_names_no_knee() -> None:
    # load_sweep(concurrency=4): one level has no growth to judge, so no "no knee up to 4 users" claim
    assert build_spec("load_sweep", {"concurrency": 4}).concurrency == (4,)
    assert knee_text(knee([(4, 300.0)]), _levels((4, 300.0))) == (
        "knee not judged: one level (4 users) has no growth to judge; give concurrency two or more levels, "
        "e.g. [1, 2, 4, 8]")


def _trace(t0: float, start: float, rate: float, n: int) -> Trace:
    # One token per chunk at a steady rate, first token at ``start`` after sending.
    chunks = [Chunk(start + i / rate, 1) for i in range(n)]
    return Trace(chunks, chunks[-1].t, {"completion_tokens": n}, "length", None, "token_ids", True, t0=t0)


def test_aggregate_counts_only_the_span_in_which_every_stream_decoded() -> None:
    # A: 100 tok/s over absolute 1.0..3.0 s; B: 50 tok/s over 1.5..3.5 s. Both decode in 1.5..3.0.
    a = _trace(0.5, 0.5, 100.0, 201)
    b = _trace(1.0, 0.5, 50.0, 101)
    total, window = aggregate_tps([a, b])
    assert window == pytest.approx(1.5)
    assert total == pytest.approx(150.0, rel=0.01)
    # C: 50 tok/s over 2.0..6.0 s overlaps A for 1 s of their median 3 s: too little to describe the load.
    c = _trace(1.0, 1.0, 50.0, 201)
    assert aggregate_tps([a, c]) == (None, pytest.approx(1.0))
    late = _trace(10.0, 0.0, 100.0, 50)  # starts after A ended: never all at once
    assert aggregate_tps([a, late]) == (None, 0.0)


def test_sse_events_are_stamped_with_the_read_that_completed_them() -> None:
    reads = [(0.1, b'data: {"a"'), (0.2, b": 1}\n\n: comment\n\ndata: x\r\n"),
             (0.3, b"data: y\r\n\r\ndata: [DONE]\n\n")]
    assert list(split_events(reads)) == [(0.2, '{"a": 1}'), (0.3, "x\ny"), (0.3, "[DONE]")]


def test_under_load_min_tps_holds_for_the_slow_users_and_min_total_tps_for_the_sum() -> None:
    spec = SustainedSpec(tokens=100, concurrency=8, min_tps=80, min_total_tps=700)
    r = SustainedResult(kind="sustained", endpoint="http://x", model="m", server="vllm", ctx=100, prompt_tokens=100,
                        completion_tokens=100, concurrency=8, decode_tps=100.0, decode_p10_tps=60.0, total_tps=720.0)
    judge_sustained(r, spec, JudgeSettings())
    # The median user is fast enough; one user in ten is not: that fails the floor every user is owed.
    assert r.verdict == "failed" and "p10 user decode 60.0 tok/s < min_tps 80 with 8 users" in r.reason
    assert "min_total_tps" not in r.reason
    r.decode_p10_tps, r.total_tps = 85.0, 650.0
    judge_sustained(r, spec, JudgeSettings())
    assert r.verdict == "failed" and r.reason.startswith("aggregate 650.0 tok/s < min_total_tps 700 with 8 users")


def test_a_floor_on_an_aggregate_that_was_not_measured_is_an_error(runner_for) -> None:
    # A and C decode together for 1 s of their 3 s: no common window to sum (see above), and no ramp to blame.
    from pytest_specperf.errors import MeasurementError
    from pytest_specperf.run import stream_figures as measure
    from pytest_specperf.run.load import _no_common_window, _result
    from pytest_specperf.sim import SimServer

    found = [_trace(0.5, 0.5, 100.0, 201), _trace(1.0, 1.0, 50.0, 201)]
    streams = [measure.stream_result(t, coalesce_s=0.0)[0] for t in found]
    with SimServer("healthy", speed=20) as sim:
        runner = runner_for(sim.url)
        spec = SustainedSpec(tokens=201, concurrency=2)
        r = _result(runner.context, spec, "t::apart", streams, found)
        _no_common_window(r, spec)
        assert r.total_tps is None and any("aggregate tok/s not measured" in n for n in r.notes)
        with pytest.raises(MeasurementError, match=r"could not measure 2 users at once: .*min_total_tps 50 cannot be "
                                                   r"judged"):
            floor = SustainedSpec(tokens=201, concurrency=2, min_total_tps=50)
            _no_common_window(_result(runner.context, floor, "t::apart", streams, found), floor)
