"""``repeat="auto"``: add trials until a comparison is decided (a sequential probability ratio test).

A fixed number of trials is either too many (a clear pass or a clear regression is plain after
a few) or too few (a borderline one). Wald's sequential probability ratio test (SPRT) stops as
soon as the trials so far are enough, and among all tests with the same error rates it needs the
fewest trials on average at the two hypotheses. docs/sequential.md explains the choice.

The two hypotheses sit symmetrically around the case's threshold ``max_regression`` (in log
space, where "worse" is always "lower", as in ``compare``):

* H0, nothing changed: ``mu = 0``;
* H1, a regression of twice the threshold: ``mu = 2 log(1 - max_regression)`` (-9.75 % at 5 %).

Their likelihood ratio is 1 exactly at the threshold, so a change at the threshold is called a
regression half of the time, as the fixed rule's point estimate does. After each trial the log
likelihood ratio of the difference of (winsorized) log means is compared with Wald's bounds ``log((1
- beta) / alpha)`` (regressed) and ``log(beta / (1 - alpha))`` (passed); between them, one more
trial. Wald's ratio assumes a known noise; here it is Welch's standard error from a few trials, so
it is widened by the ratio of t to normal quantiles (Welch's degrees of freedom): early looks need
more evidence, late ones almost none extra. From five trials on, each side's logs are winsorized at
3 robust sd, so one hiccup trial weighs as a bad trial, no more. Trials start at ``MIN_TRIALS``; at
``max_repeat`` an undecided comparison is ``inconclusive``.

Against a stored baseline (``stored``) the baseline's trials are fixed, so its mean's error stays in
every look and the evidence stops growing: there the variances are pooled when an F-test finds them
consistent (Welch's otherwise), the looks get ``1 - FINAL_SHARE`` of ``alpha``, and the last look
spends the rest on a fixed-sample t-test. An undecided comparison whose baseline is too small says
how many baseline trials would do (``baseline_trials_needed``).

The error rates (false alarms, detections, trials used) are measured by ``benchmarks/sequential.py``
on the simulator, and checked on a smaller sample by the tests.

Public API: ``sprt(base, cand, ...) -> Decision``, ``compare_case(...) -> Comparison`` (the fixed
rule's figures with the sequential verdict), ``compare_runs`` (as ``compare.compare_runs``),
``decided(comparisons)``, ``run_ab(...)`` (A/B in ABBA order until decided) and
``baseline_trials_needed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy  # scipy.stats loads on first use: 0.6 s of CPU a run without statistics never spends

from . import compare
from .compare import CaseComparison, Comparison
from .spec import AUTO_MAX_REPEAT, AUTO_MIN_TRIALS

ALPHA = 0.01  # false alarms: regressed when nothing changed
BETA = 0.05  # misses: passed at a regression of twice the threshold
#: candidate trials before a decision (and A trials in A/B): with the baseline's they give the variance
#: enough degrees of freedom that one unlucky pair cannot decide.
MIN_TRIALS = AUTO_MIN_TRIALS
#: default cap on trials per side (per arm in A/B) for ``repeat="auto"``.
MAX_REPEAT = AUTO_MAX_REPEAT
_NO_SPREAD = 1e-9
# A log-sd below this is rounding, not noise (equal values): it stands for the smallest noise a real
# endpoint shows, so identical trials do not give an infinite ratio.
MIN_NOISE = 0.002
#: against a stored baseline: a test of equal variances (Brown-Forsythe) below this p says the two sides'
#: noise differs (Welch's standard error then); at or above it their variances are pooled.
CONSISTENT_P = 0.05
#: against a stored baseline: the share of ALPHA kept for the last look's t-test (the looks get the rest).
FINAL_SHARE = 0.25


@dataclass(frozen=True)
class Decision:
    """One look of the test."""

    verdict: str  # regressed | passed | continue
    llr: float  # log likelihood ratio, H1 (regression of 2x threshold) against H0 (no change)
    upper: float  # regressed at or above this
    lower: float  # passed at or below this
    n_base: int
    n_cand: int
    sd: float = 0.0  # per-trial noise (log-sd) the look used
    se: float = 0.0  # standard error of the difference of means
    rule: str = "sprt"  # what decided: sprt, or the last look's t-test (final)


def bounds(alpha: float = ALPHA, beta: float = BETA) -> tuple[float, float]:
    """Wald's (lower, upper) bounds on the log likelihood ratio."""
    return math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)


def _t_widening(q: float, df: float) -> float:
    """How much wider a t interval is than a normal one at tail ``q`` on ``df`` degrees of freedom (>= 1)."""
    return float(scipy.stats.t.isf(q, df) / scipy.stats.norm.isf(q))


def sprt(base: Sequence[float], cand: Sequence[float], *, direction: str = "higher", max_regression: float = 0.05,
         alpha: float = ALPHA, beta: float = BETA, min_trials: int = MIN_TRIALS, stored: bool = False,
         final: bool = False) -> Decision:
    """One look: regressed, passed, or continue (add a trial), from per-trial values of each side.

    ``stored``: ``base`` is a saved run whose trials no look adds to (``--specperf-compare``); its evidence
    is capped, so the test pools the variances when they agree and keeps part of ``alpha`` for the last
    look: with ``final`` (``max_repeat`` reached) an undecided test is regressed when a one-sided t-test at
    ``FINAL_SHARE * alpha`` finds the candidate worse with its mean change beyond the threshold.
    Raises ValueError for a non-positive value or an unknown direction (caller errors, not data).
    """
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    if not all(np.all(np.isfinite(x)) and np.all(x > 0) for x in (b, c)):
        raise ValueError("trial values must be finite and positive (they are compared as logs)")
    looks_alpha = alpha * (1 - FINAL_SHARE) if stored else alpha
    lower, upper = bounds(looks_alpha, beta)
    nb, nc = b.size, c.size
    # A stored baseline may hold a single trial: the candidate's trials then carry the variance.
    if nb < 1 or nc < min_trials:
        return Decision("continue", 0.0, upper, lower, nb, nc)
    sign = 1.0 if direction == "higher" else -1.0
    lb, lc = _winsorize(sign * np.log(b)), _winsorize(sign * np.log(c))
    d = float(lc.mean() - lb.mean())
    sd, se, df = _standard_error(lb, lc, pool=stored)
    mu1 = 2 * math.log1p(-max_regression)
    # Wald's ratio for a normal mean with known se, linear in d: mu1 (2 d - mu1) / (2 se^2). se is estimated
    # from few trials, so it is widened by the t/normal quantile ratio at each bound's tail: early looks
    # need more evidence, and the ratio stays monotone in d (a huge regression is never less evident).
    # The failing side widens at alpha / 2, which holds false alarms under 1 % at a 5 % per-trial CV with
    # 1 trial in 20 a 30 % hiccup (seeded simulation; at alpha itself they reach 1.1 %).
    core = mu1 * (2 * d - mu1) / 2
    llr_fail = core / (se * _t_widening(looks_alpha / 2, df)) ** 2
    llr_pass = core / (se * _t_widening(beta, df)) ** 2
    llr = llr_fail if llr_fail > 0 else llr_pass
    verdict = "regressed" if llr_fail >= upper else "passed" if llr_pass <= lower else "continue"
    if (verdict == "continue" and stored and final and d <= mu1 / 2
            and scipy.stats.t.cdf(d / se, df) < FINAL_SHARE * alpha):
        # Wald's bounds suit a test whose evidence grows without end; against a stored baseline it stops
        # growing (the baseline's own error stays in every look), and at max_repeat they would leave a
        # real regression undecided. The fixed-sample test of this last look spends the rest of alpha.
        return Decision("regressed", llr, upper, lower, nb, nc, sd, se, "final")
    return Decision(verdict, llr, upper, lower, nb, nc, sd, se)


def _standard_error(lb: np.ndarray, lc: np.ndarray, *, pool: bool = False) -> tuple[float, float, float]:
    """(per-trial sd, standard error of the difference of means, degrees of freedom).

    Welch's, each side's own noise, so a noisy candidate is not hidden behind a quiet baseline. With ``pool``
    the two sides' variances are pooled (n_b + n_c - 2 degrees of freedom) once the candidate has as many
    trials as the baseline, unless a test says their noise differs: while the candidate is the smaller side
    a pooled variance leans on the baseline's, and three trials are too few to show they are noisier.
    Always pooled when one side has a single trial (the other carries the variance).
    """
    nb, nc = lb.size, lc.size
    if nb < 2 or nc < 2 or (pool and nc >= nb and _consistent(lb, lc)):
        df = nb + nc - 2
        ss = float(((lb - lb.mean()) ** 2).sum() + ((lc - lc.mean()) ** 2).sum())
        sd = max(math.sqrt(ss / df), MIN_NOISE)
        return sd, sd * math.sqrt(1 / nb + 1 / nc), df
    vb = max(float(lb.var(ddof=1)), MIN_NOISE**2) / nb
    vc = max(float(lc.var(ddof=1)), MIN_NOISE**2) / nc
    df = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (nc - 1))
    return math.sqrt((vb * nb + vc * nc) / 2), math.sqrt(vb + vc), df


def _consistent(lb: np.ndarray, lc: np.ndarray) -> bool:
    """True when the two sides' noise is consistent: the Brown-Forsythe test (Levene's, about the medians)
    does not reject equal variances at ``CONSISTENT_P``. Unlike the F-test it holds its level when a busy
    machine gives the trials heavy tails, so it does not send ordinary noise to Welch's few degrees of freedom."""
    if float(np.ptp(lb)) <= _NO_SPREAD or float(np.ptp(lc)) <= _NO_SPREAD:
        return False  # no spread on one side: nothing to test, each side keeps its own (floored) variance
    return float(scipy.stats.levene(lb, lc, center="median").pvalue) >= CONSISTENT_P


def _winsorize(x: np.ndarray, k: float = 3.0) -> np.ndarray:
    """Clip to median +- k robust sd (1.4826 MAD) from 5 values on: a hiccup trial weighs as a bad one, no more."""
    if x.size < 5:
        return x
    m = float(np.median(x))
    s = float(scipy.stats.median_abs_deviation(x, scale="normal"))
    return np.clip(x, m - k * s, m + k * s) if s > _NO_SPREAD else x


def compare_case(base: Sequence[float], cand: Sequence[float], *, direction: str, max_regression: float = 0.05,
                 metric: str = "value", against: str = "baseline", final: bool = False,
                 alpha: float = ALPHA, beta: float = BETA) -> Comparison:
    """The fixed rule's figures (change, CI, p, noise) with the sequential verdict and its reason.

    An undecided test is ``inconclusive`` (``final``: because ``max_repeat`` was reached); the caller
    adds a trial while any metric is.
    """
    fixed = compare.compare_case(base, cand, direction=direction, max_regression=max_regression, metric=metric,
                                 against=against, decide_at=None)
    dec = sprt(base, cand, direction=direction, max_regression=max_regression, alpha=alpha, beta=beta,
               stored=against == "baseline", final=final)
    thr = f"{max_regression:.0%}"
    how = (f"sequential test, {dec.n_base} vs {dec.n_cand} trials, LLR {dec.llr:+.2f} "
           f"in [{dec.lower:.2f}, {dec.upper:.2f}]")
    if dec.rule == "final":
        how = (f"sequential test undecided after {dec.n_base} vs {dec.n_cand} trials, "
               f"then one-sided t-test at {FINAL_SHARE * alpha:.3g}")
    if dec.verdict == "regressed":
        verdict, tail = "regressed", f"regressed beyond {thr}"
    elif dec.verdict == "passed":
        verdict, tail = "passed", f"within {thr}"
    else:
        verdict = "inconclusive"
        tail = _undecided(dec, max_regression, against, alpha, beta) if final else "inconclusive: undecided"
    change = fixed.change_ci
    reason = (f"{metric} {fixed.change * 100:+.1f}% [{change[0] * 100:+.1f}%, {change[1] * 100:+.1f}%] vs {against} "
              f"({how}): {tail}")
    return replace(fixed, verdict=verdict, method="sprt", reason=reason)


def _undecided(dec: Decision, max_regression: float, against: str, alpha: float, beta: float) -> str:
    """Why a test is still undecided at max_repeat, and the fix: more baseline trials when they are the cap."""
    need = baseline_trials_needed(dec.sd, dec.n_cand, max_regression, alpha=alpha, beta=beta)
    if against == "baseline" and need is not None and dec.n_base < need:
        return (f"inconclusive: {dec.n_base} baseline trials are too few to decide at {dec.sd:.1%} noise per trial; "
                f"save the baseline with repeat={need}")
    return "inconclusive: undecided at max_repeat (raise it)"


def baseline_trials_needed(sd: float, n_cand: int, max_regression: float, *, alpha: float = ALPHA,
                           beta: float = BETA, most: int = 100) -> int | None:
    """Baseline trials (at least ``MIN_TRIALS``) with which ``n_cand`` candidate trials at per-trial noise ``sd``
    find a regression of twice the threshold with power ``1 - beta`` by the last look's t-test alone;
    None when ``most`` are not enough."""
    if sd <= 0 or n_cand < 2:
        return None
    effect = -2 * math.log1p(-max_regression)
    for nb in range(MIN_TRIALS, most + 1):
        df = nb + n_cand - 2
        q = scipy.stats.t.isf(FINAL_SHARE * alpha, df) + scipy.stats.t.isf(beta, df)
        if q * sd * math.sqrt(1 / nb + 1 / n_cand) <= effect:
            return nb
    return None


def compare_runs(base_results: Iterable[dict[str, Any]], cand_results: Iterable[dict[str, Any]], *,
                 max_regression: float, metrics: Sequence[str], against: str = "baseline",
                 final: bool = False) -> list[CaseComparison]:
    """``compare.compare_runs`` with the sequential verdict on every compared metric."""

    def rule(base: Sequence[float], cand: Sequence[float], *, direction: str, max_regression: float, metric: str,
             against: str, **_: Any) -> Comparison:
        return compare_case(base, cand, direction=direction, max_regression=max_regression, metric=metric,
                            against=against, final=final)

    return compare.compare_runs(list(base_results), list(cand_results), max_regression=max_regression,
                                metrics=metrics, against=against, rule=rule)


def decided(comparisons: Iterable[CaseComparison]) -> bool:
    """True when no more trials are needed: a metric regressed, or none is still undecided."""
    ccs = list(comparisons)
    if any(cc.verdict == "regressed" for cc in ccs):
        return True
    return not any(cc.verdict == "inconclusive" for cc in ccs)


Measure = Callable[[], dict[str, Any]]  # one trial's result dict
Until = Callable[[dict[str, list[float]]], bool]  # per-metric trial values so far -> decided
Judge = Callable[[list[CaseComparison], list[dict[str, Any]], list[dict[str, Any]]], list[CaseComparison]]


#: Trials a repeat="auto" run takes when it is saved with nothing to compare: a stored baseline of this
#: size lets the sequential test decide up to about 4% per-trial noise (``baseline_trials_needed``), and
#: its cost is spread over every deploy it gates.
SAVED_BASELINE_TRIALS = 5


def until_trials(n: int) -> Until:
    """The runner's ``until`` for a run with nothing to compare: done once every metric has ``n`` trials."""
    return lambda values: bool(values) and all(len(v) >= n for v in values.values())


def until_baseline(baseline: list[dict[str, Any]], nodeid: str, *, max_regression: float, metrics: Sequence[str],
                   judge: Judge | None = None) -> Until:
    """The runner's ``until`` against a stored run: True once every metric is decided on the trials so far."""
    mine = [b for b in baseline if b.get("nodeid") == nodeid]

    def done(values: dict[str, list[float]]) -> bool:
        n = max((len(v) for v in values.values()), default=0)
        cand = [{"nodeid": nodeid, "kind": "trial", **{m: v[i] for m, v in values.items() if i < len(v)}}
                for i in range(n)]
        ccs = compare_runs(mine, cand, max_regression=max_regression, metrics=metrics)
        return decided(judge(ccs, mine, cand) if judge else ccs)

    return done


def run_ab(measure_a: Measure, measure_b: Measure, *, max_repeat: int, max_regression: float,
           metrics: Sequence[str], judge: Judge | None = None
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CaseComparison]]:
    """A and B in ABBA order, one trial each per round, until every metric is decided or ``max_repeat`` per arm.

    ``judge`` post-processes each look's comparisons (e.g. a noise floor that passes tiny TTFT changes).
    Returns A's trials, B's trials and the last look's comparisons (undecided ones ``inconclusive``).
    """
    arms: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    order = compare.ab_order(max_repeat)
    ccs: list[CaseComparison] = []
    for i in range(0, len(order), 2):
        for arm in order[i:i + 2]:
            arms[arm].append((measure_a if arm == "A" else measure_b)())
        n = len(arms["B"])
        if n < min(MIN_TRIALS, max_repeat):
            continue
        ccs = compare_runs(arms["A"], arms["B"], max_regression=max_regression, metrics=metrics, against="A",
                           final=n >= max_repeat)
        if judge is not None:
            ccs = judge(ccs, arms["A"], arms["B"])
        if decided(ccs):
            break
    return arms["A"], arms["B"], ccs
