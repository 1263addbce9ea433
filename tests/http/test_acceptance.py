"""Acceptance and the split of a slowdown into its two causes, against the simulator's truth."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.errors import MeasurementError
from pytest_specperf.sim import SimServer, load_profile


def _window_steps(truth: dict, window_tokens: int, n_windows: int) -> list[tuple[float, float]]:
    """Per token-count window, from the server's own step record: (steps, seconds). Each decode step that wrote
    tokens of the window counts by its share of them, and adds that share of its time on the server's clock (the
    time between its writes)."""
    out = []
    for j in range(n_windows):
        lo, hi = j * window_tokens, (j + 1) * window_tokens
        steps = span = 0.0
        start = 0
        for prev, st in itertools.pairwise(truth["steps"]):  # the first step is the prefill's token
            share = max(0, min(hi, start + st["tokens"]) - max(lo, start)) / st["tokens"]
            steps += share
            span += share * (st["t_s"] - prev["t_s"])
            start += st["tokens"]
        out.append((steps, span))
    return out


def _true_window_step_ms(truth: dict, window_tokens: int, n_windows: int) -> list[float]:
    """Per token-count window, the mean time of the decode steps that wrote its tokens on the server's clock, in
    ms."""
    return [1000.0 * span / steps for steps, span in _window_steps(truth, window_tokens, n_windows)]


def _true_window_lengths(truth: dict, window_tokens: int, n_windows: int) -> list[float]:
    """Tokens per step in each token-count window, from the server's own step record."""
    return [window_tokens / steps for steps, _ in _window_steps(truth, window_tokens, n_windows)]


def test_seed_attribution_matches_the_profiles_declared_causes(seed_sim: SimServer, runner_for) -> None:
    runner = runner_for(seed_sim.url)
    r = runner.sustained(SustainedSpec(tokens=1500, ctx=2700, content="reasoning"), "seed-split")
    assert r.drift_failed
    a = r.attribution
    assert a is not None
    prof = load_profile("seed")
    # The YAML: reasoning text accepts 5 tokens per step, 2.9 after 400 generated tokens.
    assert a.accept_early == pytest.approx(prof.accept_len["reasoning"], rel=0.03)
    assert a.accept_late == pytest.approx(prof.accept_shift.accept_len["reasoning"], rel=0.03)
    # Early and late are medians over the first and last quarter of the windows of each window's step time. The
    # truth: the same windows' step times on the server's own clock; beside CPU hogs they are longer than the YAML
    # says (a stalled step is in both clocks).
    s = r.streams[0]
    n, w = len(s.window_tps), s.window_tokens
    m = max(3, -(-n // 4))
    true_ms = _true_window_step_ms(seed_sim.truth(s.response_id), w, n)
    early, late = float(np.median(true_ms[:m])), float(np.median(true_ms[-m:]))
    assert a.step_ms_early == pytest.approx(early, rel=0.05)
    assert a.step_ms_late == pytest.approx(late, rel=0.05)
    # (that the simulator's steps grow with the context as the YAML declares is tests/sim/test_sim_seed.py's)
    assert len(r.window_accept_len) == len(r.window_step_ms) == len(r.window_tps)


@pytest.mark.parametrize("content", ["prose", "reasoning"])
def test_every_window_acceptance_matches_truth(seed_sim: SimServer, runner_for, content: str) -> None:
    # seed prose accepts exactly 5 tokens per step; 64-token windows cut steps mid-way, which must not alias.
    runner = runner_for(seed_sim.url)
    r = runner.sustained(SustainedSpec(tokens=700, ctx=300, content=content, max_drift=0.99), f"windows-{content}")
    s = r.streams[0]
    truth = _true_window_lengths(seed_sim.truth(s.response_id), s.window_tokens, len(s.window_tokens_per_chunk))
    assert s.window_tokens_per_chunk == pytest.approx(truth, rel=0.03)
    if content == "prose":
        assert s.window_tokens_per_chunk == pytest.approx([5.0] * len(truth), rel=0.03)
    # the attribution reads the same per-window figures
    assert r.attribution is not None
    assert min(truth) * 0.97 <= r.attribution.accept_late <= max(truth) * 1.03


def test_require_speculation_errors_without_drafts(speed: float, runner_for) -> None:
    flat = {"max_accept": 1, "accept_len": {"prose": 1.0, "code": 1.0, "reasoning": 1.0, "repetitive": 1.0}}
    with SimServer("healthy", speed=speed, overrides=flat) as sim:
        runner = runner_for(sim.url)
        with pytest.raises(MeasurementError, match=r"require_speculation=True but .* shows no speculative decoding"):
            runner.sustained(SustainedSpec(tokens=300, ctx=200, require_speculation=True), "nospec")
        plain = runner.sustained(SustainedSpec(tokens=300, ctx=200), "nospec-ok")
    assert plain.acceptance is not None and plain.acceptance.mean_len == 1.0  # one token per step, shown


def test_min_accept_len_and_max_accept_drop_fail_with_reasons(seed_sim: SimServer, runner_for) -> None:
    runner = runner_for(seed_sim.url)
    r = runner.run(SustainedSpec(tokens=1500, ctx=2700, content="reasoning", min_accept_len=4.5,
                                 max_accept_drop=0.2, max_drift=0.99), "accept-floors")
    assert r.verdict == "failed"
    assert "< min_accept_len 4.5" in r.reason
    assert "acceptance drop 0." in r.reason and "> max_accept_drop 0.2" in r.reason


@contextlib.contextmanager
def _other_traffic(url: str) -> Iterator[None]:
    """Another user's requests on the same server while the block runs."""
    stop = threading.Event()

    def noise() -> None:
        with Client(url) as c:
            c.detect()
            while not stop.is_set():
                c.complete("Some other user's request about the weather today.", 64)

    th = threading.Thread(target=noise, daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join(timeout=30)


def test_other_traffic_hides_counter_acceptance_and_gates_error(speed: float, runner_for) -> None:
    # llama.cpp's counters are the only source of a mean length there: other traffic must hide it.
    with SimServer("healthy", speed=speed, overrides={"dialect": "llamacpp"}) as sim:
        runner = runner_for(sim.url)
        with _other_traffic(sim.url):
            busy = runner.sustained(SustainedSpec(tokens=300, ctx=200), "busy")
            with pytest.raises(MeasurementError, match="min_accept_len cannot be judged: other traffic"):
                runner.run(SustainedSpec(tokens=300, ctx=200, min_accept_len=1.5), "busy-gated")
        clean = runner.run(SustainedSpec(tokens=300, ctx=200, min_accept_len=1.5), "quiet")
    assert busy.acceptance is not None and busy.acceptance.contaminated
    assert busy.acceptance.mean_len is None  # no wrong figure is shown
    assert clean.verdict == "passed" and clean.acceptance.mean_len == pytest.approx(3.0, rel=0.03)


def test_other_traffic_falls_back_to_this_requests_chunks(speed: float, runner_for) -> None:
    # vLLM-style servers send one chunk per step: chunk sizes belong to this request alone.
    with SimServer("healthy", speed=speed) as sim:
        runner = runner_for(sim.url)
        with _other_traffic(sim.url):
            r = runner.sustained(SustainedSpec(tokens=600, ctx=200), "busy")
    assert r.acceptance.source == "chunks" and "other traffic" in r.acceptance.note
    assert r.acceptance.mean_len == pytest.approx(3.0, rel=0.03)  # healthy prose: 3 tokens per step


def test_burst_gap_catches_the_story_where_two_point_does_not(seed_sim: SimServer, runner_for) -> None:
    runner = runner_for(seed_sim.url)
    r = runner.run(SustainedSpec(tokens=1500, ctx=2700, content="reasoning", max_burst_gap=0.3, max_drift=0.99),
                   "burst-gap")
    assert r.burst_tps is not None and r.burst_tps > r.decode_tps
    assert r.burst_gap == pytest.approx(1 - r.decode_tps / r.burst_tps)
    assert r.verdict == "failed" and "burst gap" in r.reason and "> 0.3: sustained" in r.reason


def test_periodic_scrapes_show_acceptance_falling_during_the_stream(runner_for) -> None:
    # vLLM-style counters move every step, so scrapes during one stream see the drop as it happens.
    with SimServer("acceptance-collapse", speed=2.0) as sim:
        r = runner_for(sim.url).sustained(SustainedSpec(tokens=1200, ctx=200), "over-time")
    series = r.acceptance.over_time
    assert len(series) >= 6
    assert series[0].mean_len == pytest.approx(5.0, abs=0.1)  # before the shift at 300 tokens
    assert series[-1].mean_len == pytest.approx(2.0, abs=0.1)  # after it
    assert all(b.t_s > a.t_s for a, b in itertools.pairwise(series))


def test_server_per_step_counts_give_exact_windows_when_a_chunk_is_not_a_step(speed: float, runner_for) -> None:
    # vLLM --stream-interval 16: a chunk carries several steps, so chunk sizes no longer read acceptance; its
    # per-request per_step_accepted still does, step by step.
    with SimServer("seed", speed=speed, overrides={"spec_metrics": True, "stream_interval": 16}) as sim:
        r = runner_for(sim.url).sustained(SustainedSpec(tokens=700, ctx=300, content="reasoning", max_drift=0.99),
                                          "server-steps")
        s = r.streams[0]
        truth = _true_window_lengths(sim.truth(s.response_id), s.window_tokens, len(s.window_tokens_per_chunk))
    assert s.tokens_per_chunk >= 16  # the chunks hold whole intervals of steps
    assert s.window_steps_from == "server"
    assert s.window_tokens_per_chunk == pytest.approx(truth, rel=1e-9)
    prof = load_profile("seed")  # reasoning accepts 5 tokens per step, 2.9 after 400 generated tokens
    assert r.attribution is not None
    assert r.attribution.accept_early == pytest.approx(prof.accept_len["reasoning"], rel=0.03)
    assert r.attribution.accept_late == pytest.approx(prof.accept_shift.accept_len["reasoning"], rel=0.03)
