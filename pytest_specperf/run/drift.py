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
    if np.any(d <= 0):
        raise ValueError("a window has zero duration: the timestamps do not advance")
    rates = w / d
    centers = (np.arange(j) + 0.5) * w
    return Windows(
        window_tokens=w,
        rates=rates.tolist(),
        bounds_s=tb.tolist(),
        centers=centers.tolist(),
        decode_tokens=n,
    )


def drift(windows: Windows, q: float = 0.25) -> Drift:
    """Early/late medians, their ratio, a Theil-Sen trend (90 % CI) and a one-sided Mann-Kendall p.

    Early = the first ceil(q * J) windows (at least 3), late = as many from the end.
    """
    if not 0 < q <= 0.5:
        raise ValueError(f"q must be in (0, 0.5], got {q}")
    r = np.asarray(windows.rates, dtype=float)
    x = np.asarray(windows.centers, dtype=float)
    nwin = r.size
    m = max(3, math.ceil(q * nwin))
    if 2 * m > nwin:
        raise ValueError(f"{nwin} windows cannot hold {m} early and {m} late windows")
    # Medians, not pooled rates: one 0.3-1 s stall moves a pooled late rate by 6-20 %.
    early = float(np.median(r[:m]))
    late = float(np.median(r[-m:]))
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


def find_stalls(t: ArrayLike, k: ArrayLike, min_gap_s: float = 0.25, factor: float = 8.0) -> list[Stall]:
    """Gaps before a chunk longer than max(min_gap_s, factor * median per-token gap * tokens in it).

    Stalls are reported, never gated on as drift: the window medians absorb them.
    """
    ta, ka = _trace(t, k)
    if ka.size < 2:
        return []
    gaps = np.diff(ta)
    per_token = gaps / ka[1:]  # a k-token chunk legitimately waits ~k token times
    limit = np.maximum(min_gap_s, factor * float(np.median(per_token)) * ka[1:])
    c = _cumulative(ka)
    idx = np.flatnonzero(gaps > limit)
    return [Stall(at_token=int(c[i]), gap_s=float(gaps[i])) for i in idx]


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
