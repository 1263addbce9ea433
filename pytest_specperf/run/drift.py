"""Drift statistics over one streamed generation (pure numpy/scipy; docs/statistics.md explains the choices).

A trace is two sequences of equal length, one entry per SSE chunk that carried >= 1 token:

* ``t``: seconds since the request was sent, strictly non-decreasing;
* ``k``: tokens in that chunk (int >= 1; several under speculative decoding).

The first chunk's tokens belong to TTFT and are excluded from every decode figure. The decode
clock starts at ``t[0]``.

This module never imports pytest or anything else from the package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # scipy.stats loads on first use: 0.6 s of CPU a run without statistics never spends
from numpy.typing import ArrayLike

#: fewest token-count windows a drift estimate needs (3 early + 3 late + room between them).
MIN_WINDOWS = 8
#: smallest default window; with W = max(32, N // 20) this makes N >= 256 decode tokens the minimum.
MIN_WINDOW_TOKENS = 32
MIN_DECODE_TOKENS = MIN_WINDOWS * MIN_WINDOW_TOKENS
#: streams from which the replicate (Wilcoxon) gate is used: its smallest p is 2**-k, 1/32 at k = 5.
MIN_STREAMS_WILCOXON = 5


@dataclass(frozen=True)
class Windows:
    """Token-count windows over the decode part of one stream."""

    window_tokens: int  # W, decode tokens per window
    rates: list[float]  # tok/s per window, len J
    bounds_s: list[float]  # J + 1 boundary times (seconds since the request was sent)
    centers: list[float]  # window-centre decode-token index, (j + 0.5) * W
    decode_tokens: int  # N, decode tokens in the stream (first chunk excluded)


@dataclass(frozen=True)
class Drift:
    """Early-vs-late drift of one stream; ``drift > 0`` means it slowed down."""

    early_tps: float
    late_tps: float
    ratio: float  # R = late / early
    drift: float  # 1 - R
    trend_rel: float  # Theil-Sen relative change of the rate from the first to the last window centre
    trend_ci: list[float]  # 90 % two-sided CI of trend_rel, [low, high]
    mk_p: float  # one-sided Mann-Kendall p for a downward trend
    n_windows: int  # J
    edge_windows: int  # windows in each of the early and late groups


@dataclass(frozen=True)
class Stall:
    """An inter-chunk gap far longer than the stream's usual pace."""

    at_token: int  # decode tokens received before the gap (index of the delayed chunk's first token)
    gap_s: float


@dataclass(frozen=True)
class Burst:
    """Many steps' tokens delivered at once (a late wake-up catching up, a buffering proxy): never a speed."""

    at_token: int  # decode tokens received before the burst's first chunk
    tokens: int  # tokens the burst delivered
    span_s: float  # seconds from its first chunk to its last (~0)


@dataclass(frozen=True)
class Pause:
    """Time a stall cost the stream net of any catch-up right after it: what the group rates leave out."""

    at_token: int  # decode tokens received before the stall
    lost_s: float


@dataclass(frozen=True)
class DriftVerdict:
    """Verdict of the drift gate over one or more streams."""

    failed: bool
    warn: bool
    drift: float  # aggregate: 1 - exp(median log R) over streams
    p: float | None  # evidence behind the verdict (MK p, k-th smallest MK p, or Wilcoxon p)
    reason: str
    streams: int
    rule: str  # "single" | "majority" | "wilcoxon"

    @property
    def outcome(self) -> str:
        """``passed``, ``failed`` or ``inconclusive`` (a drift above the limit without the evidence to fail)."""
        return "failed" if self.failed else "inconclusive" if self.warn else "passed"


def _trace(t: ArrayLike, k: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate a trace; return float times and int token counts."""
    ta = np.asarray(t, dtype=float)
    ka = np.asarray(k)
    if ta.ndim != 1 or ka.ndim != 1 or ta.size != ka.size:
        raise ValueError(f"t and k must be 1-D sequences of equal length (got {ta.shape} and {ka.shape})")
    if ka.size and (not np.all(np.isfinite(ta)) or np.any(np.diff(ta) < 0)):
        raise ValueError("t must be finite and non-decreasing")
    if ka.size and (not np.all(np.equal(np.mod(ka, 1), 0)) or np.any(ka < 1)):
        raise ValueError("k must hold whole token counts >= 1 (drop zero-token chunks first)")
    return ta, ka.astype(np.int64)


def _cumulative(ka: np.ndarray) -> np.ndarray:
    """Decode tokens received by each chunk: C_0 = 0 (first chunk excluded), C_i = sum k[1..i]."""
    return np.concatenate([[0], np.cumsum(ka[1:])])


def decode_tps(t: ArrayLike, k: ArrayLike) -> float | None:
    """Decode rate (sum(k) - k[0]) / (t[-1] - t[0]); None with < 2 chunks or no elapsed time."""
    ta, ka = _trace(t, k)
    if ka.size < 2:
        return None
    span = float(ta[-1] - ta[0])
    if span <= 0:
        return None
    return float(ka[1:].sum()) / span


def window_rates(t: ArrayLike, k: ArrayLike, window: int | None = None) -> Windows:
    """Rates over token-count windows of the piecewise-linear cumulative-token curve.

    W defaults to max(32, N // 20) for N decode tokens; the trailing partial window is dropped.
    Raises ValueError when fewer than 8 windows fit (with the default W: N < 256), which callers
    report as "n/a".
    """
    ta, ka = _trace(t, k)
    c = _cumulative(ka) if ka.size else np.zeros(0, dtype=np.int64)
    n = int(c[-1]) if c.size else 0
    if window is None:
        w = max(MIN_WINDOW_TOKENS, n // 20)
    else:
        w = int(window)
        if w < 1:
            raise ValueError(f"window must be >= 1 token, got {window}")
    j = n // w
    if j < MIN_WINDOWS:
        raise ValueError(
            f"too short for drift: {n} decode tokens give {j} windows of {w} tokens, need >= {MIN_WINDOWS} "
            f"(N >= {MIN_WINDOWS * w} decode tokens; {MIN_DECODE_TOKENS} with the default window)"
        )
    # Interpolating time at token boundaries spreads a k-token chunk over the gap before it,
    # so multi-token chunks do not quantise the window rates.
    edges = np.arange(j + 1, dtype=float) * w
    tb = np.interp(edges, c, ta)
    d = np.diff(tb)
    if not np.any(d > 0):
        raise ValueError("every window has zero duration: the timestamps do not advance")
    # A window that a burst delivered in one read (one timestamp) took no measurable time: it gets a rate far
    # above the rest (a burst, named by find_bursts) rather than making the whole stream n/a.
    d = np.maximum(d, 1e-6 * float(np.median(d[d > 0])))
    rates = w / d
    centers = (np.arange(j) + 0.5) * w
    return Windows(
        window_tokens=w,
        rates=rates.tolist(),
        bounds_s=tb.tolist(),
        centers=centers.tolist(),
        decode_tokens=n,
    )


def drift(windows: Windows, q: float = 0.25, trace: tuple[ArrayLike, ArrayLike] | None = None) -> Drift:
    """Early/late rates, their ratio, a Theil-Sen trend (90 % CI) and a one-sided Mann-Kendall p.

    Early = the first ceil(q * J) windows (at least 3), late = as many from the end. Given the stream's
    ``trace`` (t, k), each group's rate is its tokens over its whole time span (``group_rates``), else the
    windows' tokens over their summed durations.
    """
    if not 0 < q <= 0.5:
        raise ValueError(f"q must be in (0, 0.5], got {q}")
    r = np.asarray(windows.rates, dtype=float)
    x = np.asarray(windows.centers, dtype=float)
    nwin = r.size
    m = max(3, math.ceil(q * nwin))
    if 2 * m > nwin:
        raise ValueError(f"{nwin} windows cannot hold {m} early and {m} late windows")
    # Tokens over the group's span, not a median of window rates: a stall followed by a catch-up (a late
    # wake-up, a buffering proxy) makes one slow and one fast window, which move a median of 3-5 windows by
    # tens of percent but leave the span unchanged.
    w = windows.window_tokens
    if trace is not None:
        early, late = group_rates(*trace, m * w, (nwin - m) * w)
    else:
        early, late = m * w / float((w / r[:m]).sum()), m * w / float((w / r[-m:]).sum())
    ratio = late / early
    span = float(x[-1] - x[0])
    ts = scipy.stats.theilslopes(np.log(r), x, alpha=0.90)
    lo, hi = sorted((float(np.expm1(ts.low_slope * span)), float(np.expm1(ts.high_slope * span))))
    # kendalltau against a strictly increasing index is the Mann-Kendall test; all-equal rates give NaN
    # (no evidence of a trend), reported as p = 1 so results stay plain JSON.
    mk = float(scipy.stats.kendalltau(x, r, alternative="less").pvalue)
    return Drift(
        early_tps=early,
        late_tps=late,
        ratio=ratio,
        drift=1.0 - ratio,
        trend_rel=float(np.expm1(ts.slope * span)),
        trend_ci=[lo, hi],
        mk_p=1.0 if math.isnan(mk) else mk,
        n_windows=nwin,
        edge_windows=m,
    )


#: A gap is a stall above STALL_FACTOR times the stream's pace (its step gap, or its per-token pace times the
#: chunk's tokens); chunks within 1 / STALL_FACTOR of the step gap of each other are one delivery.
STALL_FACTOR = 8.0
#: A burst is one delivery of at least this many median deliveries' tokens ("many steps at once"): as many as
#: a stall's gap holds steps. Two or three steps together are a busy client's (or server's) late read.
BURST_CHUNKS = 8
#: Chunks on each side of a stall whose pace says how long its delivery's tokens should have taken.
NEAR = 32


def _pace(ta: np.ndarray, ka: np.ndarray, factor: float) -> tuple[np.ndarray, float, float]:
    """(gaps before each chunk after the first, the step gap, seconds per decode token).

    The step gap is the median of the gaps that are not near-simultaneous (above 1 / ``factor`` of the mean
    gap): a server that sends each token of a step as its own event still paces its steps by it."""
    gaps = np.diff(ta)
    span = float(ta[-1] - ta[0])
    mean = span / gaps.size
    steps = gaps[gaps > mean / factor]
    step_gap = float(np.median(steps)) if steps.size else mean
    return gaps, step_gap, span / float(ka[1:].sum())


def _deliveries(gaps: np.ndarray, step_gap: float, factor: float) -> list[tuple[int, int]]:
    """Chunk index ranges [a, b] (>= 1) that arrived together: each chunk after a within ``step_gap / factor``
    of the one before. The first decode chunk starts a delivery of its own (TTFT's chunk is not merged)."""
    out: list[tuple[int, int]] = []
    for i in range(1, gaps.size + 1):  # chunk i arrived gaps[i - 1] after chunk i - 1
        if out and i > 1 and gaps[i - 1] < step_gap / factor:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def find_stalls(t: ArrayLike, k: ArrayLike, min_gap_s: float = 0.0, factor: float = STALL_FACTOR) -> list[Stall]:
    """Gaps before a chunk longer than ``factor`` times the stream's pace: its step gap, or its per-token pace
    times the chunk's tokens (a k-token chunk legitimately waits ~k token times).

    The limit scales with the step time (and so with a simulator's speed); ``min_gap_s`` adds an absolute
    floor where one is wanted. Stalls are reported, never gated on as drift (``find_pauses``).
    """
    ta, ka = _trace(t, k)
    if ka.size < 3 or ta[-1] <= ta[0]:
        return []
    gaps, step_gap, per_token = _pace(ta, ka, factor)
    limit = np.maximum(min_gap_s, factor * np.maximum(step_gap, per_token * ka[1:]))
    c = _cumulative(ka)
    idx = np.flatnonzero(gaps > limit)
    return [Stall(at_token=int(c[i]), gap_s=float(gaps[i])) for i in idx]


def find_bursts(t: ArrayLike, k: ArrayLike, factor: float = STALL_FACTOR) -> list[Burst]:
    """Deliveries of many steps' tokens at once: chunks arriving together (within 1 / ``factor`` of the step
    gap) that hold >= BURST_CHUNKS median deliveries' tokens.

    A burst is what a late wake-up's catch-up or a buffering proxy delivers; its tokens are shown as a
    burst, never as a speed (the group rates take them over the time they belong to).
    """
    ta, ka = _trace(t, k)
    if ka.size < 3 or ta[-1] <= ta[0]:
        return []
    gaps, step_gap, _ = _pace(ta, ka, factor)
    runs = _deliveries(gaps, step_gap, factor)
    sizes = np.array([ka[a:b + 1].sum() for a, b in runs])
    least = BURST_CHUNKS * float(np.median(sizes))
    c = _cumulative(ka)
    return [Burst(at_token=int(c[a - 1]), tokens=int(n), span_s=float(ta[b] - ta[a]))
            for (a, b), n in zip(runs, sizes, strict=True) if n >= least]


def find_pauses(t: ArrayLike, k: ArrayLike, factor: float = STALL_FACTOR) -> list[Pause]:
    """Time each stall cost: from the chunk before it to the end of the delivery it starts, less the time that
    delivery's tokens take at the stream's pace; none where a burst caught up."""
    ta, ka = _trace(t, k)
    if ka.size < 3 or ta[-1] <= ta[0]:
        return []
    gaps, step_gap, per_token = _pace(ta, ka, factor)
    ends = dict(_deliveries(gaps, step_gap, factor))
    c = _cumulative(ka)
    out = []
    for s in find_stalls(ta, ka, factor=factor):
        i = int(np.searchsorted(c, s.at_token, side="right"))  # the delayed chunk
        j = ends.get(i, i)
        # The span runs to the chunk after the delivery, the first to arrive on time again: the step it ends
        # began inside the hold. What its tokens should have taken is the pace of NEAR chunks each side.
        j = min(j + 1, ka.size - 1)
        lo, hi = max(0, i - 1 - NEAR), min(ka.size - 1, j + NEAR)
        around = float(ta[i - 1] - ta[lo] + ta[hi] - ta[j]) / max(1, int(c[i - 1] - c[lo] + c[hi] - c[j]))
        due = (around if around > 0 else per_token) * float(ka[i:j + 1].sum())
        lost = float(ta[j] - ta[i - 1]) - due
        # Over n steps acceptance alone moves their time by about a third of a step times sqrt(n): within six
        # of those (and two steps), the burst caught up and what is left is that noise, not lost time.
        if lost > step_gap * max(2.0, 2.0 * math.sqrt(due / step_gap)):
            out.append(Pause(at_token=s.at_token, lost_s=lost))
    return out


def group_rates(t: ArrayLike, k: ArrayLike, early_tokens: int, late_from: int,
                factor: float = STALL_FACTOR) -> tuple[float, float]:
    """(early, late) rates: the decode tokens up to ``early_tokens`` and after ``late_from``, each over its time span
    less the time stalls lost in it (``find_pauses``).

    A group's edge never cuts a delivery: the early group runs to the end of the delivery that holds its last token,
    the late group from the chunk before the delivery that holds its first, so a stall and the burst that caught it
    up always fall in the same group and cancel.
    """
    ta, ka = _trace(t, k)
    gaps, step_gap, _ = _pace(ta, ka, factor)
    c = _cumulative(ka)
    start_of, end_of = {}, {}
    for a, b in _deliveries(gaps, step_gap, factor):
        for i in range(a, b + 1):
            start_of[i], end_of[i] = a, b
    e = end_of[int(np.searchsorted(c, early_tokens, side="left"))]  # first chunk with c >= early_tokens
    s = start_of[int(np.searchsorted(c, late_from, side="right"))] - 1  # the chunk before the first past it
    pauses = find_pauses(ta, ka, factor)
    lost_early = sum(p.lost_s for p in pauses if p.at_token < c[e])
    lost_late = sum(p.lost_s for p in pauses if p.at_token >= c[s])
    early_span, late_span = float(ta[e] - ta[0]), float(ta[-1] - ta[s])
    # a pause can shorten its group only so far: never to nothing
    early = float(c[e]) / max(early_span - lost_early, 1e-3 * early_span)
    late = float(c[-1] - c[s]) / max(late_span - lost_late, 1e-3 * late_span)
    return early, late


def _fmt_p(p: float) -> str:
    return f"{p:.2g}"


def drift_gate(
    drifts: Sequence[Drift],
    max_drift: float = 0.15,
    trend_p: float = 0.01,
    streams_p: float = 0.05,
) -> DriftVerdict:
    """Fail/warn on drift over one or more replicate streams.

    * 1 stream: fail iff drift > max_drift and MK p < trend_p; warn iff only the size holds.
    * 2-4 streams: fail iff the aggregate drift > max_drift and a majority (> k/2) of the streams
      have their own MK p < trend_p (p = that majority's largest MK p); warn iff only the size holds.
      With k = 1 this is exactly the single-stream rule.
    * >= 5 streams: fail iff the aggregate drift > max_drift and a one-sided Wilcoxon signed-rank
      test on log R against log(1 - max_drift) gives p < streams_p; warn iff only the size holds.

    The aggregate drift is 1 - exp(median log R) over the streams.
    """
    if not drifts:
        raise ValueError("drift_gate needs at least one stream")
    if not 0 < max_drift < 1:
        raise ValueError(f"max_drift must be in (0, 1), got {max_drift}")
    lr = np.log(np.array([d.ratio for d in drifts], dtype=float))
    n = lr.size
    agg = float(-np.expm1(np.median(lr)))
    big = agg > max_drift
    size = f"drift {agg:.2f} {'>' if big else '<='} {max_drift:.2f}"
    if n < MIN_STREAMS_WILCOXON:
        p, evident, rule, evidence = _trend_majority(drifts, trend_p)
    else:
        p, evident, rule, evidence = _wilcoxon_vs_limit(lr, max_drift, streams_p)
    failed = big and evident
    warn = big and not evident
    if failed:
        reason = f"{size} ({evidence})"
    elif warn:
        more = "more streams (repeat=)" if n >= MIN_STREAMS_WILCOXON else \
            f"more tokens or repeat={MIN_STREAMS_WILCOXON}"
        reason = f"{size} but not significant ({evidence}): inconclusive; {more} would decide it"
    else:
        reason = size
    return DriftVerdict(failed=failed, warn=warn, drift=agg, p=p, reason=reason, streams=n, rule=rule)


def _trend_majority(drifts: Sequence[Drift], trend_p: float) -> tuple[float, bool, str, str]:
    """(p, evident, rule, evidence): a majority of the streams must show their own trend."""
    # Too few streams for a rank test (min Wilcoxon p = 2**-k >= 1/16), so evidence comes from each
    # stream's own trend: a majority must show one. One stall cannot trip it (medians + MK both needed).
    n = len(drifts)
    need = n // 2 + 1
    p = float(np.sort([d.mk_p for d in drifts])[need - 1])
    if n == 1:
        return p, p < trend_p, "single", f"trend p={_fmt_p(p)}"
    nsig = sum(d.mk_p < trend_p for d in drifts)
    return p, p < trend_p, "majority", f"{n} streams, {nsig}/{n} with trend p < {trend_p:g}"


def _wilcoxon_vs_limit(lr: np.ndarray, max_drift: float, streams_p: float) -> tuple[float, bool, str, str]:
    """(p, evident, rule, evidence): a one-sided Wilcoxon test of the log ratios against the limit."""
    # Test against the limit itself, not against "no drift" (docs/statistics.md): H0 is then
    # "median drift <= max_drift", so a deploy within its budget fails with probability <= streams_p
    # however close to the limit it is, whereas the H0 "no drift" test plus a point estimate fails
    # ~50 % of deploys that sit just at the limit. The price is power near the limit (at k = 5 all
    # five streams must exceed it); clear drifts still fail, borderline ones WARN.
    diff = lr - math.log1p(-max_drift)
    p = 1.0 if np.all(diff == 0) else float(scipy.stats.wilcoxon(diff, alternative="less").pvalue)
    return p, p < streams_p, "wilcoxon", f"{lr.size} streams, Wilcoxon p={_fmt_p(p)} vs limit"


def split_log_change(early_a: float, late_a: float, early_b: float, late_b: float) -> tuple[float, float]:
    """Shares of log(late_rate / early_rate) due to a and to b, for rate = a / b.

    E.g. a = tokens per step (acceptance), b = step time. The shares sum to 1 when the rate changed;
    a share can be negative or > 1 when the parts move in opposite directions. When the rate did not
    change (|log ratio| < 1e-12) there is nothing to attribute and (0.0, 0.0) is returned.
    """
    vals = (early_a, late_a, early_b, late_b)
    if not all(math.isfinite(v) and v > 0 for v in vals):
        raise ValueError(f"split_log_change needs finite positive values, got {vals}")
    la = math.log(late_a / early_a)
    lb = -math.log(late_b / early_b)  # a longer step lowers the rate
    total = la + lb
    if abs(total) < 1e-12:
        return 0.0, 0.0
    return la / total, lb / total
