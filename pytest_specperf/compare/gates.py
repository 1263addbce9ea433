"""Regression gates over measured results: against a stored baseline, or B against A in one session (ABBA).

Pytest-free glue between the runner and ``compare``: it decides the case's verdict and reason,
and attaches the comparisons to the result dict as plain data (``comparisons``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from pytest_specperf.cases.json_form import to_dict  # TRANSITIONAL: the arms table into dict rows (trials branch)
from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.cases.results import LoadLevel, LoadSweepResult, Result, SustainedResult
from pytest_specperf.cases.saved_results import load_part
from pytest_specperf.compare import arms as arms_table
from pytest_specperf.compare import categories, crossover, sequential
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare.trials import Case, read

_T = TypeVar("_T", SustainedResult, LoadLevel)

METRICS = ("decode_tps", "ttft_s", "total_tps")  # total_tps: load cases only
#: Open-loop cases are judged on what they gate (a metric a case lacks is skipped).
KIND_METRICS = {"rate": ("goodput_rps", "attainment", "ttft_p90_s", "tpot_p90_ms", "e2e_p90_s"),
                "capacity": ("max_rps",)}


def metrics_for(result: Result | dict[str, Any]) -> tuple[str, ...]:
    """The metrics compared for a result of this kind."""
    kind = read(result, "kind")
    return KIND_METRICS.get(str(kind), METRICS)
# Changes of time-to-first-token below this are client and OS noise, not a regression (a few ms on localhost).
TTFT_FLOOR_S = 0.010


@dataclass(frozen=True)
class Gate:
    """How comparisons turn into verdicts."""

    max_regression: float = 0.05
    inconclusive: str = "warn"  # pass | warn | fail

    def apply(self, result: Result | dict[str, Any], comparisons: list[CaseComparison], *,
              judge: bool = True) -> list[str]:
        """Record the comparisons on ``result``; fail it on a regression; return warnings to show.
        ``judge=False`` only records them (another gate judges the case)."""
        own = [cc for cc in comparisons if cc.nodeid == read(result, "nodeid")]
        fail, warn = compare.gate(own, self.inconclusive) if judge else ([], [])
        if isinstance(result, Result):
            result.comparisons = own
            if fail and result.verdict != "error":
                result.verdict = "failed"
                result.reason = "; ".join([r for r in [result.reason] if r] + [cc.reason for cc in fail])
        else:  # untyped part: trial rows (A/B and arms combine them as data), or the CLI's data
            result["comparisons"] = [cc.as_dict() for cc in own]
            if fail and read(result, "verdict") != "error":
                result["verdict"] = "failed"
                prior = read(result, "reason", "")
                result["reason"] = "; ".join([r for r in [prior] if r] + [cc.reason for cc in fail])
        return [cc.reason for cc in warn]


def _data(result: Result | Mapping[str, Any]) -> Result | dict[str, Any]:
    """A result as the statistics below read it: a typed one as it is, data (the CLI's) as a plain dict."""
    return result if isinstance(result, Result) else dict(result)


def against_baseline(gate: Gate, result: Result | dict[str, Any], baseline: Sequence[Result | Mapping[str, Any]],
                     max_regression: float | None = None, differences: list[str] | None = None,
                     strict: bool = False, *, auto: bool = False, keys: Collection[str] | None = None) -> list[str]:
    """Compare one case with the baseline run's results (the case's own keyword overrides the threshold); sets
    its ``comparisons``, fails it on a regression. A result given as data (the CLI's) is judged in place.
    ``keys``: judge only these units of the case (``case_key``: its levels, its sweep points), the rest being
    judged elsewhere (the history gate falls back here for the units whose history is short).

    ``differences`` are ways the baseline was measured unlike this run (model, server version, machine, ...):
    they are named in every reason, and turn a would-be regression into ``inconclusive`` unless ``strict``.
    ``auto``: the case ran with repeat="auto", so the sequential test's verdict is the one that stopped it.
    """
    row = result
    data = [_data(b) for b in baseline]
    mine = [b for b in data if read(b, "nodeid") == read(row, "nodeid")]
    threshold = max_regression or gate.max_regression
    base, cand = per_trial(mine), per_trial([row])
    if auto:
        ccs = sequential.sprt_runs(base, cand, max_regression=threshold, metrics=METRICS, final=True)
    else:
        ccs = compare.compare_runs(base, cand, max_regression=threshold, metrics=metrics_for(result))
    unlike = [*(differences or []), *_case_differences(mine, row)]
    judged = _unlike(_ttft_judged(ccs, base, cand), unlike, strict)
    if keys is not None:
        judged = [cc for cc in judged if cc.key in keys]
    return gate.apply(result, judged) + (sequential.noise_warnings(judged) if auto else [])


def _is_load(result: Case) -> bool:
    """A load sweep, or a sustained case whose streams ran at once (concurrency > 1)."""
    users = read(result, "concurrency")
    return read(result, "kind") == "load_sweep" or (
        read(result, "kind") == "sustained" and isinstance(users, int) and not isinstance(users, bool) and users > 1)


def _one_trial(case: dict[str, Any], figures: dict[str, float | None]) -> dict[str, Any]:
    return {**{k: v for k, v in case.items() if k not in ("streams", "trials")}, **figures}


def _one_typed_trial(case: _T, figures: dict[str, float | None]) -> _T:
    """``_one_trial`` of a typed result or level: its figures those of one trial, no streams or trials left."""
    changes: dict[str, Any] = {"streams": [], "trials": None, **figures}
    return dataclasses.replace(case, **changes)


def _per_typed_trial(r: Result) -> list[Result]:
    """``per_trial`` of one typed load result (a sustained load case, or a load sweep)."""
    if isinstance(r, LoadSweepResult):
        levels = [(lv, crossover.trial_figures(lv)) for lv in r.levels if isinstance(lv, LoadLevel)]
        return [dataclasses.replace(r, levels=[_one_typed_trial(lv, f[i]) for lv, f in levels if i < len(f)])
                for i in range(max((len(f) for _, f in levels), default=1))]
    if isinstance(r, SustainedResult):
        return [_one_typed_trial(r, f) for f in crossover.trial_figures(r)]
    return [r]


def per_trial(results: Sequence[Case]) -> list[Any]:
    """Results as comparisons see them: a load case gives one value per trial per level (that trial's median
    user, its aggregate), not one per stream, since the streams of one trial share the engine's batched steps.

    A row that combines trials (an A/B arm, ``aggregate``) becomes one result per trial; other results
    pass unchanged (a sustained case's sequential streams are its trials).
    """
    out: list[Any] = []
    for r in results:
        if isinstance(r, Result) and r.verdict != "error" and _is_load(r) and r.kind in ("sustained", "load_sweep"):
            out += _per_typed_trial(r)
        elif not isinstance(r, dict) or r.get("verdict") == "error" or not _is_load(r):  # untyped part: trial rows
            out.append(r)
        elif r.get("kind") == "sustained":  # untyped part: trial rows
            out += [_one_trial(r, f) for f in crossover.trial_figures(r)]
        else:
            rows = r.get("levels") or []  # untyped part: trial rows
            levels = [(lv, crossover.trial_figures(lv)) for lv in rows if isinstance(lv, dict)]
            for i in range(max((len(f) for _, f in levels), default=1)):
                out.append({**r, "levels": [_one_trial(lv, f[i]) for lv, f in levels if i < len(f)]})
    return out


def speedup_gated(result: dict[str, Any]) -> bool:
    """A load sweep with ``min_speedup``: in A/B its speedup floor is its gate, instead of the regression gate."""
    return read(result, "kind") == "load_sweep" and read(result, "min_speedup") is not None


def _case_differences(base: Sequence[Case], result: Case) -> list[str]:
    """Per-case settings that make a baseline measure something else (sampling temperature)."""
    temps = {read(b, "temperature", 0.0) for b in base}
    now = read(result, "temperature", 0.0)
    return [f"temperature: {t!r} (baseline) != {now!r} (now)" for t in temps if t != now]


def _unlike(ccs: list[CaseComparison], differences: list[str], strict: bool) -> list[CaseComparison]:
    """Say how the baseline differs in every reason; without ``strict`` a regression is only inconclusive."""
    if not differences:
        return ccs
    what = "; ".join(differences)
    out = []
    for cc in ccs:
        if cc.comparison is None:
            out.append(cc)
            continue
        verdict = cc.verdict
        if verdict == "regressed" and not strict:
            verdict = "inconclusive"
            why = f"{cc.reason}; not comparable ({what}): inconclusive, --specperf-compare-strict judges it anyway"
        else:
            why = f"{cc.reason}; baseline differs ({what})"
        out.append(_with_verdict(cc, verdict, why))
    return out


def _with_verdict(cc: CaseComparison, verdict: str, reason: str) -> CaseComparison:
    """The same comparison with a new verdict and reason, inside and out, so every report says one thing."""
    inner = replace(cc.comparison, verdict=verdict, reason=reason) if cc.comparison is not None else None
    return replace(cc, verdict=verdict, reason=reason, comparison=inner)


def run_ab(measure_a: Callable[[], Result], measure_b: Callable[[], Result], trials: int, gate: Gate,
           max_regression: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """Measure A and B interleaved ABBA (``trials`` each), judge B against A; returns B's summary and warnings."""
    arms = arms_table.measure({"A": lambda: measure_a().as_dict(), "B": lambda: measure_b().as_dict()}, trials)
    a, b = per_trial(arms["A"]), per_trial(arms["B"])
    ccs = compare.compare_ab(a, b, max_regression=max_regression or gate.max_regression,
                             metrics=metrics_for(arms["B"][0]))
    return _ab_summary(arms, _ttft_judged(ccs, a, b, sides=("A", "B")), gate)


def until_baseline(gate: Gate, nodeid: str, baseline: Sequence[Result | Mapping[str, Any]],
                   max_regression: float | None = None) -> sequential.Until:
    """The runner's ``until`` for repeat="auto" against a stored run (same metrics and noise floor as the gate)."""
    return sequential.until_baseline([_data(b) for b in baseline], nodeid,
                                     max_regression=max_regression or gate.max_regression, metrics=METRICS,
                                     judge=_ttft_judged)


def until_saved(gate: Gate, max_repeat: int, max_regression: float | None = None) -> sequential.Until:
    """The runner's ``until`` for repeat="auto" saved with nothing to compare: trials until the run can serve as
    a baseline at its own noise (``max_repeat`` at most); a TTFT whose threshold is under the floor is not sized."""
    return sequential.until_saved(max_repeat=max_repeat, max_regression=max_regression or gate.max_regression,
                                  floors={"ttft_s": TTFT_FLOOR_S})


def saved_notes(gate: Gate, result: Result, max_repeat: int, max_regression: float | None = None) -> list[str]:
    """Warnings for a saved repeat="auto" run too noisy to judge a candidate of ``max_repeat`` trials against."""
    return sequential.saved_notes(result, max_repeat=max_repeat,
                                  max_regression=max_regression or gate.max_regression, floors={"ttft_s": TTFT_FLOOR_S})


def run_ab_auto(measure_a: Callable[[], Result], measure_b: Callable[[], Result], max_repeat: int, gate: Gate,
                max_regression: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """As ``run_ab`` with repeat="auto": ABBA rounds until the sequential test decides, ``max_repeat`` per arm."""
    a, b, ccs = sequential.run_ab(lambda: measure_a().as_dict(), lambda: measure_b().as_dict(),
                                  max_repeat=max_repeat, max_regression=max_regression or gate.max_regression,
                                  metrics=METRICS, judge=_ab_judged)
    summary, warnings = _ab_summary({"A": a, "B": b}, ccs, gate)
    return summary, warnings + sequential.noise_warnings(ccs)


def _ab_summary(arms: dict[str, list[dict[str, Any]]], ccs: list[CaseComparison], gate: Gate
                ) -> tuple[dict[str, Any], list[str]]:
    trials = len(arms["B"])
    summary = aggregate(arms["B"], arm="B")
    a_row = aggregate(arms["A"], arm="A")
    summary["ab"] = {"trials": trials, "a_endpoint": arms["A"][0]["endpoint"], "b_endpoint": summary["endpoint"],
                     "a": {k: v for k, v in a_row.items() if k in AGGREGATED},
                     "a_decode_tps": [r["decode_tps"] for r in arms["A"]],
                     "b_decode_tps": [r["decode_tps"] for r in arms["B"]]}
    if summary.get("kind") == "load_sweep":  # untyped part: trial rows
        summary["ab"]["a_levels"] = a_row.get("levels")  # untyped part: A's rows, every trial (the speedups' divisor)
    gated = speedup_gated(summary)  # then the floor (crossover.apply) judges it; comparisons are only shown
    warnings = gate.apply(summary, ccs, judge=not gated)
    if gated:
        summary.setdefault("notes", []).append(
            f"A/B judged by min_speedup {summary['min_speedup']:g}, B's per-user speedup at every level; the "
            "per-level comparisons are shown, not gated")
    if summary.get("kind") == "load_sweep":  # untyped part: trial rows
        warnings += crossover.apply(summary, arms["A"], arms["B"], gate.inconclusive)
        # the two-arm case, shown as N arms; TRANSITIONAL: as data while the summary is a dict (trials branch)
        summary["arms"] = to_dict(arms_table.table(arms, baseline="A", deployed="B"))
    categories.apply(summary, arms["A"], arms["B"])  # a prompt file's categories: speedup per category
    return summary, warnings


#: One trial of one arm: ``(arm name, levels)`` -> its result; ``levels`` None runs the case as written, else
#: a load sweep over only those levels (repeat="auto" stops measuring a level once its best arm is decided).
ArmMeasure = Callable[[str, "list[int] | None"], Result]


def run_arms(measure: ArmMeasure, names: list[str], trials: int, gate: Gate, *, baseline: str,
             deployed: str | None = None, max_loss: float | None = None, tokens: dict[str, int] | None = None,
             auto: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Measure every arm interleaved (``trials`` each; with ``auto`` rounds until every level's best arm is
    decided, at most ``trials`` full sweeps' worth of level-trials per arm, spent on the open levels) and judge
    the deployed arm against the best; returns its row and warnings.

    The case's row is the deployed arm's (the baseline's when none is named), every trial combined; the arms
    comparison is in ``arms``. Without ``auto`` this is ``arms_table.measure``, the same loop A/B runs.
    """
    if not auto:
        def trial(n: str) -> Callable[[], dict[str, Any]]:  # binds this arm's name now, not the loop's last
            return lambda: measure(n, None).as_dict()

        results = arms_table.measure({n: trial(n) for n in names}, trials)
    else:
        results = {n: [] for n in names}
        open_levels: list[int] | None = None
        # The budget is ``trials`` full sweeps per arm, counted in level-trials: what a decided level no longer
        # takes goes to the open ones, so a case holds as a whole (every level must decide), not level by level.
        budget, spent, round_, cost = trials, 0, 0, 1  # per arm; a round costs its open levels (all at first)
        while spent + cost <= budget:
            for n in compare.arm_order(names, round_ + 1)[-len(names):]:  # this round's order
                results[n].append(measure(n, open_levels).as_dict())
            if round_ == 0:
                cost = max(1, len(arms_table.levels_of(results[names[0]])))
                budget = trials * cost
            round_, spent = round_ + 1, spent + cost
            if round_ < sequential.MIN_TRIALS:
                continue
            t = arms_table.table(results, baseline=baseline, deployed=deployed, max_loss=max_loss)
            done = set(arms_table.settled(t))
            open_levels = [row.users for row in t.levels if row.users not in done]
            if not open_levels:
                break
            cost = len(open_levels)
    row = aggregate(results[deployed or baseline], arm=deployed or baseline)
    if auto and row.get("kind") == "load_sweep":  # untyped part: trial rows
        # later trials swept only the open levels: the row speaks for every level, its top one as for one trial
        row["concurrency"] = arms_table.levels_of(results[deployed or baseline])
        levels = row.get("levels") or []  # untyped part: trial rows
        row["levels"] = sorted(levels, key=lambda lv: lv.get("concurrency") or 0)  # untyped part: trial rows
        top = row["levels"][-1].get("decode_tps") if row["levels"] else None  # untyped part: trial rows
        row["decode_tps"] = top if row["levels"] else row.get("decode_tps")  # untyped part: trial rows
    t = arms_table.table(results, baseline=baseline, deployed=deployed, max_loss=max_loss, tokens=tokens)
    t.endpoints = {n: rs[0].get("endpoint") for n, rs in results.items() if rs}  # untyped part: trial rows
    # open-loop kinds have no per-user decode per level to rank arms by
    if row.get("kind") in KIND_METRICS:  # untyped part: trial rows
        row["arms"] = to_dict(replace(t, levels=[]))  # TRANSITIONAL: as data while the row is a dict
        row.setdefault("notes", []).append("arms measured; open-loop cases are not ranked per level")
        return row, []
    return row, arms_table.apply(row, t, gate.inconclusive)


#: Scalar figures an A/B row shows as the median over an arm's trials.
AGGREGATED = ("decode_tps", "client_tps", "ttft_s", "total_s", "early_tps", "late_tps", "drift", "tokens_per_chunk",
              "burst_tps", "burst_gap", "t_short_s", "t_long_s", "prompt_tokens", "completion_tokens")


def aggregate(trials: list[dict[str, Any]], arm: str | None = None) -> dict[str, Any]:
    """One row for several trials of a case: medians of the figures, every stream and sample kept, the worst
    verdict with every distinct reason. A load sweep's level rows combine every trial the same way
    (``combine_levels``); a load case keeps each trial's figures in ``trials``, its streams say their trial.
    ``arm`` names the arm the trials measured in the reasons that say which trial gave them."""
    out = dict(trials[-1])
    for key in AGGREGATED:
        values = [r[key] for r in trials if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)]
        if values:
            out[key] = float(np.median(values))
    for key in ("streams", "samples_tps", "server_samples_tps", "warnings", "notes"):
        if any(key in r for r in trials):
            out[key] = [x for r in trials for x in r.get(key) or []]
    if any(r.get("verdict") == "failed" for r in trials):  # untyped part: trial rows
        out["verdict"] = "failed"
    out["reason"] = "; ".join(dict.fromkeys(r["reason"] for r in trials if r.get("reason")))  # untyped part: trial rows
    out["repeat"] = sum(int(r.get("repeat") or 1) for r in trials)  # untyped part: trial rows
    out["started_at"] = min(r.get("started_at", 0.0) for r in trials)  # untyped part: trial rows
    if len(trials) > 1 and _is_load(out):
        if out.get("kind") == "load_sweep":  # untyped part: trial rows
            out["levels"] = combine_levels(trials, arm)
            level_totals = [lv.get("total_tps") for lv in out["levels"]]  # untyped part: trial rows
            totals = [t for t in level_totals if _number(t) is not None]
            out["total_tps"] = max(totals) if totals else None  # the best level, as for one trial
        else:
            out.update(_combined_load(list(enumerate(trials)), arm))
    return out


#: Per-level figures a combined level row shows as the median over trials (counts are summed).
LEVEL_MEDIANS = ("prompt_tokens", "completion_tokens", "decode_tps", "decode_p10_tps", "total_tps", "common_window_s",
                 "ttft_s", "ttft_p50_s", "ttft_p90_s", "step_ms", "drift", "early_tps", "late_tps",
                 "tokens_per_chunk", "accept_len")
_SEVERITY = {"error": 3, "failed": 2, "inconclusive": 1}


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
        return None
    return float(v)


#: The drift figures a row shows from the trial whose drift verdict decided it, so the row and its reason agree.
DRIFT_FIELDS = ("drift", "early_tps", "late_tps", "drift_gate", "drift_verdict")


def _combined_load(entries: list[tuple[int, dict[str, Any]]], arm: str | None = None) -> dict[str, Any]:
    """The fields of one load row (a level, or a sustained load case) over trials ``(index, row)``: medians,
    summed stalls, every stream tagged with its trial, the worst verdict with each distinct reason (and which
    arm and trial gave it), and each trial's own figures in ``trials``. Where a trial's drift failed or was
    inconclusive the row shows that trial's drift (the worst), not the median of all: one level, one drift."""
    n = len(entries)
    worst = max(entries, key=lambda e: _SEVERITY.get(str(e[1].get("verdict")), 0))[1]  # untyped part: trial rows
    out: dict[str, Any] = {"verdict": worst.get("verdict")}  # untyped part: trial rows
    for key in LEVEL_MEDIANS:
        values = [x for _, row in entries for x in [_number(row.get(key))] if x is not None]
        if any(key in row for _, row in entries):
            out[key] = float(np.median(values)) if values else None
    bad = ("failed", "inconclusive")
    drifted = [row for _, row in entries if row.get("drift_verdict") in bad]  # untyped part: trial rows
    if drifted:
        def severity(r: dict[str, Any]) -> tuple[int, float]:
            drift = _number(r.get("drift")) or 0.0  # untyped part: trial rows
            return _SEVERITY.get(str(r.get("drift_verdict")), 0), drift  # untyped part: trial rows

        decided = max(drifted, key=severity)
        out.update({key: decided.get(key) for key in DRIFT_FIELDS if key in decided})
    for key in ("stalls", "stall_s"):
        if any(key in row for _, row in entries):
            out[key] = sum(_number(row.get(key)) or 0 for _, row in entries)
    streams = [(i, row.get("streams") or []) for i, row in entries]  # untyped part: trial rows
    out["streams"] = [{**s, "trial": i} for i, ss in streams for s in ss if isinstance(s, dict)]
    for key in ("warnings", "notes"):
        out[key] = list(dict.fromkeys(x for _, row in entries for x in row.get(key) or []))
    who = f"arm {arm}, " if arm else ""
    out["reason"] = "; ".join(dict.fromkeys(f"{who}trial {i + 1} of {n}: {row['reason']}" for i, row in entries
                                            if row.get("reason")))  # untyped part: trial rows
    out["trials"] = [crossover.trial_figures(row)[0] for _, row in entries]
    return out


def combine_levels(trials: list[dict[str, Any]], arm: str | None = None) -> list[dict[str, Any]]:
    """A load sweep's level rows over every trial, in the sweep's order: each shows what all trials measured
    (medians), under the worst of their verdicts, never one trial's figures under another's verdict."""
    by_users: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for i, r in enumerate(trials):
        for lv in r.get("levels") or []:  # untyped part: trial rows
            if isinstance(lv, dict):
                by_users.setdefault(lv.get("concurrency"), []).append((i, lv))  # untyped part: trial rows
    rows = []
    for entries in by_users.values():
        worst = max(entries, key=lambda e: _SEVERITY.get(str(e[1].get("verdict")), 0))[1]  # untyped part: trial rows
        rows.append({**worst, **_combined_load(entries, arm)})
    return rows


def _median_ttft(results: Sequence[Case]) -> dict[tuple[str, int | None, int | None], float]:
    """The median TTFT of each sub-case (a case, sweep point or load level) over its trials."""
    values: dict[tuple[str, int | None, int | None], list[float]] = {}
    for r in results:
        if not isinstance(r, dict | Result) or read(r, "verdict") == "error":
            continue
        for nodeid, ctx, case in compare.sub_cases(r):
            values.setdefault((nodeid, ctx, compare.users_of(case)), []).extend(compare.trials(case, "ttft_s"))
    return {k: float(np.median(v)) for k, v in values.items() if v}


def _ttft_floor(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case]) -> list[CaseComparison]:
    """A TTFT change smaller than TTFT_FLOOR_S in absolute terms is noise, not news: it passes, saying why, for a
    case, a sweep point and each load level alike (an 'improved' inside the floor is no more real than a
    'regressed')."""
    b, c = _median_ttft(base), _median_ttft(cand)
    out = []
    for cc in ccs:
        key = (cc.nodeid, cc.ctx, cc.users)
        if (cc.metric == "ttft_s" and cc.verdict in ("regressed", "inconclusive", "improved") and key in b
                and key in c and abs(c[key] - b[key]) < TTFT_FLOOR_S):
            at = "" if cc.users is None else f"at {cc.users} user{'' if cc.users == 1 else 's'}: "
            why = (f"{at}ttft_s {b[key] * 1000:.1f} -> {c[key] * 1000:.1f} ms: within the "
                   f"{TTFT_FLOOR_S * 1000:.0f} ms noise floor")
            cc = _with_verdict(cc, "passed", why)
        out.append(cc)
    return out


#: Sides whose cached shares differ by more than this measured different prefills: their TTFTs do not compare.
CACHE_SHARE_GAP = 0.10


def _median_share(results: Sequence[Case]) -> float | None:
    values = [float(read(r, "cached_share")) for r in results if _number(read(r, "cached_share")) is not None]
    return float(np.median(values)) if values else None


def _ttft_judged(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case],
                 sides: tuple[str, str] = ("baseline", "now")) -> list[CaseComparison]:
    """TTFT comparisons after the noise floor and the prefix cache (``_ttft_floor``, ``_cache_differs``)."""
    return _cache_differs(_ttft_floor(ccs, base, cand), base, cand, sides)


def _ab_judged(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case]) -> list[CaseComparison]:
    return _ttft_judged(ccs, base, cand, ("A", "B"))


def _cache_differs(ccs: list[CaseComparison], base: Sequence[Case], cand: Sequence[Case],
                   sides: tuple[str, str]) -> list[CaseComparison]:
    """Sides whose cached shares differ (or whose cold requests came back cached) measured the prefix cache,
    not the server, in their TTFT: that comparison is inconclusive and every reason names the shares."""
    b, c = _median_share(base), _median_share(cand)
    hot = next((read(r, "ttft_cache") for r in [*base, *cand] if read(r, "ttft_cache")), "")
    differ = b is not None and c is not None and abs(b - c) > CACHE_SHARE_GAP
    if not differ and not hot:
        return ccs
    what = (f"cached share of the prompt {b:.2f} ({sides[0]}) vs {c:.2f} ({sides[1]})" if differ
            else hot.removeprefix("ttft inconclusive: "))
    out = []
    for cc in ccs:
        if cc.comparison is None:
            out.append(cc)
        elif cc.metric in ("ttft_s", "ttft_p90_s") and cc.verdict in ("regressed", "improved"):
            out.append(_with_verdict(cc, "inconclusive", f"{cc.reason}; {what}: the prefix cache moved TTFT, "
                                                         "inconclusive"))
        else:
            out.append(_with_verdict(cc, cc.verdict, f"{cc.reason}; {what}"))
    return out


def comparisons_of(results: Sequence[Result | Mapping[str, Any]]) -> list[CaseComparison]:
    """Every result's comparisons (rebuilt from data where a result is still data: the CLI's)."""
    out: list[CaseComparison] = []
    for r in results:
        if isinstance(r, Result):
            out += r.comparisons or []
            continue
        out += [load_part(d, CaseComparison) for d in read(r, "comparisons") or []]
    return out
