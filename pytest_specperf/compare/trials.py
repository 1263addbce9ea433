"""Regression gating across runs: per-trial values in log space, a three-outcome rule (docs/statistics.md).

Pure numpy/scipy; never imports pytest. The plugin wires it to ``--specperf-compare`` (baseline = a stored run,
"history mode") and to A/B mode (baseline = build A measured in the same session, ABBA order).

Public API
----------
``DIRECTIONS``
    metric -> ``"higher"`` or ``"lower"`` (which way is better). Only these metrics can be compared: they are
    positive, so they are analysed as logs. ``drift`` is not here: it is near zero and may be negative, and the
    within-run drift gate already judges it.
``trials``, ``sub_cases`` (``cases.figures``)
    One value per trial of a case (sustained: its streams'; two_point ``decode_tps``: ``samples_tps``; else the
    case's own figure), and the comparable units of a result (the case, each sweep point, each load level).
    ``compare.samples.Side`` reads them once per side; the rules here read the side, never a record. Everything
    reads records: JSON becomes one at its edge (``saved_results.load_record``), never here.
``compare_case(base, cand, *, direction, max_regression=0.05, alpha=0.01, metric="value", noise_floor=0.03,
decide_at=20, against="baseline") -> Comparison``
    The rule for one metric of one case, below. ``Comparison.as_dict()`` is JSON-able.
``compare_sides(base, cand, *, max_regression=0.10, metrics=("decode_tps", "ttft_s"), ...)`` (``compare_runs``
    takes the results themselves) -> ``list[CaseComparison]``. Cases are matched by nodeid (and ctx for sweep
    points, users for load levels: ``match_sides``, whose units every rule judges); several results with one
    nodeid on a side are pooled (so A/B runs may record one result per trial). Cases only in the candidate are
    ``new``, only in the baseline ``missing``; an errored side or a metric without values gives ``skipped``;
    none of these raise. Zero is a value of a higher-is-better metric (attainment, goodput, ``max_rps``), the
    worst one: a median that falls to 0 is ``regressed`` (no ratio or interval exists for it, so ``comparison``
    is None).
    BH q-values over all the p-values are attached (``CaseComparison.q``), for reports only.
``compare_ab(results_a, results_b, *, max_regression=0.05, ...)``
    The same with A as the baseline; reasons say "vs A".
``gate(comparisons, inconclusive="warn") -> tuple[list, list]``
    (failing, warning) comparisons for ``--specperf-inconclusive=pass|warn|fail``.
``trials_needed(noise, max_regression)``, ``min_detectable(noise, n_base, n_cand)``
    The repetitions formula and the minimum detectable effect (docs/statistics.md).

The rule (``compare_case``)
---------------------------
Logs of the values, negated when lower is better, so "worse" is always "lower" and the threshold is symmetric in
log space (5 % = a factor 0.95 worse, or 1/0.95 better).

One estimator throughout: the difference of mean logs ``d = mean log cand - mean log base``. The figure, its
interval, its p-value and every verdict (at any trial count) come from it, so the printed change is always its
interval's centre and the rule never decides on a statistic the interval does not describe.

* ``effect = exp(d) - 1`` in that better-is-positive space: **negative = worse** whatever the metric's direction
  (a TTFT going 0.20 -> 0.25 s is ``effect = -0.20``). ``change`` is the plain relative change of the metric's
  geometric mean (``+0.25`` there); reasons print ``change``.
* ``ci``: Welch's t interval of ``d`` at ``1 - 2*alpha`` two-sided (98 %, i.e. 99 % one-sided).
* ``p``: the one-sided p of the same Welch t statistic in the worse direction.
* **regressed** iff ``p < alpha / family`` **and** ``effect <= -max_regression``. ``family`` is the number of
  comparisons that can fail the case (levels x metrics, ``compare_runs`` counts them): Bonferroni, so identical
  sides fail a *case* at most ``alpha`` of the time whatever its size.
* **improved**: the mirror image (``p(better) < alpha`` and better by a factor ``1/(1 - max_regression)``).
* **passed** iff the CI's worse bound is above ``-max_regression`` (no regression beyond the threshold, shown).
* **inconclusive** otherwise; when the noise is too high for the threshold (``mde > max_regression``) the reason
  gives the minimum detectable effect and the trials per side needed. ``noise`` behind ``mde`` combines both
  sides' sd of the logs, so a noisy candidate shows. At ``decide_at`` (20) trials per side an inconclusive case
  whose estimate is within the threshold passes on it; one whose estimate is worse stays inconclusive (calling it
  regressed without significance would break the false-alarm rate at high noise).
* Every trial equal on both sides (attainment 1.00 against 1.00): passed, nothing to judge.

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
from dataclasses import dataclass, replace

import numpy as np
import scipy  # scipy.stats loads on first use: 0.6 s of CPU a run without statistics never spends

from pytest_specperf.cases.figures import DIRECTIONS, Case, over_shared_rows
from pytest_specperf.cases.result_parts import CaseComparison, Comparison
from pytest_specperf.compare.samples import Entry, Key, Side

ALPHA = 0.01
POWER = 0.8
#: 5 % with interleaved A/B in one job, 10 % against a stored run (the per-job offset; docs/statistics.md).
AB_MAX_REGRESSION = 0.05
HISTORY_MAX_REGRESSION = 0.10
#: assumed per-trial log-sd when the data cannot measure it (one trial per side, or no spread).
NOISE_FLOOR = 0.03
#: trials per side at which an inconclusive comparison is decided on the point estimate (5 -> 10 -> 20 ends).
DECIDE_AT = 20
#: the fewest trials per side the docs recommend for gating: fewer leave Welch's t only a few degrees of freedom.
MIN_GATING_TRIALS = 5
_NO_SPREAD = 1e-9
#: A change of time-to-first-token smaller than this is the client's and the OS's noise (a few ms on localhost), not
#: the server's: every compared TTFT figure (``is_ttft``) passes within it, against a baseline, in A/B and the history.
TTFT_FLOOR_S = 0.010

VERDICTS = ("passed", "regressed", "improved", "inconclusive")
CASE_VERDICTS = (*VERDICTS, "new", "missing", "skipped")


def is_ttft(metric: str) -> bool:
    """Whether ``metric`` is a time-to-first-token figure (its median or a percentile): the noise floor applies."""
    return metric.startswith("ttft")


def within_ttft_floor(metric: str, before: float, after: float) -> bool:
    """True when ``metric`` is a TTFT figure whose change ``before -> after`` (seconds) is under ``TTFT_FLOOR_S``."""
    return is_ttft(metric) and abs(after - before) < TTFT_FLOOR_S


@functools.lru_cache(maxsize=64)
def _z(q: float) -> float:
    return float(scipy.stats.norm.ppf(q))


def min_detectable(noise: float, n_base: int, n_cand: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest worsening (positive fraction) detected with ``power``: ``(z_a + z_b) sd sqrt(1/n + 1/m)``."""
    log_mde = (_z(1 - alpha) + _z(power)) * noise * math.sqrt(1 / n_base + 1 / n_cand)
    return -math.expm1(-log_mde)


def trials_needed(noise: float, max_regression: float, *, alpha: float = ALPHA, power: float = POWER) -> int:
    """Trials per side to detect ``max_regression``: ``max(MIN_GATING_TRIALS, ceil(2 ((z_a + z_b) sd / delta)^2))``."""
    # delta as a plain fraction, as in docs/statistics.md's table (-log(1 - delta) would be ~2.5 % larger: fewer trials)
    n = 2 * ((_z(1 - alpha) + _z(power)) * noise / max_regression) ** 2
    return max(MIN_GATING_TRIALS, math.ceil(n))


def _side_sd(x: np.ndarray) -> float | None:
    # The sd of the logs: the spread the interval rests on, so mde and trials needed speak of the same test.
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
    assert sb is not None and sc is not None  # both None returned above
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


def interval(lb: np.ndarray, lc: np.ndarray, alpha: float = ALPHA, noise_floor: float = NOISE_FLOOR
             ) -> tuple[float, float, float, str, str]:
    """``(se, df, half, method, how)`` of the difference of mean logs ``mean(lc) - mean(lb)``: its standard error,
    degrees of freedom (inf for the assumed noise) and the half-width of its ``1 - 2 alpha`` interval, from
    Welch's t, a prediction interval (one trial on one side) or the assumed noise floor (nothing measures it).
    The one interval of a difference of mean logs: A/B's, a stored baseline's, the crossover's and the categories'."""
    nb, nc = lb.size, lc.size
    # Below 1e-9 log-sd (rounding of equal values) there is no spread to measure.
    sd_b = float(lb.std(ddof=1)) if nb >= 2 else 0.0
    sd_c = float(lc.std(ddof=1)) if nc >= 2 else 0.0
    sd_b, sd_c = (sd_b if sd_b > _NO_SPREAD else 0.0), (sd_c if sd_c > _NO_SPREAD else 0.0)
    if nb >= 2 and nc >= 2 and (sd_b > 0 or sd_c > 0):
        # Welch: each side's own variance, so a noisy side with few trials is not hidden behind a quiet one.
        vb, vc = sd_b**2 / nb, sd_c**2 / nc
        se = math.sqrt(vb + vc)
        df = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (nc - 1))
        method, how = "welch", f"{nb} vs {nc} trials"
    elif min(nb, nc) == 1 and max(sd_b, sd_c) > 0:
        # One trial on one side: a prediction interval from the other side's spread (pooled t, n - 1 dof).
        df = float(nb + nc - 2)
        se = math.sqrt(((nb - 1) * sd_b**2 + (nc - 1) * sd_c**2) / df * (1 / nb + 1 / nc))
        method, how = "prediction", f"{nb} vs {nc} trials, noise from the {'baseline' if sd_b > 0 else 'candidate'}"
    else:
        se, df = noise_floor * math.sqrt(1 / nb + 1 / nc), math.inf
        what = "1 trial per side" if nb == nc == 1 else f"{nb} vs {nc} trials without spread"
        method, how = "noise-floor", f"{what}: no noise estimate, assumed {noise_floor:.0%} per trial"
    return se, df, t_quantile(1 - alpha, df) * se, method, how


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t on ``df`` degrees of freedom (the normal's for inf)."""
    return float(scipy.special.ndtri(q) if math.isinf(df) else scipy.special.stdtrit(df, q))


def _tail(x: float, df: float) -> float:
    """P(T <= x) for Student's t on ``df`` degrees of freedom (the normal's for inf)."""
    return float(scipy.special.ndtr(x) if math.isinf(df) else scipy.special.stdtr(df, x))


def _verdict(d: float, lo: float, *, p: float, p_better: float, alpha: float, alpha_fail: float, delta: float,
             max_regression: float, n_min: int, decide_at: int | None, mde: float, need: int
             ) -> tuple[str, str, bool]:
    """``(verdict, tail of the reason, decided on the estimate)`` for the mean log difference ``d``, its interval's
    low end ``lo``, one-sided p-values of the same t statistic, and the threshold ``delta`` in log space.

    A regression needs ``p < alpha_fail``: the case's alpha split over every comparison that can fail it."""
    thr = f"{max_regression:.0%}"
    if p < alpha_fail and d <= -delta:
        return "regressed", f"regressed beyond {thr}", False
    if p_better < alpha and d >= delta:
        return "improved", f"improved beyond {thr}", False
    if lo > -delta:
        tail = f"within {thr}" if abs(d) < delta else f"no regression beyond {thr} (better, but not significantly)"
        return "passed", tail, False
    if decide_at is not None and n_min >= decide_at and d > -delta:
        # The same estimate every trial count uses; a worse one stays undecided, so the false-alarm rate holds.
        return "passed", f"passed on the estimate after {n_min} trials per side (threshold {thr})", True
    if d <= -delta:
        tail = f"inconclusive: worse than {thr} but not significant"
    else:
        tail = f"inconclusive: cannot show it is within {thr}"
    if mde > max_regression:
        tail += f" (detectable at this noise: {mde:.1%}; need {need} trials per side)"
    return "inconclusive", tail, False


def compare_case(base: Sequence[float], cand: Sequence[float], *, direction: str, max_regression: float = 0.05,
                 alpha: float = ALPHA, metric: str = "value", noise_floor: float = NOISE_FLOOR,
                 decide_at: int | None = DECIDE_AT, against: str = "baseline", family: int = 1,
                 paired: bool = False) -> Comparison:
    """Candidate trials vs baseline trials for one metric (the rule is in the module docstring).

    ``family``: how many comparisons of one case can fail it (levels x metrics); a regression needs
    ``p < alpha / family``, so the case as a whole fails at most ``alpha`` of the time when nothing changed.
    ``paired``: ``base[i]`` and ``cand[i]`` are one prompt on each side (``prompt_pairs``); the estimate is then the
    mean of the pairs' log differences with its one-sample t interval, so the prompts' own spread cancels.
    Raises ValueError for an empty side, a non-positive value or an unknown direction (caller errors, not data).
    """
    sign, lb, lc = _log_trials(base, cand, direction)
    nb, nc = lb.size, lc.size
    if float(np.ptp(np.concatenate([lb, lc]))) <= _NO_SPREAD:
        # The same value in every trial on both sides (an attainment of 1.00 against 1.00): no change to judge.
        return Comparison(metric=metric, direction=direction, verdict="passed", effect=0.0, ci=[0.0, 0.0],
                          change=0.0, change_ci=[0.0, 0.0], p=None, n_base=nb, n_cand=nc, mde=0.0, noise=0.0,
                          noise_source="floor", trials_needed=0, threshold=max_regression, method="identical",
                          reason=f"{metric} the same in all {nb} vs {nc} trials vs {against}: no change")
    d = float(lc.mean() - lb.mean())
    if paired and nb == nc and nb >= 2 and float(np.std(lc - lb, ddof=1)) > _NO_SPREAD:
        se, df = float(np.std(lc - lb, ddof=1)) / math.sqrt(nb), float(nb - 1)
        half, method, how = t_quantile(1 - alpha, df) * se, "paired", f"{nb} prompts paired"
    else:
        se, df, half, method, how = interval(lb, lc, alpha, noise_floor)
    lo, hi = d - half, d + half
    p = _tail(d / se, df)  # one-sided, worse: the t statistic of the same mean difference the interval is on
    p_better = _tail(-d / se, df)
    delta = -math.log1p(-max_regression)  # threshold in log space
    alpha_fail = alpha / max(1, family)
    noise, source = _noise(lb, lc, noise_floor)
    mde = min_detectable(noise, nb, nc, alpha=alpha_fail)
    need = trials_needed(noise, max_regression, alpha=alpha_fail)
    verdict, tail, estimated = _verdict(d, lo, p=p, p_better=p_better, alpha=alpha, alpha_fail=alpha_fail,
                                        delta=delta, max_regression=max_regression, n_min=min(nb, nc),
                                        decide_at=decide_at, mde=mde, need=need)
    if estimated:
        method += "+estimate"
    change = math.expm1(sign * d)
    ch = sorted((math.expm1(sign * lo), math.expm1(sign * hi)))
    # The p of the tail that decided: better for an improvement, worse otherwise.
    shown, side = (p_better, "better") if verdict == "improved" else (p, "worse")
    share = f", alpha {alpha_fail:.2g} each of {family} comparisons of the case" if family > 1 else ""
    reason = (f"{metric} {_pct(change)} [{_pct(ch[0])}, {_pct(ch[1])}] vs {against} "
              f"(p({side})={shown:.3g}, {how}{share}): {tail}")
    return Comparison(metric=metric, direction=direction, verdict=verdict, effect=math.expm1(d),
                      ci=[math.expm1(lo), math.expm1(hi)], change=change, change_ci=ch, p=p, n_base=nb, n_cand=nc,
                      mde=mde, noise=noise, noise_source=source, trials_needed=need, threshold=max_regression,
                      method=method, reason=reason)


def _measured(entry: Entry, metric: str) -> list[float]:
    """The side's values of ``metric``. Zero is a measurement of a higher-is-better metric (no request met the
    SLO, no probe passed: the worst value there is); a latency of zero or less is not a measurement."""
    keep_zero = DIRECTIONS[metric] == "higher"
    return [x for x in entry.values.get(metric, []) if x > 0 or (keep_zero and x == 0)]


def prompt_pairs(base: Entry, cand: Entry, metric: str) -> tuple[list[float], list[float]] | None:
    """Per prompt both sides sent, its value on each side (the geometric mean of its streams), aligned; None unless
    every stream on both sides carries a ``prompt_id`` and at least two prompts are shared.

    A case over a prompt file sends the same seeded draw on both sides; its prompts differ by far more than the
    sides do (one category decodes at 3x another), so pooled streams compared unpaired bury the change in the
    prompts' spread. Paired by prompt, only the change is left."""
    b, c = base.prompts(metric), cand.prompts(metric)
    if b is None or c is None:
        return None
    shared = [k for k in b if k in c]
    if len(shared) < 2:
        return None
    geo: Callable[[list[float]], float] = lambda xs: float(np.exp(np.mean(np.log(xs))))  # noqa: E731
    return [geo(b[k]) for k in shared], [geo(c[k]) for k in shared]


def _compared(base: Entry, cand: Entry, metrics: Sequence[str]) -> list[str]:
    """The metrics of a sub-case with values on both sides: the ones compared (and able to fail the case)."""
    return [m for m in metrics if _measured(base, m) and _measured(cand, m)]


def families(base: dict[Key, Entry], cand: dict[Key, Entry], metrics: Sequence[str]) -> dict[str, int]:
    """Per nodeid, how many comparisons can fail it: every metric of every level or sweep point compared."""
    out: dict[str, int] = {}
    for key, entry in cand.items():
        if key in base:
            out[key[0]] = out.get(key[0], 0) + len(_compared(base[key], entry, metrics))
    return out


@dataclass(frozen=True)
class Unit:
    """A sub-case both sides measured: what a rule compares metric by metric. ``family``: the comparisons of the
    whole case, which share its false-alarm rate."""

    key: Key
    base: Entry
    cand: Entry
    family: int = 1

    @property
    def at(self) -> str:
        """The prefix of a load level's reasons ("at 4 users: "); "" for any other sub-case."""
        users = self.key[2]
        return "" if users is None else f"at {users} user{'' if users == 1 else 's'}: "

    def compared(self, metric: str, c: Comparison | None, verdict: str = "", reason: str = "") -> CaseComparison:
        """The unit's ``CaseComparison`` of ``metric`` from a rule's comparison (or a verdict decided without one)."""
        nodeid, ctx, users = self.key
        if c is not None:
            verdict, reason = c.verdict, c.reason
        return CaseComparison(nodeid, ctx, metric, verdict, self.at + reason,
                              None if c is None else replace(c, reason=self.at + c.reason), users=users)


@dataclass(frozen=True)
class Values:
    """One metric of a unit, as a rule takes it: each side's trial values, and what its reason adds (``note``: a zero
    ranked lowest, a replay's figures over the rows both sides answered)."""

    base: list[float]
    cand: list[float]
    note: str = ""


def values_of(unit: Unit, metric: str) -> Values | CaseComparison | None:
    """What a rule compares of ``metric`` in ``unit``: both sides' values, or the comparison already decided
    (skipped: one side has no values; a higher-is-better median at zero: no ratio exists), or None where the
    metric does not apply to the kind (ttft_s of a two-point case)."""
    tb, tc = _measured(unit.base, metric), _measured(unit.cand, metric)
    if not tb and not tc:
        return None
    if not tb or not tc:
        nodeid, ctx, users = unit.key
        side = "baseline" if not tb else "candidate"
        return CaseComparison(nodeid, ctx, metric, "skipped", f"{metric}: no values in the {side}", users=users)
    # a replay: each trial's latencies over the trace rows every trial of both sides answered (a side that lost the
    # long rows, to a shorter context or to refusals, is not judged on a lighter mix)
    b, c = unit.base.trial_rows(), unit.cand.trial_rows()
    same = over_shared_rows([b, c], metric) if b is not None and c is not None else None
    if same is not None:
        return Values(same.values[0], same.values[1], same.note)
    if 0.0 not in tb and 0.0 not in tc:
        return Values(tb, tc)
    # Zero has no logarithm, so no ratio and no interval exist: a median that is zero on one side and not on the
    # other is a fall to (or a rise from) the worst value, decided without one. Where both medians are positive,
    # the zero trials take the lowest ranks (half the smallest positive value) and the rule runs.
    mb, mc = float(np.median(tb)), float(np.median(tc))
    zeros = f"{tc.count(0.0)} of {len(tc)} trials 0, baseline {tb.count(0.0)} of {len(tb)}"
    if mc == 0 and mb > 0:
        return unit.compared(metric, None, "regressed", f"{metric} fell to 0 from {mb:.3g} ({zeros}): the worst "
                             "value it has")
    if mb == 0 and mc > 0:
        return unit.compared(metric, None, "improved", f"{metric} rose from 0 to {mc:.3g} ({zeros})")
    if mb == 0 and mc == 0:
        return unit.compared(metric, None, "passed", f"{metric} 0 in both ({zeros}): no worse than the baseline")
    low = min(x for x in (*tb, *tc) if x > 0) / 2
    return Values([x or low for x in tb], [x or low for x in tc], f" ({zeros}, ranked lowest)")


def _baseline_only(base: dict[Key, Entry], cand: dict[Key, Entry],
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


def _errored_only(base: dict[Key, Entry], base_err: dict[str, str], cand: dict[Key, Entry],
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


def match_runs(base_results: Iterable[Case], cand_results: Iterable[Case], *, metrics: Sequence[str],
               against: str = "baseline") -> list[Unit | CaseComparison]:
    """``match_sides`` of the two sides made of these results as given."""
    return match_sides(Side.of(base_results), Side.of(cand_results), metrics=metrics, against=against)


def match_sides(base_side: Side, cand_side: Side, *, metrics: Sequence[str], against: str = "baseline"
                ) -> list[Unit | CaseComparison]:
    """Candidate sub-cases matched to the baseline's by nodeid (and ctx, users): a ``Unit`` per pair, in the
    candidate's order, and a ``CaseComparison`` for each sub-case only one side has (new, missing, skipped) after
    them. Every rule (``compare_sides``, ``sequential.sprt_sides``) judges the units it returns.

    Raises ValueError for a metric not in DIRECTIONS."""
    unknown = [m for m in metrics if m not in DIRECTIONS]
    if unknown:
        raise ValueError(f"cannot compare {', '.join(unknown)}: known metrics are {', '.join(DIRECTIONS)}")
    base, base_err = base_side.entries, base_side.errors
    cand, cand_err = cand_side.entries, cand_side.errors
    family = families(base, cand, metrics)
    out: list[Unit | CaseComparison] = []
    for (nodeid, ctx, users), entry in cand.items():
        if (nodeid, ctx, users) in base:
            out.append(Unit((nodeid, ctx, users), base[(nodeid, ctx, users)], entry, family.get(nodeid, 1)))
        elif nodeid in base_err:
            out.append(CaseComparison(nodeid, ctx, None, "skipped", f"baseline errored: {base_err[nodeid]}",
                                      users=users))
        else:
            out.append(CaseComparison(nodeid, ctx, None, "new", f"not in the {against}", users=users))
    return out + _baseline_only(base, cand, cand_err) + _errored_only(base, base_err, cand, cand_err)


def compare_runs(base_results: Iterable[Case], cand_results: Iterable[Case], *,
                 max_regression: float = HISTORY_MAX_REGRESSION, metrics: Sequence[str] = ("decode_tps", "ttft_s"),
                 alpha: float = ALPHA, noise_floor: float = NOISE_FLOOR, decide_at: int | None = DECIDE_AT,
                 against: str = "baseline") -> list[CaseComparison]:
    """``compare_sides`` of the two sides made of these results as given."""
    return compare_sides(Side.of(base_results), Side.of(cand_results), max_regression=max_regression,
                         metrics=metrics, alpha=alpha, noise_floor=noise_floor, decide_at=decide_at, against=against)


def compare_sides(base: Side, cand: Side, *, max_regression: float = HISTORY_MAX_REGRESSION,
                  metrics: Sequence[str] = ("decode_tps", "ttft_s"), alpha: float = ALPHA,
                  noise_floor: float = NOISE_FLOOR, decide_at: int | None = DECIDE_AT,
                  against: str = "baseline") -> list[CaseComparison]:
    """Match candidate cases to the baseline's (``match_sides``) and compare each metric by ``compare_case``; see
    the module docstring. Order: candidate cases as they came (metrics in the given order), then baseline-only
    cases. Raises ValueError for a metric not in DIRECTIONS.
    """
    out: list[CaseComparison] = []
    for unit in match_sides(base, cand, metrics=metrics, against=against):
        if isinstance(unit, CaseComparison):
            out.append(unit)
            continue
        for m in metrics:
            got = values_of(unit, m)
            if got is None:
                continue
            rule = functools.partial(compare_case, direction=DIRECTIONS[m], metric=m, family=unit.family,
                                     max_regression=max_regression, alpha=alpha, noise_floor=noise_floor,
                                     decide_at=decide_at, against=against)
            # a case over a prompt file is compared prompt by prompt where both sides sent the same prompts
            pairs = None if isinstance(got, CaseComparison) and got.verdict == "skipped" else \
                prompt_pairs(unit.base, unit.cand, m)
            if pairs is not None:
                out.append(unit.compared(m, rule(*pairs, paired=True)))
            elif isinstance(got, CaseComparison):
                out.append(got)
            else:
                c = rule(got.base, got.cand)
                out.append(unit.compared(m, replace(c, reason=c.reason + got.note) if got.note else c))
    return with_q(out)


def with_q(out: list[CaseComparison]) -> list[CaseComparison]:
    ps = [(i, cc.comparison.p) for i, cc in enumerate(out) if cc.comparison is not None and cc.comparison.p is not None]
    if not ps:
        return out
    qs = scipy.stats.false_discovery_control([p for _, p in ps], method="bh")
    for (i, _), q in zip(ps, qs, strict=True):
        cc = out[i]
        out[i] = replace(cc, q=float(q))
    return out


def compare_ab(results_a: Iterable[Case], results_b: Iterable[Case], *,
               max_regression: float = AB_MAX_REGRESSION, metrics: Sequence[str] = ("decode_tps", "ttft_s"),
               alpha: float = ALPHA, noise_floor: float = NOISE_FLOOR,
               decide_at: int | None = DECIDE_AT) -> list[CaseComparison]:
    """A/B in one session: B (candidate) against A (baseline), same rules as ``compare_runs``."""
    return compare_runs(list(results_a), results_b, max_regression=max_regression, metrics=metrics, alpha=alpha,
                        noise_floor=noise_floor, decide_at=decide_at, against="A")


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
