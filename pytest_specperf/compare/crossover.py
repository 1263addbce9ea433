"""Speculation's crossover: the concurrency at which B (speculation on) stops being faster for users than A (off).

Run on a ``load_sweep`` in A/B mode (``--specperf-ab=A,B``). The samples are trials, not streams: the
streams of one trial share the engine's batched steps, so a trial gives one value per level, its median
user's decode rate (``trial_figures``). Per level, B's speedup is the geometric-mean ratio of those
values, B over A, and its interval is Welch's t interval of the difference of mean logs at 98 % two-sided
(99 % one-sided either way), exponentiated: the printed speedup is the interval's centre in log space, so
it lies inside its interval by construction.

Each level's verdict against the floor (``min_speedup``, else 1): ``below`` when the whole interval is
under it, ``holds`` when the whole interval is at or above it, ``inconclusive`` otherwise. The crossover
is the first level that does not hold. ``min_speedup`` makes it the sweep's A/B gate: a ``below`` level
fails, an inconclusive one follows ``--specperf-inconclusive``.

Few trials: with two or more trials per arm and some spread, Welch (its degrees of freedom fall to about
``n - 1`` with ``n`` trials a side, so two trials a side give a wide interval). With one trial on one arm,
a prediction interval from the other arm's spread (pooled t). With one trial per arm, or no spread at all,
nothing measures the noise between trials, and the per-trial noise ``compare.NOISE_FLOOR`` (3 %) is
assumed, as ``compare.compare_case`` does; the level's ``method`` and the text say so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_specperf.cases.figures import Case, trial_figures
from pytest_specperf.cases.result_parts import Crossover, SpeedupLevel
from pytest_specperf.cases.results import LoadSweepResult, Result
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare import verdicts


def trial_values(results: Sequence[Case], users: int) -> list[float]:
    """One per-user decode rate per trial at ``users``: each trial's median user, over one arm's results."""
    out: list[float] = []
    for r in results:
        for lv in r.levels if isinstance(r, LoadSweepResult) else []:
            if lv.concurrency == users:
                out += [v for f in trial_figures(lv) for v in [f["decode_tps"]] if v is not None]
    return out


def log_interval(la: np.ndarray, lb: np.ndarray, alpha: float = compare.ALPHA,
                 noise_floor: float = compare.NOISE_FLOOR) -> tuple[float, float, float, str]:
    """``(estimate, lo, hi, method)`` of mean(lb) - mean(la), the interval ``1 - 2 alpha`` two-sided and
    centred on the estimate: Welch, a prediction interval, or the assumed ``noise_floor`` (``compare.interval``,
    the one interval of a difference of mean logs)."""
    d = float(lb.mean() - la.mean())
    _, _, half, method, _ = compare.interval(la, lb, alpha, noise_floor)
    return d, d - half, d + half, method


def speedup_level(users: int, a: list[float], b: list[float], floor: float, family: int = 1) -> SpeedupLevel:
    """B's speedup over A at one level from per-trial values, its interval and verdict against ``floor``.

    ``family``: how many levels can fail the case. The interval is the level's own (98 %); ``below`` needs the
    upper bound at ``ALPHA / family`` per side under the floor, so identical arms fail the case at most ``ALPHA``
    of the time however many levels it has (Bonferroni)."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    d, lo, hi, method = log_interval(la, lb)
    # The estimate is the centre of the interval in log space: [lo, hi] holds it whatever the rounding.
    lo, hi = min(lo, d), max(hi, d)
    hi_case = max(d, log_interval(la, lb, compare.ALPHA / max(1, family))[2]) if family > 1 else hi
    log_floor = math.log(floor)
    verdict = "below" if hi_case < log_floor else "holds" if lo >= log_floor else "inconclusive"
    return SpeedupLevel(users=users, speedup=math.exp(d), interval=[math.exp(lo), math.exp(hi)], verdict=verdict,
                        method=method, a_decode_tps=math.exp(float(la.mean())),
                        b_decode_tps=math.exp(float(lb.mean())), n_a=len(a), n_b=len(b),
                        a_trials=[float(x) for x in a], b_trials=[float(x) for x in b], family=family,
                        case_high=math.exp(hi_case))


def crossover(arm_a: Sequence[Case], arm_b: Sequence[Case], min_speedup: float | None = None) -> Crossover:
    """Per level B's speedup over A for users, and the first level that does not hold the floor (1, or
    ``min_speedup``). ``arm_a``, ``arm_b``: each arm's load-sweep results, one per trial (or combined rows)."""
    floor = 1.0 if min_speedup is None else float(min_speedup)
    pairs = [(users, trial_values(arm_a, users), trial_values(arm_b, users))
             for users in (arm_b[0].concurrency if arm_b and isinstance(arm_b[0], LoadSweepResult) else [])]
    pairs = [(users, a, b) for users, a, b in pairs if a and b]
    # Every level can fail the case: the intervals are joint over them (Bonferroni), so the case holds ALPHA.
    levels = [speedup_level(users, a, b, floor, family=len(pairs)) for users, a, b in pairs]
    first = next((lv for lv in levels if lv.verdict != "holds"), None)
    return Crossover(floor=floor, gated=min_speedup is not None, levels=levels,
                     users=first.users if first else None, speedup=first.speedup if first else None,
                     interval=first.interval if first else None, verdict=first.verdict if first else None,
                     text=_text(first, floor, levels))


def _users(n: int) -> str:
    return f"{n} user" + ("" if n == 1 else "s")


def level_text(lv: SpeedupLevel) -> str:
    """One level's speedup, interval and what they rest on, in words."""
    lo, hi = lv.interval
    how = {"welch": "", "prediction": "; noise from one arm's spread",
           "noise-floor": f"; no spread to measure, {compare.NOISE_FLOOR:.0%} per trial assumed"}
    how_text = how.get(lv.method or "", "")  # none before runs said what the interval rests on
    joint = ""
    if (lv.family or 1) > 1 and lv.verdict != "holds":
        # a below needs the case's share of alpha: the bound it was judged on, beside the level's own interval
        joint = f"; at the case's 1% over {lv.family} levels up to {lv.case_high:.2f}"
    return (f"speedup {lv.speedup:.2f} [{lo:.2f}, {hi:.2f}] ({lv.b_decode_tps:.1f} vs "
            f"{lv.a_decode_tps:.1f} tok/s per user, {lv.n_b} vs {lv.n_a} trials{how_text}{joint})")


def _text(first: SpeedupLevel | None, floor: float, levels: list[SpeedupLevel]) -> str:
    if not levels:
        return "crossover not judged: no level measured on both arms"
    plain = floor == 1.0
    if first is None:
        what = "B faster for users" if plain else f"B's speedup at or above min_speedup {floor:g}"
        return f"{what} at every level up to {_users(levels[-1].users)} (the whole interval)"
    if first.verdict == "below":
        what = "slower for users" if plain else f"under min_speedup {floor:g}"
    else:
        what = "not shown faster for users" if plain else f"not shown to reach min_speedup {floor:g}"
    return f"B {what} from {_users(first.users)}: {level_text(first)}"


def _write(summary: Result, result: Crossover, note: str | None, reasons: list[str] | None) -> None:
    """Put the crossover on B's summary, with ``note`` among its notes, and with ``reasons`` fail it (they lead)."""
    if isinstance(summary, LoadSweepResult):  # the only kind with a crossover
        summary.crossover = result
    verdicts.fail(summary, reasons or [], first=True)
    if note is not None:
        summary.notes.append(note)


def apply(summary: Result, arm_a: Sequence[Case], arm_b: Sequence[Case], inconclusive: str
          ) -> list[str]:
    """Attach the crossover to B's summary; with ``min_speedup`` it is the sweep's A/B gate: a level below
    the floor fails it, an inconclusive one follows ``inconclusive``. Returns warnings to show."""
    result = crossover(arm_a, arm_b, summary.min_speedup if isinstance(summary, LoadSweepResult) else None)
    if not result.gated:
        _write(summary, result, result.text, None)
        return []
    floor = result.floor
    below = [lv for lv in result.levels if lv.verdict == "below"]
    unsure = [lv for lv in result.levels if lv.verdict == "inconclusive"]
    fail = below + (unsure if inconclusive == "fail" else [])
    if fail and summary.verdict != "error":
        # The crossover names the first level that does not hold; the levels failing past it are named too.
        more = [f"at {_users(lv.users)}: {'below' if lv.verdict == 'below' else 'not shown to reach'} "
                f"min_speedup {floor:g}, {level_text(lv)}"
                for lv in sorted(fail, key=lambda lv: lv.users) if lv.users != result.users]
        # The crossover first: it is what the case asked (min_speedup), the rest explains the levels.
        _write(summary, result, None, [result.text, *more])
        return []
    _write(summary, result, None, None)
    return [result.text] if unsure and inconclusive == "warn" else []


def unjudged(result: Result) -> None:
    """Outside A/B, note on a load sweep that its ``min_speedup`` was not judged, and why."""
    if isinstance(result, LoadSweepResult) and result.min_speedup is not None and not result.crossover:
        result.notes.append(
            f"min_speedup {result.min_speedup:g} not judged: the speedup is B over A per level, which needs "
            "an A/B run (--specperf-ab=A_URL,B_URL)")
