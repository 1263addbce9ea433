"""N named arms per case (``--specperf-arms=NAME=URL,...``): per load level the best arm, the arms that cannot be
told from it, a schedule (level -> arm) and the gate on a deployed arm's loss against the best.

A/B is the two-arm case: both measure every arm in ``measure/interleaved.arm_order`` (forward, then
backward: ABC CBA ABC ..., so a drift over the session hits every arm alike).

The samples are trials, as in the crossover: per level one value per trial, that trial's median user
(``figures.trial_figures``) and its aggregate. Per arm and level the figure is the geometric mean over trials
with a t interval on the logs (``1 - 2 ALPHA``: 98 % two-sided), or the assumed per-trial noise
``trials.NOISE_FLOOR`` where the trials cannot measure it (one trial, no spread). The best arm at a level has
the highest per-user decode; each other arm's ratio to it gets ``crossover.log_interval`` at ``ALPHA / (N - 1)``
per side (Bonferroni over the N - 1 comparisons with the best), and an arm whose interval reaches 1 is
*indistinguishable* from the best. A level is *decided* when every other arm is either shown slower or shown
within ``tolerance`` of the best (then either may be run).

The schedule names the best arm per level. When every arm's number of speculative tokens is known (engine arms,
or ``--specperf-arms-tokens``) it is also a mapping from batch size to ``num_speculative_tokens``: the level's
K from that many concurrent requests up to the next level.

``max_loss_vs_best`` (with ``deployed``, default the baseline arm) gates the deployed arm: at each level the
interval of deployed / best against ``1 - max_loss_vs_best``: ``below`` (whole interval under it) fails,
``holds`` passes, ``inconclusive`` follows ``--specperf-inconclusive``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import scipy

from pytest_specperf.cases import figures
from pytest_specperf.cases.figures import Case
from pytest_specperf.cases.result_parts import ArmFigures, ArmsGate, ArmsGateLevel, ArmsLevel, ArmsTable, VsBest
from pytest_specperf.cases.results import ErrorRecord, LoadLevel, LoadSweepResult, ReplayResult, Result, SustainedResult
from pytest_specperf.compare import crossover, verdicts
from pytest_specperf.compare import trials as compare

#: How far (ratio) from the best an arm still counts as "as good" for repeat="auto" without max_loss_vs_best.
DEFAULT_TOLERANCE = 0.05

T = TypeVar("T")


def levels_of(results: Sequence[Case]) -> list[int]:
    """The load levels (users) the results measured: a sweep's levels, else the case's own concurrency (1)."""
    seen: list[int] = []
    for r in results:
        users = r.concurrency if isinstance(r, SustainedResult | LoadSweepResult | LoadLevel | ErrorRecord) else 1
        found = users if isinstance(users, list) else [users if isinstance(users, int) else 1]
        seen += [u for u in found if u not in seen]
    return sorted(seen)


def values(results: Sequence[Case], users: int, metric: str = "decode_tps") -> list[float]:
    """One value per trial at ``users``: a sweep's level rows, else the case itself (a sustained load case)."""
    out: list[float] = []
    for r in results:
        rows: list[Case]
        if isinstance(r, LoadSweepResult):
            rows = [lv for lv in r.levels if lv.concurrency == users]
        else:
            own = r.concurrency if isinstance(r, SustainedResult | LoadLevel | ErrorRecord) else 1
            rows = [r] if (own if isinstance(own, int) else 1) == users else []
        out += [v for row in rows for f in figures.trial_figures(row) for v in [f.get(metric)] if v is not None]
    return out


def mean_interval(xs: Sequence[float], alpha: float = compare.ALPHA) -> tuple[float, float, float]:
    """(geometric mean, lo, hi): a t interval on the logs, ``1 - 2 alpha`` two-sided; the noise floor without spread."""
    logs = np.log(np.asarray(xs, dtype=float))
    m = float(logs.mean())
    sd = float(logs.std(ddof=1)) if logs.size >= 2 else 0.0
    if sd > 1e-9:
        half = compare.t_quantile(1 - alpha, logs.size - 1) * sd / math.sqrt(logs.size)
    else:  # no spread: the assumed per-trial noise, on the normal (infinite degrees of freedom), as ``interval``
        half = compare.t_quantile(1 - alpha, math.inf) * compare.NOISE_FLOOR / math.sqrt(logs.size)
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def _figures(xs: list[float]) -> tuple[float | None, list[float] | None, int]:
    if not xs:
        return None, None, 0
    g, lo, hi = mean_interval(xs)
    return g, [lo, hi], len(xs)


def level(users: int, arms: Mapping[str, Sequence[Case]], tolerance: float = DEFAULT_TOLERANCE,
          levels: int = 1, per_user: Mapping[str, list[float]] | None = None) -> ArmsLevel | None:
    """One level: every arm's per-user decode and aggregate with intervals, the best arm, the ones tied with it,
    and whether the best is decided. None when no arm measured the level. ``levels``: how many levels the case
    judges; the comparisons with the best share ``ALPHA`` over all of them. ``per_user``: each arm's per-trial
    decode where the level reads it otherwise (``trace_level``)."""
    per_user = dict(per_user) if per_user is not None else {name: values(rs, users) for name, rs in arms.items()}
    measured = {name: xs for name, xs in per_user.items() if xs}
    if not measured:
        return None
    figures: dict[str, ArmFigures] = {}
    for name, rs in arms.items():
        dec, dec_interval, n = _figures(per_user[name])
        agg, agg_interval, _ = _figures(values(rs, users, "total_tps"))
        figures[name] = ArmFigures(decode_tps=dec, decode_interval=dec_interval, n=n, total_tps=agg,
                                   total_interval=agg_interval, trials=[float(x) for x in per_user[name]])
    best = max(measured, key=lambda n: float(np.mean(np.log(measured[n]))))
    # Bonferroni over the N - 1 comparisons with the best (the best is the luckiest arm); a level's `below`
    # also splits ALPHA over the case's levels (``case_high``), so the case, not each level, holds it.
    alpha = compare.ALPHA / max(1, len(measured) - 1)
    vs: dict[str, VsBest] = {}
    for name, xs in measured.items():
        if name == best:
            continue
        lb, lx = np.log(measured[best]), np.log(xs)
        d, lo, hi, method = crossover.log_interval(lb, lx, alpha)
        lo, hi = min(lo, d), max(hi, d)
        hi_case = max(d, crossover.log_interval(lb, lx, alpha / levels)[2]) if levels > 1 else hi
        vs[name] = VsBest(ratio=math.exp(d), interval=[math.exp(lo), math.exp(hi)], method=method,
                          case_high=math.exp(hi_case))
    floor = math.log(1 - tolerance)  # the gate's own bound: decided and max_loss_vs_best use one tolerance
    return ArmsLevel(users=users, arms=figures, best=best, vs_best=vs, alpha=alpha,
                     tied=[n for n, c in vs.items() if math.log(c.interval[1]) >= 0],
                     decided=all(math.log(c.interval[1]) < 0 or
                                 (math.log(c.interval[0]) >= floor) for c in vs.values()))


def trace_level(arms: Mapping[str, Sequence[Case]], tolerance: float = DEFAULT_TOLERANCE) -> ArmsLevel | None:
    """A replay's one level, the trace as sent: each arm's median request's decode per trial, taken over the trace
    rows every trial of every arm answered (``figures.over_shared_rows``), so an arm whose server lost the long
    rows is not ranked on a lighter mix; each trial's own median where a trial kept no rows."""
    groups = {name: [t for r in rs for t in figures.trial_rows(r) or []] for name, rs in arms.items()}
    complete = all(len(g) == len(arms[name]) and g for name, g in groups.items())
    shared = figures.over_shared_rows(list(groups.values()), "decode_tps") if complete else None
    if shared is None:
        found = level(1, arms, tolerance)
        return None if found is None else dataclasses.replace(found, label="the trace, each arm over its own rows")
    found = level(1, arms, tolerance, per_user=dict(zip(arms, shared.values, strict=True)))
    return None if found is None else dataclasses.replace(
        found, label=f"the trace's {shared.rows} rows every arm answered")


def table(arms: Mapping[str, Sequence[Case]], *, baseline: str, deployed: str | None = None,
          max_loss: float | None = None, tokens: Mapping[str, int] | None = None) -> ArmsTable:
    """The arms comparison of one case: every level (a replay: the trace, ``trace_level``), the schedule, and
    (``max_loss``) the deployed arm's verdict."""
    names = list(arms)
    tolerance = DEFAULT_TOLERANCE if max_loss is None else max_loss
    users_all = levels_of([r for rs in arms.values() for r in rs])
    if all(isinstance(r, ReplayResult) for rs in arms.values() for r in rs):
        rows = [row for row in [trace_level(arms, tolerance)] if row is not None]
    else:
        rows = [row for users in users_all for row in [level(users, arms, tolerance, len(users_all))]
                if row is not None]
    out = ArmsTable(names=names, baseline=baseline, deployed=deployed or baseline,
                    trials={n: len(rs) for n, rs in arms.items()}, levels=rows,
                    schedule={str(r.users): r.best for r in rows}, max_loss_vs_best=max_loss)
    if tokens and all(n in tokens for n in names):
        out.tokens = dict(tokens)
        out.num_speculative_tokens = {str(r.users): int(tokens[r.best]) for r in rows}
    out.gate = gate(out, max_loss) if max_loss is not None else None
    out.text = schedule_text(out)
    return out


def _users(n: Any) -> str:
    return f"{n} user" + ("" if str(n) == "1" else "s")


def trials_to_hold(noise: float, max_loss: float, alpha: float = compare.ALPHA, power: float = 0.95,
                   most: int = 200) -> int | None:
    """Trials per arm with which an arm as fast as the best is shown within ``max_loss`` of it ``power`` of the
    time, at per-trial noise ``noise`` (log-sd) and ``alpha`` per side: the smallest n (at least 3) with
    ``(t_{1-alpha, 2n-2} + z_power) sd sqrt(2/n) <= -log(1 - max_loss)``; None beyond ``most``."""
    margin = -math.log1p(-max_loss)
    z = float(scipy.special.ndtri(power))
    for n in range(3, most + 1):
        if (compare.t_quantile(1 - alpha, 2 * n - 2) + z) * noise * math.sqrt(2 / n) <= margin:
            return n
    return None


def _noise(*trials: Sequence[float]) -> float | None:
    """The pooled per-trial log-sd of the given arms' trials (None without two trials on some arm)."""
    logs = [np.log(np.asarray(x, dtype=float)) for x in trials if len(x) >= 2]
    dof = sum(x.size - 1 for x in logs)
    return math.sqrt(sum(float(((x - x.mean()) ** 2).sum()) for x in logs) / dof) if dof else None


def gate(t: ArmsTable, max_loss: float) -> ArmsGate:
    """The deployed arm against the best at every level: per level ``holds``, ``below`` or ``inconclusive``."""
    deployed = t.deployed
    floor = math.log(1 - max_loss)
    judged = []
    for row in t.levels:
        mine = row.arms.get(deployed)  # an arm's name: data, not a field
        if mine is None or not mine.n:
            continue
        if row.best == deployed:
            judged.append(ArmsGateLevel(users=row.users, verdict="holds", ratio=1.0, interval=[1.0, 1.0],
                                        label=row.label))
            continue
        c = row.vs_best[deployed]
        alpha = compare.ALPHA if row.alpha is None else row.alpha
        lo = math.log(c.interval[0])
        hi = math.log(c.interval[1] if c.case_high is None else c.case_high)  # the case's alpha decides
        verdict = "below" if hi < floor else "holds" if lo >= floor else "inconclusive"
        best = row.arms[row.best]
        noise = _noise(mine.trials or [], best.trials or [])
        judged.append(ArmsGateLevel(users=row.users, verdict=verdict, ratio=c.ratio, interval=c.interval,
                                    best=row.best, deployed_tps=mine.decode_tps, best_tps=best.decode_tps,
                                    noise=noise,
                                    trials_needed=None if noise is None else trials_to_hold(noise, max_loss, alpha),
                                    label=row.label))
    return ArmsGate(deployed=deployed, max_loss_vs_best=max_loss, levels=judged)


def _write(summary: Result, t: ArmsTable, note: str, reasons: list[str] | None) -> None:
    """Put the table and its note on the case's summary, and with ``reasons`` fail it (they lead)."""
    summary.arms = t
    verdicts.fail(summary, reasons or [], first=True)
    summary.notes.append(note)


def apply(summary: Result, t: ArmsTable, inconclusive: str) -> list[str]:
    """Attach the arms table to the case's row; with ``max_loss_vs_best`` judge it: a level ``below`` fails the
    case, an inconclusive one follows ``inconclusive``. Returns warnings to show."""
    g = t.gate
    if g is None:
        _write(summary, t, t.text, None)
        return []
    below = [lv for lv in g.levels if lv.verdict == "below"]
    unsure = [lv for lv in g.levels if lv.verdict == "inconclusive"]
    fail = below + (unsure if inconclusive == "fail" else [])
    _write(summary, t, t.text, [lv.loss_text(g.deployed, g.max_loss_vs_best) for lv in fail])
    if unsure and inconclusive == "warn":
        return [lv.loss_text(g.deployed, g.max_loss_vs_best) for lv in unsure]
    return []


def schedule_text(t: ArmsTable) -> str:
    """The schedule in one line: the best arm per level, ties named, and the speculative tokens when known."""
    if not t.levels:
        return "arms not compared: no level measured on any arm"
    parts = []
    for row in t.levels:
        tie = f" (tied: {', '.join(row.tied)})" if row.tied else ""
        parts.append(f"{row.label or _users(row.users)} -> {row.best}{tie}")
    text = ("best arm over " if t.levels[0].label else "best arm per level: ") + ", ".join(parts)
    if t.num_speculative_tokens:
        pairs = ", ".join(f'"{k}": {v}' for k, v in t.num_speculative_tokens.items())
        text += f"; num_speculative_tokens by batch size: {{{pairs}}}"
    return text


def decided(t: ArmsTable) -> list[int]:
    """The levels whose best arm is decided (``level``'s ``decided``)."""
    return [row.users for row in t.levels if row.decided]


def settled(t: ArmsTable) -> list[int]:
    """The levels repeat="auto" may stop measuring: the best arm decided and, with ``max_loss_vs_best``, the gate
    too (``holds`` or ``below``). A deployed arm shown slower than the best but not shown within the loss is
    decided for the schedule yet inconclusive for the gate; with identical arms that is the luckiest arm ahead
    by chance, and more trials settle it."""
    gated = t.gate.levels if t.gate is not None else []
    open_gate = {lv.users for lv in gated if lv.verdict == "inconclusive"}
    return [u for u in decided(t) if u not in open_gate]
