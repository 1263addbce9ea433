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
every look and the evidence stops growing: there the variances are pooled when a Brown-Forsythe test finds
them consistent (Welch's otherwise), the looks get ``1 - FINAL_SHARE`` of ``alpha``, and the last look
spends the rest on a fixed-sample t-test. An undecided comparison whose baseline is too small says
how many baseline trials would do (``baseline_trials_needed``). Where the candidate's trials generated the
same text as the baseline's, trial for trial (``pairable``), the test runs on the pair differences.

``ALPHA`` is the case's false-alarm rate, split evenly over the metrics it is judged on; a metric's verdict
is the first look that decided it (``first_decision``), so trials a case adds for another gate do not
reopen it. The rates hold while the per-trial noise is at most ``NOISE_CHECKED`` thresholds; a noisier
comparison says so (``noise_warnings``). A saved run is sized to its noise (``until_saved``, ``saved_notes``).

The error rates (false alarms, detections, trials used) are measured by ``benchmarks/sequential.py``
on the simulator, and checked on a smaller sample by the tests.

Public API: ``sprt(base, cand, ...) -> Decision``, ``first_decision``, ``sprt_case(...) -> Comparison``
(the fixed rule's figures with the sequential verdict), ``sprt_runs`` (as ``trials.compare_runs``),
``decided(comparisons)``, ``look`` (one look against a stored run), ``until_baseline``,
``until_saved``, ``saved_notes``, ``noise_warnings``, ``pairable``, ``baseline_trials_needed`` and
``pairs_needed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy  # scipy.special and .stats load on first use: a run without statistics never pays for them

from pytest_specperf.cases import figures
from pytest_specperf.cases.base import AUTO_MAX_REPEAT, AUTO_MIN_TRIALS
from pytest_specperf.cases.figures import Case
from pytest_specperf.cases.result_parts import CaseComparison, Comparison, SweepPoint
from pytest_specperf.cases.results import (
    ErrorRecord,
    LoadLevel,
    Result,
    StreamResult,
    SustainedResult,
    TwoPointResult,
)
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare.samples import Side, text_keys
from pytest_specperf.compare.trials import ALPHA

# ALPHA (compare.trials, the one): false alarms per case, regressed when nothing changed, over all its gated metrics
BETA = 0.05  # misses: passed at a regression of twice the threshold
#: candidate trials before a decision (and A trials in A/B): with the baseline's they give the variance
#: enough degrees of freedom that one unlucky pair cannot decide.
MIN_TRIALS = AUTO_MIN_TRIALS
#: default cap on trials per side (per arm in A/B) for ``repeat="auto"``.
MAX_REPEAT = AUTO_MAX_REPEAT
_NO_SPREAD = 1e-9
_MAD = 1.482602218505602  # 1 / Phi^-1(0.75): the MAD of normal noise times this is its sd
# A log-sd below this is rounding, not noise (equal values): it stands for the smallest noise a real
# endpoint shows, so identical trials do not give an infinite ratio.
MIN_NOISE = 0.002
#: against a stored baseline: a test of equal variances (Brown-Forsythe) below this p says the two sides'
#: noise differs (Welch's standard error then); at or above it their variances are pooled.
CONSISTENT_P = 0.05
#: against a stored baseline: the share of a metric's alpha kept for the last look's t-test (the looks get the rest).
FINAL_SHARE = 0.25
#: The stated error rates hold while the per-trial noise (log-sd; of the pair differences when paired) is at most
#: this many thresholds: seeded simulations put a metric's false alarms at or under its share of ``ALPHA`` up to
#: 0.8x (4 % noise at a 5 % threshold) and over it beyond (up to 1.6x its share at 1.6x; docs/sequential.md).
#: A comparison noisier than this says so, and the gate shows it as a warning.
NOISE_CHECKED = 0.8
#: the words that mark such a comparison (``noise_warnings``)
NOISY = "beyond where the error rates hold"


@dataclass(frozen=True)
class Decision:
    """One look of the test."""

    verdict: str  # regressed | passed | continue
    llr: float  # log likelihood ratio, H1 (regression of 2x threshold) against H0 (no change)
    upper: float  # regressed at or above this
    lower: float  # passed at or below this
    n_base: int
    n_cand: int
    sd: float = 0.0  # per-trial noise (log-sd) the look used; of the pair differences when paired
    se: float = 0.0  # standard error of the difference of means
    rule: str = "sprt"  # what decided: sprt, or the last look's t-test (final)
    paired: bool = False  # trial i of the candidate against trial i of the baseline
    d: float = 0.0  # the mean log change (worse is lower)
    df: float = 0.0  # degrees of freedom of ``se``


def bounds(alpha: float = ALPHA, beta: float = BETA) -> tuple[float, float]:
    """Wald's (lower, upper) bounds on the log likelihood ratio."""
    return math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha)


def _t_widening(q: float, df: float) -> float:
    """How much wider a t interval is than a normal one at tail ``q`` on ``df`` degrees of freedom (>= 1)."""
    # scipy.special, not scipy.stats: a look is a few microseconds, so seeded simulations of thousands run quickly
    return float(scipy.special.stdtrit(df, 1 - q) / scipy.special.ndtri(1 - q))


def sprt(base: Sequence[float], cand: Sequence[float], *, direction: str = "higher", max_regression: float = 0.05,
         alpha: float = ALPHA, beta: float = BETA, min_trials: int = MIN_TRIALS, stored: bool = False,
         final: bool = False, paired: bool = False) -> Decision:
    """One look: regressed, passed, or continue (add a trial), from per-trial values of each side.

    ``alpha`` is this metric's share of the case's false-alarm rate. ``stored``: ``base`` is a saved run whose
    trials no look adds to (``--specperf-compare``); its evidence is capped, so the test pools the variances
    when they agree and keeps part of ``alpha`` for the last look: with ``final`` (``max_repeat`` reached) an
    undecided test is regressed when a one-sided t-test at ``FINAL_SHARE * alpha`` finds the candidate worse
    with its mean change beyond the threshold. ``paired``: candidate trial i repeats baseline trial i's prompt
    and text, so the test is on the pair differences (``base`` needs at least as many trials as ``cand``).
    Raises ValueError for a non-positive value, an unknown direction, or a paired base shorter than cand.
    """
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    if not all(np.all(np.isfinite(x)) and np.all(x > 0) for x in (b, c)):
        raise ValueError("trial values must be finite and positive (they are compared as logs)")
    if paired and b.size < c.size:
        raise ValueError(f"a paired test needs a baseline trial per candidate trial, got {b.size} for {c.size}")
    looks_alpha = alpha * (1 - FINAL_SHARE) if stored else alpha
    lower, upper = bounds(looks_alpha, beta)
    nb, nc = b.size, c.size
    # A stored baseline may hold a single trial: the candidate's trials then carry the variance.
    if nb < 1 or nc < min_trials:
        return Decision("continue", 0.0, upper, lower, nb, nc, paired=paired)
    sign = 1.0 if direction == "higher" else -1.0
    if paired:
        diff = _winsorize(sign * (np.log(c) - np.log(b[:nc])))
        d = float(diff.mean())
        sd = max(float(diff.std(ddof=1)), MIN_NOISE)
        se, df = sd / math.sqrt(nc), float(nc - 1)
        nb = nc
    else:
        lb, lc = _winsorize(sign * np.log(b)), _winsorize(sign * np.log(c))
        d = float(lc.mean() - lb.mean())
        sd, se, df = _standard_error(lb, lc, pool=stored)
    mu1 = 2 * math.log1p(-max_regression)
    # Wald's ratio for a normal mean with known se, linear in d: mu1 (2 d - mu1) / (2 se^2). se is estimated
    # from few trials, so it is widened by the t/normal quantile ratio at each bound's tail: early looks
    # need more evidence, and the ratio stays monotone in d (a huge regression is never less evident).
    core = mu1 * (2 * d - mu1) / 2
    llr_fail = core / (se * _t_widening(looks_alpha / 2, df)) ** 2
    llr_pass = core / (se * _t_widening(beta, df)) ** 2
    llr = llr_fail if llr_fail > 0 else llr_pass
    verdict = "regressed" if llr_fail >= upper else "passed" if llr_pass <= lower else "continue"
    rule = "sprt"
    if (verdict == "continue" and stored and final and d <= mu1 / 2
            and scipy.special.stdtr(df, d / se) < FINAL_SHARE * alpha):
        # Wald's bounds suit a test whose evidence grows without end; against a stored baseline it stops
        # growing (the baseline's own error stays in every look), and at max_repeat they would leave a
        # real regression undecided. The fixed-sample test of this last look spends the rest of alpha.
        verdict, rule = "regressed", "final"
    return Decision(verdict, llr, upper, lower, nb, nc, sd, se, rule, paired, d, df)


def first_decision(base: Sequence[float], cand: Sequence[float], *, stored: bool, final: bool = False,
                   paired: bool = False, **kw: Any) -> Decision:
    """The test as it ran: its looks at ``MIN_TRIALS``, ... ``len(cand)`` candidate trials (A/B: that many per
    arm), and the verdict of the first look that decided; the last look is ``final`` when asked.

    A case goes on while any gate is undecided (another metric, drift), and those extra trials must not reopen
    a metric that already decided: re-testing a passed metric at every later look would be extra looks, and
    extra chances of a false alarm, that its error rate does not count.
    """
    nc = len(cand)
    dec = Decision("continue", 0.0, 0.0, 0.0, len(base), nc, paired=paired)
    for n in range(min(MIN_TRIALS, nc), nc + 1):
        b = base[:n] if (paired or not stored) else base
        dec = sprt(b, cand[:n], stored=stored, final=final and n == nc, paired=paired, **kw)
        if dec.verdict != "continue":
            return dec
    return dec


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
        df: float = nb + nc - 2
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
    # scipy.stats.levene(lb, lc, center="median"), written out: the same statistic at a hundredth of the cost
    zb, zc = np.abs(lb - np.median(lb)), np.abs(lc - np.median(lc))
    n = zb.size + zc.size
    mean = (zb.sum() + zc.sum()) / n
    between = zb.size * (zb.mean() - mean) ** 2 + zc.size * (zc.mean() - mean) ** 2
    within = float(((zb - zb.mean()) ** 2).sum() + ((zc - zc.mean()) ** 2).sum())
    if within <= 0:
        return False
    return float(scipy.special.fdtrc(1, n - 2, (n - 2) * between / within)) >= CONSISTENT_P


def _winsorize(x: np.ndarray, k: float = 3.0) -> np.ndarray:
    """Clip to median +- k robust sd (1.4826 MAD) from 5 values on: a hiccup trial weighs as a bad one, no more."""
    if x.size < 5:
        return x
    m = float(np.median(x))
    s = float(np.median(np.abs(x - m))) * _MAD
    return np.clip(x, m - k * s, m + k * s) if s > _NO_SPREAD else x


def sprt_case(base: Sequence[float], cand: Sequence[float], *, direction: str, max_regression: float = 0.05,
                 metric: str = "value", against: str = "baseline", final: bool = False,
                 alpha: float = ALPHA, beta: float = BETA, paired: bool = False) -> Comparison:
    """The fixed rule's figures (change, CI, p, noise) with the sequential verdict and its reason.

    ``alpha`` is this metric's share of the case's false-alarm rate (``sprt_runs`` splits ``ALPHA``).
    An undecided test is ``inconclusive`` (``final``: because ``max_repeat`` was reached); the caller
    adds a trial while any metric is. ``paired``: the figures are those of the pair differences.
    """
    fixed = compare.compare_case(base, cand, direction=direction, max_regression=max_regression, metric=metric,
                                 against=against, decide_at=None)
    dec = first_decision(base, cand, direction=direction, max_regression=max_regression, alpha=alpha, beta=beta,
                         stored=against == "baseline", final=final, paired=paired)
    thr = f"{max_regression:.0%}"
    design = f"{dec.n_cand} pairs" if paired else f"{dec.n_base} vs {dec.n_cand} trials"
    how = f"sequential test, {design}, LLR {dec.llr:+.2f} in [{dec.lower:.2f}, {dec.upper:.2f}]"
    if dec.rule == "final":
        how = f"sequential test undecided after {design}, then one-sided t-test at {FINAL_SHARE * alpha:.3g}"
    if dec.verdict == "regressed":
        verdict, tail = "regressed", f"regressed beyond {thr}"
    elif dec.verdict == "passed":
        verdict, tail = "passed", f"within {thr}"
    else:
        verdict = "inconclusive"
        tail = _undecided(dec, max_regression, against, alpha, beta) if final else "inconclusive: undecided"
    if dec.sd > NOISE_CHECKED * max_regression:
        tail += f"; per-trial noise {dec.sd:.1%} is over {NOISE_CHECKED:g}x the threshold, {NOISY}"
    figures = fixed
    if paired and dec.n_cand >= MIN_TRIALS:
        # The pair differences' mean and t interval: the figure and its interval from one estimator.
        sign = 1.0 if direction == "higher" else -1.0
        half = compare.t_quantile(1 - ALPHA, dec.df) * dec.se
        lo, hi = dec.d - half, dec.d + half
        ch = sorted((math.expm1(sign * lo), math.expm1(sign * hi)))
        figures = replace(fixed, effect=math.expm1(dec.d), ci=[math.expm1(lo), math.expm1(hi)],
                          change=math.expm1(sign * dec.d), change_ci=ch, n_base=dec.n_base,
                          n_cand=dec.n_cand)
    change = figures.change_ci
    reason = (f"{metric} {figures.change * 100:+.1f}% [{change[0] * 100:+.1f}%, {change[1] * 100:+.1f}%] vs {against} "
              f"({how}): {tail}")
    return replace(figures, verdict=verdict, method="sprt-paired" if paired else "sprt", reason=reason,
                   noise=dec.sd or figures.noise)


def noise_warnings(comparisons: Iterable[CaseComparison]) -> list[str]:
    """The reasons of decided comparisons noisier than the stated error rates cover (inconclusive ones warn anyway)."""
    return [cc.reason for cc in comparisons if NOISY in cc.reason and cc.verdict != "inconclusive"]


def _undecided(dec: Decision, max_regression: float, against: str, alpha: float, beta: float) -> str:
    """Why a test is still undecided at max_repeat, and the fix: more baseline trials when they are the cap."""
    if dec.paired:
        need = pairs_needed(dec.sd, max_regression, alpha=alpha, beta=beta)
        if need is not None and dec.n_cand < need:
            return (f"inconclusive: {dec.n_cand} pairs are too few to decide at {dec.sd:.1%} noise per pair; "
                    f"save the baseline with repeat={need}")
        return "inconclusive: undecided after every baseline trial was paired"
    need = baseline_trials_needed(dec.sd, dec.n_cand, max_regression, alpha=alpha, beta=beta)
    if against == "baseline" and need is not None and dec.n_base < need:
        return (f"inconclusive: {dec.n_base} baseline trials are too few to decide at {dec.sd:.1%} noise per trial; "
                f"save the baseline with repeat={need}")
    return "inconclusive: undecided at max_repeat (raise it)"


def _power_quantiles(alpha: float, beta: float, df: float) -> float:
    """t quantiles of the last look's test and of its power: the effect it finds 1 - beta of the time, in se."""
    return float(scipy.special.stdtrit(df, 1 - FINAL_SHARE * alpha) + scipy.special.stdtrit(df, 1 - beta))


def baseline_trials_needed(sd: float, n_cand: int, max_regression: float, *, alpha: float = ALPHA,
                           beta: float = BETA, most: int = 100) -> int | None:
    """Baseline trials (at least ``MIN_TRIALS``) with which ``n_cand`` candidate trials at per-trial noise ``sd``
    find a regression of twice the threshold with power ``1 - beta`` by the last look's t-test alone;
    None when ``most`` are not enough."""
    if sd <= 0 or n_cand < 2:
        return None
    effect = -2 * math.log1p(-max_regression)
    for nb in range(MIN_TRIALS, most + 1):
        if _power_quantiles(alpha, beta, nb + n_cand - 2) * sd * math.sqrt(1 / nb + 1 / n_cand) <= effect:
            return nb
    return None


def pairs_needed(sd: float, max_regression: float, *, alpha: float = ALPHA, beta: float = BETA,
                 most: int = 100) -> int | None:
    """Pairs (at least ``MIN_TRIALS``) with which pair differences of noise ``sd`` show a regression of twice the
    threshold with power ``1 - beta`` by the last look's t-test alone; None when ``most`` are not enough."""
    effect = -2 * math.log1p(-max_regression)
    for n in range(MIN_TRIALS, most + 1):
        if _power_quantiles(alpha, beta, n - 1) * sd / math.sqrt(n) <= effect:
            return n
    return None


def _has(results: Sequence[Case], metric: str) -> bool:
    return any(x > 0 for r in results if isinstance(r, Result) and r.verdict != "error"
               for _, _, case in figures.sub_cases(r) for x in figures.trials(case, metric))


def gated_metrics(base: Sequence[Case], cand: Sequence[Case], metrics: Sequence[str]) -> list[str]:
    """The metrics of ``metrics`` both sides measured: the ones a case is judged on, which share its alpha."""
    return [m for m in metrics if _has(base, m) and _has(cand, m)]


def pairable(base: Sequence[Case], cand: Sequence[Case]) -> int:
    """How many trials pair (0: none): candidate trial i generated the same text from the same prompt as baseline
    trial i, for every candidate trial up to the baseline's count. Same text means the same accepted drafts
    step by step (greedy decoding), so the pair's difference carries no share of the text's noise."""
    return _pairable(text_keys(base), text_keys(cand))


def _pairable(kb: Sequence[str | None], kc: Sequence[str | None]) -> int:
    n = min(len(kb), len(kc))
    if n < MIN_TRIALS or any(k is None for k in kb) or any(kc[i] != kb[i] for i in range(n)):
        return 0
    return n


def sprt_runs(base_results: Iterable[Case], cand_results: Iterable[Case], *,
              max_regression: float, metrics: Sequence[str], against: str = "baseline",
              final: bool = False) -> list[CaseComparison]:
    """``sprt_sides`` of the two sides made of these results as given."""
    return sprt_sides(Side.of(base_results), Side.of(cand_results), max_regression=max_regression,
                      metrics=metrics, against=against, final=final)


def sprt_sides(base: Side, cand: Side, *, max_regression: float, metrics: Sequence[str],
               against: str = "baseline", final: bool = False) -> list[CaseComparison]:
    """``compare.compare_sides`` with the sequential verdict on every compared metric, for one case.

    The case's false-alarm rate ``ALPHA`` is split evenly over the comparisons it is judged on, every metric of
    every level (Bonferroni, ``compare.families``), so the case, not each metric, holds it. Against a stored
    baseline whose trials the candidate's repeat text for text (``pairable``), trial i is compared with trial i,
    up to the baseline's trial count.
    """
    pairs = _pairable(base.text_keys, cand.text_keys) if against == "baseline" else 0
    n_base_trials, n_cand_trials = len(base.text_keys), len(cand.text_keys)

    out: list[CaseComparison] = []
    for unit in compare.match_sides(base, cand, metrics=metrics, against=against):
        if isinstance(unit, CaseComparison):
            out.append(unit)
            continue
        for m in metrics:
            got = compare.values_of(unit, m)
            if got is None or isinstance(got, CaseComparison):
                out += [got] if got is not None else []
                continue
            b, c = got.base, got.cand
            alpha = ALPHA / max(1, unit.family)  # the case's rate split over every level and metric it is judged on
            if pairs and len(b) == n_base_trials and len(c) == n_cand_trials:  # trial by trial
                dec = sprt_case(b, c[:pairs], direction=figures.DIRECTIONS[m], max_regression=max_regression,
                                metric=m, against=against, final=final or pairs >= len(b), alpha=alpha, paired=True)
            else:
                dec = sprt_case(b, c, direction=figures.DIRECTIONS[m], max_regression=max_regression, metric=m,
                                against=against, final=final, alpha=alpha)
            out.append(unit.compared(m, replace(dec, reason=dec.reason + got.note) if got.note else dec))
    return compare.with_q(out)


def decided(comparisons: Iterable[CaseComparison]) -> bool:
    """True when no more trials are needed: a metric regressed, or none is still undecided."""
    ccs = list(comparisons)
    if any(cc.verdict == "regressed" for cc in ccs):
        return True
    return not any(cc.verdict == "inconclusive" for cc in ccs)


#: per-metric trial values so far (and ``text_sha``, each trial's text hash, where known) -> decided
Until = Callable[[dict[str, list[Any]]], bool]


#: Trials a repeat="auto" run saved with nothing to compare takes at least; it goes on while its own noise says
#: a candidate of ``max_repeat`` trials could not decide the threshold against it (``until_saved``).
SAVED_BASELINE_TRIALS = 5
#: metrics a saved baseline is sized by, when the run measures them.
SIZED = ("decode_tps", "ttft_s")


def until_trials(n: int) -> Until:
    """The runner's ``until`` for a run with nothing to compare: done once every metric has ``n`` trials."""
    return lambda values: bool(values) and all(len(v) >= n for v in values.values())


def _log_sd(values: Sequence[float]) -> float:
    """Per-trial noise: the sd of the (winsorized) logs, floored at ``MIN_NOISE``."""
    return max(float(_winsorize(np.log(np.asarray(values, dtype=float))).std(ddof=1)), MIN_NOISE)


def saved_size(values: dict[str, list[Any]], *, max_repeat: int, max_regression: float,
               floors: dict[str, float] | None = None) -> dict[str, tuple[float, int | None]]:
    """Per sized metric: (per-trial noise, baseline trials a candidate of ``max_repeat`` trials needs to decide
    ``max_regression`` against it; None beyond 100). A metric whose threshold share of its median is under its
    ``floors`` entry (TTFT: a few ms pass anyway) needs no more than the minimum."""
    sized = {m: [float(x) for x in values[m] if x and x > 0] for m in SIZED if values.get(m)}
    alpha = ALPHA / max(1, len(sized))  # the share each metric gets when a candidate is judged against the save
    out: dict[str, tuple[float, int | None]] = {}
    for m, v in sized.items():
        if len(v) < 2:
            continue
        if floors and m in floors and float(np.median(v)) * max_regression < floors[m]:
            continue
        sd = _log_sd(v)
        out[m] = (sd, baseline_trials_needed(sd, max_repeat, max_regression, alpha=alpha))
    return out


def until_saved(*, max_repeat: int, max_regression: float, floors: dict[str, float] | None = None) -> Until:
    """The runner's ``until`` for a repeat="auto" run saved with nothing to compare: at least
    ``SAVED_BASELINE_TRIALS``, then more while its measured noise says a candidate of ``max_repeat`` trials
    could not decide ``max_regression`` against it, ``max_repeat`` at most (``saved_notes`` says when short)."""

    def done(values: dict[str, list[Any]]) -> bool:
        n = min((len(values[m]) for m in SIZED if m in values), default=0)
        if n < SAVED_BASELINE_TRIALS:
            return False
        need = saved_size(values, max_repeat=max_repeat, max_regression=max_regression, floors=floors)
        return all(k is not None and n >= k for _, k in need.values())

    return done


def saved_notes(result: Case, *, max_repeat: int, max_regression: float,
                floors: dict[str, float] | None = None) -> list[str]:
    """What a saved repeat="auto" run cannot do as a baseline: one line per metric whose noise needs more
    trials than ``max_repeat`` gave it."""
    streams = result.streams if isinstance(result, SustainedResult | LoadLevel) else []
    values: dict[str, list[Any]] = {m: [figures.figure(s, m) for s in streams] for m in SIZED}
    if not streams:
        values = {"decode_tps": list(result.samples_tps) if isinstance(result, TwoPointResult | SweepPoint) else []}
    n = len(next(iter(values.values()), []))
    notes = []
    for m, (sd, need) in saved_size(values, max_repeat=max_repeat, max_regression=max_regression,
                                    floors=floors).items():
        if need is None or n < need:
            more = f"repeat={need}" if need else "more than 100 trials"
            notes.append(f"saved baseline: {n} trials at {sd:.1%} {m} noise per trial are too few for a candidate of "
                         f"{max_repeat} trials to decide a {max_regression:.0%} regression against it ({more} would "
                         "do); a candidate that repeats its prompts and text (greedy) is compared in pairs, which "
                         "removes the text's share of that noise")
    return notes


def _trial_stream(values: dict[str, Any], text_sha: str | None) -> StreamResult:
    """One trial of the runner's values so far as a stream record (what it did not measure: None, or NaN where a
    figure is always set, which no rule reads as a value)."""
    nan = math.nan
    figures = {m: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else nan
               for m, v in values.items()}
    ttft, decode = figures.get("ttft_s", nan), figures.get("decode_tps", nan)  # not result data: the runner's
    return StreamResult(prompt_tokens=None, completion_tokens=0, ttft_s=ttft, total_s=nan, decode_tps=decode,
                        client_tps=nan, window_tokens=None, window_tps=[], early_tps=None, late_tps=None, drift=None,
                        trend_p=None, stalls=[], tokens_per_chunk=nan, count_source="", counts_exact=True,
                        text_sha=text_sha)


def look(mine: Sequence[Case], nodeid: str, values: dict[str, list[Any]], *, max_regression: float,
         metrics: Sequence[str]) -> tuple[list[CaseComparison], list[Case]] | None:
    """One look of repeat="auto" against a stored run (``mine``: its results of this case) at the runner's
    ``values`` so far: the comparisons and the candidate they judged; None once every baseline trial is paired (the
    paired test has no more pairs to add)."""
    texts = values.get("text_sha") or []  # not result data: the runner's values so far, by name
    gauged = {m: v for m, v in values.items() if m != "text_sha"}
    n = max((len(v) for v in gauged.values()), default=0)
    streams = [_trial_stream({m: v[i] for m, v in gauged.items() if i < len(v)}, texts[i] if i < len(texts) else None)
               for i in range(n)]
    cand: list[Case] = [SustainedResult(kind="sustained", endpoint="", model="", server="", ctx=0, prompt_tokens=None,
                                        nodeid=nodeid, streams=streams)]
    pairs = pairable(mine, cand)
    if pairs and pairs >= len(text_keys(mine)):
        return None
    return sprt_runs(mine, cand, max_regression=max_regression, metrics=metrics), cand


def until_baseline(baseline: Sequence[Case], nodeid: str, *, max_regression: float, metrics: Sequence[str]
                   ) -> Until:
    """The runner's ``until`` against a stored run: True once every metric is decided on the trials so far, or
    once every baseline trial is paired (``look``). The gate's own adds its TTFT rules (``measure.repeats``)."""
    mine = [b for b in baseline if isinstance(b, Result | ErrorRecord) and b.nodeid == nodeid]

    def done(values: dict[str, list[Any]]) -> bool:
        found = look(mine, nodeid, values, max_regression=max_regression, metrics=metrics)
        return found is None or decided(found[0])

    return done
