"""Regression gating across runs: per-trial values in log space, a three-outcome rule (docs/statistics.md).

Pure numpy/scipy; never imports pytest. The plugin wires it to ``--specperf-compare`` (baseline = a stored run,
"history mode") and to A/B mode (baseline = build A measured in the same session, ABBA order).

Public API
----------
``DIRECTIONS``
    metric -> ``"higher"`` or ``"lower"`` (which way is better). Only these metrics can be compared: they are
    positive, so they are analysed as logs. ``drift`` is not here: it is near zero and may be negative, and the
    within-run drift gate already judges it.
``trials(result, metric) -> list[float]``
    One value per trial: sustained -> ``streams[*][metric]`` (falls back to ``[result[metric]]``, e.g. for
    ``burst_tps``); two_point ``decode_tps`` -> ``samples_tps``; any other kind or metric -> ``[result[metric]]``.
    A ``ctx_sweep`` has no trials of its own (``[]``): expand it with ``sub_cases``.
``sub_cases(result) -> list[tuple[str, int | None, dict]]``
    ``(nodeid, ctx, case)``: one entry for an ordinary case (ctx None), one per point for a sweep (ctx = the
    asked ctx; the point gets ``kind`` and ``nodeid``), one per level for a load sweep (ctx None; the level
    gets ``kind`` "sustained", ``nodeid`` and ``users``, its concurrency). ``case_key(nodeid, ctx, users)`` is
    ``nodeid``, ``"nodeid@ctx=64"`` or ``"nodeid@users=4"``; exports use the same key.
``compare_case(base, cand, *, direction, max_regression=0.05, alpha=0.01, metric="value", noise_floor=0.03,
decide_at=20, against="baseline") -> Comparison``
    The rule for one metric of one case, below. ``Comparison.as_dict()`` is JSON-able.
``compare_runs(base_run, cand_results, *, max_regression=0.10, metrics=("decode_tps", "ttft_s"), ...)``
    -> ``list[CaseComparison]``. ``base_run`` is a ``storage.Run`` (anything with ``.results``) or a list of result
    dicts. Cases are matched by nodeid (and ctx for sweep points); several results with one nodeid on a side are
    pooled (so A/B runs may record one result per trial). Cases only in the candidate are ``new``, only in the
    baseline ``missing``; an errored side or a metric without values gives ``skipped``; none of these raise.
    Zero is a value of a higher-is-better metric (attainment, goodput, ``max_rps``), the worst one: a median
    that falls to 0 is ``regressed`` (no ratio or interval exists for it, so ``comparison`` is None).
    BH q-values over all the p-values are attached (``CaseComparison.q``), for reports only.
``compare_ab(results_a, results_b, *, max_regression=0.05, ...)``
    The same with A as the baseline; reasons say "vs A".
``ab_order(n) -> list[str]``
    ABBA interleaving, n trials per arm: ``["A", "B", "B", "A", "A", "B", ...]``.
``gate(comparisons, inconclusive="warn") -> tuple[list, list]``
    (failing, warning) comparisons for ``--specperf-inconclusive=pass|warn|fail``.
``trials_needed(noise, max_regression)``, ``min_detectable(noise, n_base, n_cand)``
    The repetitions formula and the minimum detectable effect (docs/statistics.md).

The rule (``compare_case``)
---------------------------
Logs of the values, negated when lower is better, so "worse" is always "lower" and the threshold is symmetric in
log space (5 % = a factor 0.95 worse, or 1/0.95 better).

* ``effect = exp(median log cand - median log base) - 1`` in that better-is-positive space: **negative = worse**
  whatever the metric's direction (a TTFT going 0.20 -> 0.25 s is ``effect = -0.20``). ``change`` is the plain
  relative change of the metric (``+0.25`` there); reasons print ``change``.
* ``ci``: Welch t CI of the mean log difference at ``1 - 2*alpha`` two-sided (98 %, i.e. 99 % one-sided).
* ``p``: one-sided Mann-Whitney U in the worse direction, exact for small n. ``None`` when MWU cannot reach alpha
  at these sizes (its smallest p is ``1/C(n+m, n)``: n = m <= 4 at alpha 0.01).
* **regressed** iff significant (``p < alpha``; without p: the CI lies wholly below 0, i.e. the Welch t-test at the
  same one-sided level) **and** ``effect <= -max_regression``.
* **improved**: the mirror image (significant the other way and better by a factor ``1/(1 - max_regression)``).
* **passed** iff the CI's worse bound is above ``-max_regression`` (no regression beyond the threshold, shown).
* **inconclusive** otherwise; when the noise is too high for the threshold (``mde > max_regression``) the reason
  gives the minimum detectable effect and the trials per side needed. ``noise`` behind ``mde`` combines both
  sides' spread (robust 1.4826 MAD of the logs from 5 trials, sd below that), so a noisy candidate shows.
  At ``decide_at`` (20) trials per side an inconclusive case is decided on the point estimate, so the 5 -> 10 -> 20
  escalation (docs/statistics.md) ends.

Few trials: with one trial on one side, the CI is the prediction interval from the other side's spread (pooled
t, ``n - 1`` degrees of freedom). With one trial per side, or no spread at all, nothing measures the noise, so an
assumed per-trial noise ``noise_floor`` (3 % log-sd: a within-job CV of ~2 % and a between-job offset of ~3 %
give 2-3.6 %) stands in, with ``z_{1-alpha}``: at 5 % threshold a single-trial comparison says regressed only beyond
about -9.4 %, and cannot say passed unless the candidate is ~5 % better, so repeat=1 catches big regressions and
is otherwise inconclusive, saying how many trials would settle it. The reason says which of these was used.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import scipy  # scipy.stats loads on first use: 0.6 s of CPU a run without statistics never spends

#: which way is better, per metric; all are positive quantities, compared as logs.
DIRECTIONS: dict[str, str] = {
    "decode_tps": "higher",
    "client_tps": "higher",
    "early_tps": "higher",
    "late_tps": "higher",
    "burst_tps": "higher",
    "tokens_per_chunk": "higher",
    "total_tps": "higher",  # load cases: aggregate output tok/s of all users
    "attainment": "higher",  # rate cases: share of requests meeting the slo
    "goodput_rps": "higher",  # rate cases: requests meeting the slo per second
    "max_rps": "higher",  # capacity cases: the highest rate that keeps the attainment target
    "ttft_p90_s": "lower",
    "tpot_p90_ms": "lower",
    "e2e_p90_s": "lower",
    "ttft_s": "lower",
    "total_s": "lower",
}

ALPHA = 0.01
POWER = 0.8
#: 5 % with interleaved A/B in one job, 10 % against a stored run (the per-job offset; docs/statistics.md).
AB_MAX_REGRESSION = 0.05
HISTORY_MAX_REGRESSION = 0.10
#: assumed per-trial log-sd when the data cannot measure it (one trial per side, or no spread).
NOISE_FLOOR = 0.03
#: trials per side at which an inconclusive comparison is decided on the point estimate (5 -> 10 -> 20 ends).
DECIDE_AT = 20
_NO_SPREAD = 1e-9

VERDICTS = ("passed", "regressed", "improved", "inconclusive")
CASE_VERDICTS = (*VERDICTS, "new", "missing", "skipped")


@dataclass(frozen=True)
class Comparison:
    """One metric of one case, candidate vs baseline. Fractions throughout (0.05 = 5 %)."""

    metric: str
    direction: str  # "higher" | "lower" is better
    verdict: str  # passed | regressed | improved | inconclusive
    effect: float  # relative change, signed so that negative = worse (log-symmetric: see module docstring)
    ci: list[float]  # [low, high] of effect
    change: float  # plain relative change of the metric's median, cand / base - 1
    change_ci: list[float]  # [low, high] of change
    p: float | None  # one-sided MWU in the worse direction; None when MWU cannot reach alpha at these sizes
    n_base: int
    n_cand: int
    mde: float  # smallest worsening detected with power 0.8 at this noise and n (as a positive fraction)
    noise: float  # per-trial log-sd (~CV) behind mde: both sides' robust spread, weighted by n; or the floor
    noise_source: str  # "measured" | "floor"
    trials_needed: int  # trials per side to detect the threshold at this noise
    threshold: float  # max_regression
    method: str  # "mwu" | "welch" | "prediction" | "noise-floor", plus "+estimate" when decided at decide_at
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return asdict(self)


@dataclass(frozen=True)
class CaseComparison:
    """A case (or sweep point) and metric matched between baseline and candidate, or left unmatched."""

    nodeid: str
    ctx: int | None  # sweep point's asked ctx; None for ordinary cases
    metric: str | None  # None for new / missing / errored cases
    verdict: str  # one of CASE_VERDICTS
    reason: str
    comparison: Comparison | None = None
    q: float | None = None  # Benjamini-Hochberg q-value over the run's p-values (report only)
    users: int | None = None  # a load sweep's level (concurrency); None for other cases

    @property
    def key(self) -> str:
        """``nodeid``, ``nodeid@ctx=N`` or ``nodeid@users=N``."""
        return case_key(self.nodeid, self.ctx, self.users)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data, with ``key``."""
        return {**asdict(self), "key": self.key}


def case_key(nodeid: str, ctx: int | None, users: int | None = None) -> str:
    """The name of a case, sweep point or load level in comparisons and exports."""
    if users is not None:
        return f"{nodeid}@users={users}"
    return nodeid if ctx is None else f"{nodeid}@ctx={ctx}"


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _values(items: Iterable[Any]) -> list[float]:
    return [x for x in (_num(v) for v in items) if x is not None]


def trials(result: dict[str, Any], metric: str) -> list[float]:
    """Per-trial finite values of ``metric`` (see the module docstring); [] when there are none."""
    kind = result.get("kind", "")
    if kind == "ctx_sweep":
        return []
    if kind == "sustained":
        streams = [s for s in result.get("streams") or [] if isinstance(s, dict) and metric in s]
        if streams:
            return _values(s[metric] for s in streams)
    if kind == "two_point" and metric == "decode_tps" and result.get("samples_tps"):
        return _values(result["samples_tps"])
    return _values([result.get(metric)])


def sub_cases(result: dict[str, Any]) -> list[tuple[str, int | None, dict[str, Any]]]:
    """``(nodeid, ctx, case)`` per comparable unit: the case itself, or each point of a sweep."""
    nodeid = str(result.get("nodeid", ""))
    if result.get("kind") == "load_sweep":
        return [(nodeid, None, {**lv, "kind": "sustained", "nodeid": nodeid, "users": lv.get("concurrency")})
                for lv in result.get("levels") or [] if isinstance(lv, dict)]
    if result.get("kind") != "ctx_sweep":
        return [(nodeid, None, result)]
    out: list[tuple[str, int | None, dict[str, Any]]] = []
    for p in result.get("points") or []:
        if not isinstance(p, dict):
            continue
        kind = p.get("kind") or ("sustained" if "streams" in p else "two_point")
        ctx = p.get("ctx")
        out.append((nodeid, int(ctx) if isinstance(ctx, int | float) else None, {**p, "kind": kind, "nodeid": nodeid}))
    return out


@functools.lru_cache(maxsize=64)
def _z(q: float) -> float:
    return float(scipy.stats.norm.ppf(q))


def mwu_min_p(n: int, m: int) -> float:
    """The smallest one-sided p an exact Mann-Whitney U can give with n and m trials."""
    return 1.0 / math.comb(n + m, min(n, m))


def min_detectable(noise: float, n_base: int, n_cand: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest worsening (positive fraction) detected with ``power``: ``(z_a + z_b) sd sqrt(1/n + 1/m) sqrt(pi/3)``.

    The ``pi/3`` is the MWU's efficiency relative to the t-test (its asymptotic relative efficiency is 3/pi).
    """
    log_mde = (_z(1 - alpha) + _z(power)) * noise * math.sqrt(1 / n_base + 1 / n_cand) * math.sqrt(math.pi / 3)
    return -math.expm1(-log_mde)


def trials_needed(noise: float, max_regression: float, *, alpha: float = ALPHA, power: float = POWER) -> int:
    """Trials per side to detect ``max_regression``: ``max(n_min, ceil((pi/3) 2 ((z_a + z_b) sd / delta)^2))``.

    ``n_min`` is the fewest trials per side at which MWU can reach ``alpha`` (5 at 0.01).
    """
    n_min = next(n for n in range(1, 100) if mwu_min_p(n, n) < alpha)
    # delta as a plain fraction, as in docs/statistics.md's table (-log(1 - delta) would be ~2.5 % larger: fewer trials)
    n = (math.pi / 3) * 2 * ((_z(1 - alpha) + _z(power)) * noise / max_regression) ** 2
    return max(n_min, math.ceil(n))


def _side_sd(x: np.ndarray) -> float | None:
    # Robust CV (1.4826 MAD of the logs) once there are enough trials for a MAD; sd below that.
    if x.size >= 5:
        s = float(scipy.stats.median_abs_deviation(x, scale="normal"))
        if s > _NO_SPREAD:
            return s
    if x.size >= 2:
        s = float(x.std(ddof=1))
        if s > _NO_SPREAD:
            return s
    return None


def _noise(lb: np.ndarray, lc: np.ndarray, floor: float) -> tuple[float, str]:
    """Effective per-trial log-sd ``s`` with ``s^2 (1/n + 1/m) = s_b^2/n + s_c^2/m``: each side's own noise counts,
    so a noisy candidate is not hidden behind a quiet baseline."""
    sb, sc = _side_sd(lb), _side_sd(lc)
    if sb is None and sc is None:
        return floor, "floor"
    sb = sc if sb is None else sb
    sc = sb if sc is None else sc
    nb, nc = lb.size, lc.size
    return math.sqrt((sb**2 / nb + sc**2 / nc) / (1 / nb + 1 / nc)), "measured"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _log_trials(base: Sequence[float], cand: Sequence[float], direction: str) -> tuple[float, np.ndarray, np.ndarray]:
    """``(sign, log base, log cand)``, negated when lower is better so that worse is always lower."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    if b.size == 0 or c.size == 0:
        raise ValueError("compare_case needs at least one trial on each side")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(c)) and b.min() > 0 and c.min() > 0):
        raise ValueError("trial values must be finite and positive (they are compared as logs)")
    sign = 1.0 if direction == "higher" else -1.0
    return sign, sign * np.log(b), sign * np.log(c)


def _interval(lb: np.ndarray, lc: np.ndarray, alpha: float, noise_floor: float) -> tuple[float, float, str, str]:
    """``(lo, hi, method, how)``: the ``1 - 2 alpha`` interval of the log difference, from Welch's t, a prediction
    interval (one trial on one side) or the assumed noise floor (nothing measures the noise)."""
    nb, nc = lb.size, lc.size
    conf = 1 - 2 * alpha
    # Below 1e-9 log-sd (rounding of equal values) there is no spread to measure; scipy would warn of cancellation.
    sd_b = float(lb.std(ddof=1)) if nb >= 2 else 0.0
    sd_c = float(lc.std(ddof=1)) if nc >= 2 else 0.0
    sd_b, sd_c = (sd_b if sd_b > _NO_SPREAD else 0.0), (sd_c if sd_c > _NO_SPREAD else 0.0)
    if nb >= 2 and nc >= 2 and (sd_b > 0 or sd_c > 0):
        lo, hi = scipy.stats.ttest_ind(lc, lb, equal_var=False).confidence_interval(conf)
        method, how = "welch", f"{nb} vs {nc} trials"
    elif min(nb, nc) == 1 and max(sd_b, sd_c) > 0:
        # One trial on one side: a prediction interval from the other side's spread (pooled t, n - 1 dof).
        lo, hi = scipy.stats.ttest_ind(lc, lb, equal_var=True).confidence_interval(conf)
        method, how = "prediction", f"{nb} vs {nc} trials, noise from the {'baseline' if sd_b > 0 else 'candidate'}"
    else:
        half = _z(1 - alpha) * noise_floor * math.sqrt(1 / nb + 1 / nc)
        mid = float(lc.mean() - lb.mean())
        lo, hi = mid - half, mid + half
        what = "1 trial per side" if nb == nc == 1 else f"{nb} vs {nc} trials without spread"
        method, how = "noise-floor", f"{what}: no noise estimate, assumed {noise_floor:.0%} per trial"
    return float(lo), float(hi), method, how


def _rank_test(lb: np.ndarray, lc: np.ndarray, *, large_gain: bool) -> tuple[float, float | None]:
    """One-sided MWU p-values ``(worse, better)``; the better tail only for a large gain (it is slow)."""
    p = float(scipy.stats.mannwhitneyu(lc, lb, alternative="less").pvalue)
    p_better = float(scipy.stats.mannwhitneyu(lc, lb, alternative="greater").pvalue) if large_gain else None
    return p, p_better


def _verdict(d: float, lo: float, *, worse_sig: bool, better_sig: bool, delta: float, max_regression: float,
             n_min: int, decide_at: int | None, mde: float, need: int) -> tuple[str, str, bool]:
    """``(verdict, tail of the reason, decided on the point estimate)`` for log difference ``d``, CI low ``lo``
    and the threshold ``delta`` in log space."""
    thr = f"{max_regression:.0%}"
    if worse_sig and d <= -delta:
        return "regressed", f"regressed beyond {thr}", False
    if better_sig and d >= delta:
        return "improved", f"improved beyond {thr}", False
    if lo > -delta:
        tail = f"within {thr}" if abs(d) < delta else f"no regression beyond {thr} (better, but not significantly)"
        return "passed", tail, False
    if decide_at is not None and n_min >= decide_at:
        verdict = "regressed" if d <= -delta else "passed"
        return verdict, f"{verdict} on the point estimate after {n_min} trials per side (threshold {thr})", True
    if d <= -delta:
        tail = f"inconclusive: worse than {thr} but not significant"
    else:
        tail = f"inconclusive: cannot show it is within {thr}"
    if mde > max_regression:
        tail += f" (detectable at this noise: {mde:.1%}; need {need} trials per side)"
    return "inconclusive", tail, False


def compare_case(base: Sequence[float], cand: Sequence[float], *, direction: str, max_regression: float = 0.05,
                 alpha: float = ALPHA, metric: str = "value", noise_floor: float = NOISE_FLOOR,
                 decide_at: int | None = DECIDE_AT, against: str = "baseline") -> Comparison:
    """Candidate trials vs baseline trials for one metric (the rule is in the module docstring).

    Raises ValueError for an empty side, a non-positive value or an unknown direction (caller errors, not data).
    """
    sign, lb, lc = _log_trials(base, cand, direction)
    nb, nc = lb.size, lc.size
    d = float(np.median(lc) - np.median(lb))
    lo, hi, method, how = _interval(lb, lc, alpha, noise_floor)
    delta = -math.log1p(-max_regression)  # threshold in log space
    p: float | None = None
    p_better: float | None = None
    if mwu_min_p(nb, nc) < alpha:
        p, p_better = _rank_test(lb, lc, large_gain=d >= delta)
        method, how = "mwu", f"{nb} vs {nc} trials"
        worse_sig, better_sig = p < alpha, p_better is not None and p_better < alpha
    else:
        if method == "welch":
            how += ": too few for the rank test, t-test"
        worse_sig, better_sig = hi < 0, lo > 0

    noise, source = _noise(lb, lc, noise_floor)
    mde = min_detectable(noise, nb, nc, alpha=alpha)
    need = trials_needed(noise, max_regression, alpha=alpha)
    verdict, tail, estimated = _verdict(d, lo, worse_sig=worse_sig, better_sig=better_sig, delta=delta,
                                        max_regression=max_regression, n_min=min(nb, nc), decide_at=decide_at,
                                        mde=mde, need=need)
    if estimated:
        method += "+estimate"
    change = math.expm1(sign * d)
    ch = sorted((math.expm1(sign * lo), math.expm1(sign * hi)))
    if method.startswith("mwu"):
        # The p of the tail that decided: worse for a regression or a pass, better for an improvement.
        shown, side = (p_better, "better") if verdict == "improved" else (p, "worse")
        how = f"p({side})={shown:.3g}, {how}"
    reason = f"{metric} {_pct(change)} [{_pct(ch[0])}, {_pct(ch[1])}] vs {against} ({how}): {tail}"
    return Comparison(metric=metric, direction=direction, verdict=verdict, effect=math.expm1(d),
                      ci=[math.expm1(lo), math.expm1(hi)], change=change, change_ci=ch, p=p, n_base=nb, n_cand=nc,
                      mde=mde, noise=noise, noise_source=source, trials_needed=need, threshold=max_regression,
                      method=method, reason=reason)


@dataclass
class _Entry:
    cases: list[dict[str, Any]] = field(default_factory=list)


_Key = tuple[str, int | None, int | None]  # nodeid, sweep ctx, load level


def _index(results: Iterable[dict[str, Any]]) -> tuple[dict[_Key, _Entry], dict[str, str]]:
    """Sub-cases by (nodeid, ctx, users), pooling repeats of one nodeid; errored nodeids with their reasons apart."""
    idx: dict[_Key, _Entry] = {}
    errors: dict[str, str] = {}
    for r in results:
        if not isinstance(r, dict):
            continue
        if r.get("verdict") == "error":
            errors.setdefault(str(r.get("nodeid", "")), str(r.get("reason", "")) or "error")
            continue
        for nodeid, ctx, case in sub_cases(r):
            idx.setdefault((nodeid, ctx, case.get("users")), _Entry()).cases.append(case)
    return idx, errors


def _measured(entry: _Entry, metric: str) -> list[float]:
    """The side's values of ``metric``. Zero is a measurement of a higher-is-better metric (no request met the
    SLO, no probe passed: the worst value there is); a latency of zero or less is not a measurement."""
    keep_zero = DIRECTIONS[metric] == "higher"
    return [x for case in entry.cases for x in trials(case, metric) if x > 0 or (keep_zero and x == 0)]


def _compare_metrics(key: _Key, base: _Entry, cand: _Entry, metrics: Sequence[str],
                     compare: Callable[..., Comparison]) -> list[CaseComparison]:
    """Each metric of a case present on both sides; skipped where only one side has values."""
    nodeid, ctx, users = key
    at = "" if users is None else f"at {users} user{'' if users == 1 else 's'}: "
    out: list[CaseComparison] = []
    for m in metrics:
        tb, tc = _measured(base, m), _measured(cand, m)
        if not tb and not tc:
            continue  # the metric does not apply to this kind (ttft_s of a two-point case)
        if not tb or not tc:
            side = "baseline" if not tb else "candidate"
            out.append(CaseComparison(nodeid, ctx, m, "skipped", f"{m}: no values in the {side}", users=users))
            continue
        if 0.0 in tb or 0.0 in tc:
            verdict, reason, c = _with_zeros(tb, tc, m, compare)
        else:
            c = compare(tb, tc, direction=DIRECTIONS[m], metric=m)
            verdict, reason = c.verdict, c.reason
        out.append(CaseComparison(nodeid, ctx, m, verdict, at + reason,
                                  None if c is None else replace(c, reason=at + c.reason), users=users))
    return out


def _with_zeros(tb: list[float], tc: list[float], metric: str, compare: Callable[..., Comparison]
                ) -> tuple[str, str, Comparison | None]:
    """(verdict, reason, comparison) of a higher-is-better metric with zero trials on a side.

    Zero has no logarithm, so no ratio and no interval exist: a median that is zero on one side and not on
    the other is a fall to (or a rise from) the worst value, decided without one. Where both medians are
    positive, the zero trials take the lowest ranks (half the smallest positive value) and the rule runs.
    """
    mb, mc = float(np.median(tb)), float(np.median(tc))
    zeros = f"{tc.count(0.0)} of {len(tc)} trials 0, baseline {tb.count(0.0)} of {len(tb)}"
    if mc == 0 and mb > 0:
        return "regressed", f"{metric} fell to 0 from {mb:.3g} ({zeros}): the worst value it has", None
    if mb == 0 and mc > 0:
        return "improved", f"{metric} rose from 0 to {mc:.3g} ({zeros})", None
    if mb == 0 and mc == 0:
        return "passed", f"{metric} 0 in both ({zeros}): no worse than the baseline", None
    low = min(x for x in (*tb, *tc) if x > 0) / 2
    c = compare([x or low for x in tb], [x or low for x in tc], direction="higher", metric=metric)
    c = replace(c, reason=f"{c.reason} ({zeros}, ranked lowest)")
    return c.verdict, c.reason, c


def _baseline_only(base: dict[_Key, _Entry], cand: dict[_Key, _Entry],
                   cand_err: dict[str, str]) -> list[CaseComparison]:
    """Baseline sub-cases the candidate lacks: skipped when it errored, else missing."""
    out: list[CaseComparison] = []
    cand_nodeids = {n for n, _, _ in cand}
    for (nodeid, ctx, users) in base:
        if (nodeid, ctx, users) in cand:
            continue
        if nodeid in cand_err:
            out.append(CaseComparison(nodeid, ctx, None, "skipped", f"candidate errored: {cand_err[nodeid]}",
                                      users=users))
        elif nodeid not in cand_nodeids:
            out.append(CaseComparison(nodeid, ctx, None, "missing", "not in this run", users=users))
        else:  # a sweep point or load level the candidate did not measure
            what = "this ctx" if users is None else f"{users} user{'' if users == 1 else 's'}"
            out.append(CaseComparison(nodeid, ctx, None, "missing", f"{what} is not in this run", users=users))
    return out


def _errored_only(base: dict[_Key, _Entry], base_err: dict[str, str], cand: dict[_Key, _Entry],
                  cand_err: dict[str, str]) -> list[CaseComparison]:
    """Errored nodeids with no measured counterpart on the other side."""
    out: list[CaseComparison] = []
    base_nodeids = {n for n, _, _ in base}
    cand_nodeids = {n for n, _, _ in cand}
    for nodeid, why in cand_err.items():
        if nodeid not in base_nodeids:
            verdict = "skipped" if nodeid in base_err else "new"
            out.append(CaseComparison(nodeid, None, None, verdict, f"candidate errored: {why}"))
    for nodeid, why in base_err.items():
        if nodeid not in cand_nodeids and nodeid not in cand_err:
            out.append(CaseComparison(nodeid, None, None, "missing", f"not in this run (baseline errored: {why})"))
    return out


def compare_runs(base_run: Any, cand_results: Iterable[dict[str, Any]], *,
                 max_regression: float = HISTORY_MAX_REGRESSION, metrics: Sequence[str] = ("decode_tps", "ttft_s"),
                 alpha: float = ALPHA, noise_floor: float = NOISE_FLOOR, decide_at: int | None = DECIDE_AT,
                 against: str = "baseline", rule: Callable[..., Comparison] | None = None) -> list[CaseComparison]:
    """Match candidate cases to the baseline's by nodeid (and ctx) and compare each metric; see the module docstring.

    ``rule`` replaces ``compare_case`` (same arguments), e.g. the sequential test of repeat="auto".

    Order: candidate cases as they came (metrics in the given order), then baseline-only cases.
    Raises ValueError for a metric not in DIRECTIONS.
    """
    unknown = [m for m in metrics if m not in DIRECTIONS]
    if unknown:
        raise ValueError(f"cannot compare {', '.join(unknown)}: known metrics are {', '.join(DIRECTIONS)}")
    base_results = base_run.results if hasattr(base_run, "results") else base_run
    base, base_err = _index(base_results)
    cand, cand_err = _index(cand_results)
    compare = functools.partial(rule or compare_case, max_regression=max_regression, alpha=alpha,
                                noise_floor=noise_floor, decide_at=decide_at, against=against)
    out: list[CaseComparison] = []
    for (nodeid, ctx, users), entry in cand.items():
        if (nodeid, ctx, users) in base:
            out += _compare_metrics((nodeid, ctx, users), base[(nodeid, ctx, users)], entry, metrics, compare)
        elif nodeid in base_err:
            out.append(CaseComparison(nodeid, ctx, None, "skipped", f"baseline errored: {base_err[nodeid]}",
                                      users=users))
        else:
            out.append(CaseComparison(nodeid, ctx, None, "new", f"not in the {against}", users=users))
    return _with_q(out + _baseline_only(base, cand, cand_err) + _errored_only(base, base_err, cand, cand_err))


def _with_q(out: list[CaseComparison]) -> list[CaseComparison]:
    ps = [(i, cc.comparison.p) for i, cc in enumerate(out) if cc.comparison is not None and cc.comparison.p is not None]
    if not ps:
        return out
    qs = scipy.stats.false_discovery_control([p for _, p in ps], method="bh")
    for (i, _), q in zip(ps, qs, strict=True):
        cc = out[i]
        out[i] = replace(cc, q=float(q))
    return out


def compare_ab(results_a: Iterable[dict[str, Any]], results_b: Iterable[dict[str, Any]], *,
               max_regression: float = AB_MAX_REGRESSION, metrics: Sequence[str] = ("decode_tps", "ttft_s"),
               alpha: float = ALPHA, noise_floor: float = NOISE_FLOOR,
               decide_at: int | None = DECIDE_AT) -> list[CaseComparison]:
    """A/B in one session: B (candidate) against A (baseline), same rules as ``compare_runs``."""
    return compare_runs(list(results_a), results_b, max_regression=max_regression, metrics=metrics, alpha=alpha,
                        noise_floor=noise_floor, decide_at=decide_at, against="A")


def arm_order(names: Sequence[str], n: int) -> list[str]:
    """Interleaving of any number of arms, ``n`` trials each: rounds forward then backward (ABC CBA ABC ...), so
    a drift over the session hits every arm alike; with two arms it is ABBA."""
    if n < 0:
        raise ValueError("n must be >= 0")
    return [x for i in range(n) for x in (list(names) if i % 2 == 0 else list(reversed(names)))]


def ab_order(n: int) -> list[str]:
    """ABBA interleaving with ``n`` trials per arm: A/B is the two-arm case of ``arm_order``."""
    return arm_order(("A", "B"), n)


def gate(comparisons: Iterable[CaseComparison], inconclusive: str = "warn"
         ) -> tuple[list[CaseComparison], list[CaseComparison]]:
    """(failing, warning) comparisons: regressions fail; inconclusive ones follow ``pass | warn | fail``."""
    if inconclusive not in ("pass", "warn", "fail"):
        raise ValueError(f"inconclusive must be pass, warn or fail, not {inconclusive!r}")
    fail, warn = [], []
    for cc in comparisons:
        if cc.verdict == "regressed" or (cc.verdict == "inconclusive" and inconclusive == "fail"):
            fail.append(cc)
        elif cc.verdict == "inconclusive" and inconclusive == "warn":
            warn.append(cc)
    return fail, warn
