"""Drift's rare shapes, built on purpose: a late read of a few steps (no burst), many bursts in one stream (each
one named), a hold that straddles a group's edge and a pause at the late group's first chunk (neither moves drift).

The known answer is the same stream without the fault: its tokens and step times are what the server produced, so
its drift is the truth the faulty stream's drift must keep (``pytest_specperf.run.drift``).
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_specperf.run import drift as S

STEP_S = 0.002  # a simulator at speed 10


def steady(tokens: int, seed: int = 11, accept: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """A healthy stream: a 1-token first chunk at 0.3 s, then one chunk per step (1 + Binomial(5, accept) tokens,
    2 ms steps with 2 % jitter), cut to exactly ``tokens`` decode tokens."""
    rng = np.random.default_rng(seed)
    per = 1 + rng.binomial(5, accept, size=tokens)
    n = int(np.searchsorted(np.cumsum(per), tokens)) + 1
    per = per[:n].copy()
    per[-1] -= int(per.sum()) - tokens
    t = 0.3 + np.concatenate([[0.0], np.cumsum(STEP_S * rng.lognormal(0.0, 0.02, n))])
    return t, np.concatenate([[1], per])


def read_together(t: np.ndarray, first: int, steps: int) -> np.ndarray:
    """The chunks ``first .. first + steps - 1`` read at once, when the last of them arrived (a late read)."""
    out = t.copy()
    out[first:first + steps] = t[first + steps - 1]
    return out


def held(t: np.ndarray, first: int, hold_s: float) -> np.ndarray:
    """A buffering proxy holding every chunk after ``first`` for ``hold_s``, then sending them at once."""
    t0 = t[first]
    return np.where((t > t0) & (t < t0 + hold_s), t0 + hold_s, t)


def test_a_late_read_of_five_steps_is_no_burst_and_twelve_are_one() -> None:
    # one token per step: a delivery's tokens are its steps
    t, k = steady(1500, accept=0.0)
    assert S.find_bursts(t, k) == []
    five = read_together(t, 700, 5)
    # a busy client reading five steps at once: a late read, not "many steps at once" (BURST_CHUNKS = 8)
    assert S.find_bursts(five, k) == [] and S.find_stalls(five, k) == []
    twelve = read_together(t, 700, 12)
    (burst,) = S.find_bursts(twelve, k)
    assert burst.tokens == 12 and burst.at_token == int(k[1:700].sum()) and burst.span_s == 0.0


def test_thirty_bursts_in_one_stream_are_each_named() -> None:
    # a proxy that flushes every ten steps, thirty times: the median delivery is still one step, though bursts
    # pull the mean delivery up to 1.4 steps (over which a ten-step burst is under eight "typical" deliveries)
    t, k = steady(1000, accept=0.0)
    starts = [100 + 30 * j for j in range(30)]
    for a in starts:
        t = read_together(t, a, 10)
    bursts = S.find_bursts(t, k)
    assert [(b.at_token, b.tokens) for b in bursts] == [(int(k[1:a].sum()), 10) for a in starts]


def _edges(t: np.ndarray, k: np.ndarray) -> tuple[int, int]:
    """The decode tokens that end the early group and start the late one (the drift's default windows)."""
    w = S.window_rates(t, k)
    m = S.drift(w).edge_windows
    return m * w.window_tokens, (len(w.rates) - m) * w.window_tokens


@pytest.mark.parametrize("edge", ["early", "late"])
@pytest.mark.parametrize("back", [3, 6, 10])
def test_a_hold_straddling_a_groups_edge_keeps_the_streams_drift(edge: str, back: int) -> None:
    # 40 ms held (20 steps) from ``back`` chunks before the group's edge: the burst that catches it up spans the
    # edge, so a group cut inside the burst takes the hold's time with only part of its tokens (drift -0.06
    # read as -0.21 at the early edge, -0.27 at the late one)
    t, k = steady(1500)
    true = S.drift(S.window_rates(t, k), trace=(t, k))
    c = np.concatenate([[0], np.cumsum(k[1:])])
    at = _edges(t, k)[0 if edge == "early" else 1]
    first = int(np.searchsorted(c, at)) - back
    th = held(t, first, 0.04)
    (burst,) = S.find_bursts(th, k)
    assert burst.at_token < at < burst.at_token + burst.tokens  # the premise: the burst holds the edge's token
    got = S.drift(S.window_rates(th, k), trace=(th, k))
    assert got.drift == pytest.approx(true.drift, abs=0.02), (got.drift, true.drift)
    assert got.early_tps == pytest.approx(true.early_tps, rel=0.02)
    assert got.late_tps == pytest.approx(true.late_tps, rel=0.02)


def test_a_pause_right_before_the_late_groups_first_chunk_is_left_out() -> None:
    # the stream stops for 0.3 s just before the first chunk past the late group's start, then goes on at its pace
    # (no catch-up): time the server did not spend decoding, which the late rate must not count
    t, k = steady(1500, accept=0.0)
    c = np.concatenate([[0], np.cumsum(k[1:])])
    i = int(np.searchsorted(c, _edges(t, k)[1], side="right"))
    tp = t.copy()
    tp[i:] += 0.3
    (pause,) = S.find_pauses(tp, k)
    assert pause.at_token == int(c[i - 1]) and pause.lost_s == pytest.approx(0.3, abs=0.01)
    true = S.drift(S.window_rates(t, k), trace=(t, k))
    got = S.drift(S.window_rates(tp, k), trace=(tp, k))
    assert got.late_tps == pytest.approx(true.late_tps, rel=0.02)
    assert got.drift == pytest.approx(true.drift, abs=0.02)
    assert not S.drift_gate([got]).failed
