"""Floors and gates shared by the kinds: a result plus its spec -> verdict and a one-line diagnosis.

Plain functions the kinds call (a kind's own floors live in its module); nothing here knows of a kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_specperf.cases.base import CaseSpec, is_number
from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.cases.result_parts import Goal
from pytest_specperf.cases.results import RateResult, Result, SustainedResult
from pytest_specperf.run import categories, lateness
from pytest_specperf.run.stream_figures import slower_phase


@dataclass(frozen=True)
class JudgeSettings:
    """How a run judges its cases: the default drift limit, and what an undecided gate does (pass | warn | fail)."""

    max_drift: float = 0.15
    inconclusive: str = "warn"


def settle(result: Result, spec: CaseSpec, problems: list[str], inconclusive: str) -> None:
    """Set ``result.verdict`` and ``result.reason`` from a kind's failed checks (most telling first).

    The floor is recorded for the reports; a client behind its schedule judges nothing (``lateness``).
    """
    # a {category: floor} mapping is recorded per category (categories.floor_problems), not as one line to draw;
    # a load sweep's {level: floor} mapping is drawn per level
    per_category = isinstance(spec.min_tps, Mapping) and spec.KIND != "load_sweep"
    result.min_tps = None if per_category else spec.min_tps
    result.goals = goals_of(result, spec) or None
    problems = lateness.judge(result, problems, inconclusive)
    result.verdict = "failed" if problems else "passed"
    result.reason = "; ".join(problems)


def judge_sustained(result: SustainedResult, spec: SustainedSpec, settings: JudgeSettings) -> None:
    """Judge a sustained case, single-stream or under load (each level of a load sweep is one).

    A drift the gate cannot decide follows ``settings.inconclusive`` (pass | warn | fail): a warning is
    kept in ``result.warnings``; a gate that could not be judged at all is said in ``result.notes``.
    """
    result.min_total_tps = spec.min_total_tps
    problems = _sustained(result, spec, spec.max_drift if spec.max_drift is not None else settings.max_drift)
    problems += categories.floor_problems(result.categories, spec, per_user=result.decode_p10_tps is not None)
    result.notes += [n for n in categories.unsent_floors(result.categories, spec) if n not in result.notes]
    _undecided_drift(result, spec, settings.inconclusive, problems)
    ttft_from_cache(result, any(getattr(spec, k) is not None for k in TTFT_CEILINGS), settings.inconclusive, problems)
    settle(result, spec, problems, settings.inconclusive)


#: every TTFT ceiling keyword of the closed-loop kinds and the session (a cached prefill makes each inconclusive)
TTFT_CEILINGS = ("max_ttft_s", "max_ttft_p90_s", "max_ttft_p99_s", "max_ttft_content_s")


def ttft_from_cache(r: Result, gated: bool, policy: str, problems: list[str]) -> None:
    """Requests meant to be cold came back cached (``r.ttft_cache``): a TTFT floor asked for is inconclusive and
    follows the policy (pass | warn | fail); without one the result still says so in its notes."""
    if not r.ttft_cache:
        return
    if gated and policy == "fail":
        problems.append(r.ttft_cache)
    elif gated and policy == "warn":
        r.warnings.append(r.ttft_cache)
    else:
        r.notes.append(r.ttft_cache)


def _sustained(r: SustainedResult, spec: SustainedSpec, max_drift: float) -> list[str]:
    out: list[str] = []
    where = f"over {r.completion_tokens} tokens at ctx {r.prompt_tokens}"
    if r.drift_failed and r.drift is not None:
        out.append(f"drift {r.drift:.2f} > {max_drift:g}: early {r.early_tps:.1f} tok/s -> late "
                   f"{r.late_tps:.1f} tok/s {where}" + _causes(r))
    if r.decode_p10_tps is not None:  # measured as a load case
        out += _load_floors(r, spec, where)
    elif is_number(spec.min_tps) and r.decode_tps < spec.min_tps:
        out.append(f"decode {r.decode_tps:.1f} tok/s < min_tps {spec.min_tps:g} {where}")
    if spec.max_burst_gap is not None and r.burst_gap is not None and r.burst_gap > spec.max_burst_gap:
        out.append(f"burst gap {r.burst_gap:.2f} > {spec.max_burst_gap:g}: sustained {r.decode_tps:.1f} tok/s vs "
                   f"two-point {r.burst_tps:.1f} tok/s at ctx {r.prompt_tokens}")
    acc = r.acceptance
    mean_len = acc.mean_len if acc is not None else None
    if is_number(spec.min_accept_len) and acc is not None and mean_len is not None and mean_len < spec.min_accept_len:
        out.append(f"acceptance {mean_len:.2f} tokens/step < min_accept_len {spec.min_accept_len:g} "
                   f"({acc.source}) {where}")
    split = r.attribution
    if spec.max_accept_drop is not None and split is not None:
        early, late = split.accept_early, split.accept_late
        drop = 1.0 - late / early if early is not None and late is not None else 0.0
        if drop > spec.max_accept_drop:
            out.append(f"acceptance drop {drop:.2f} > max_accept_drop {spec.max_accept_drop:g}: "
                       f"{early:.1f} -> {late:.1f} tokens/step {where}")
    if r.ttft_cache:  # a cached prefill: the TTFT floors are inconclusive (judge_sustained, by the policy)
        return out
    ttft = ttft_label(r)
    if spec.max_ttft_s is not None and r.ttft_s > spec.max_ttft_s:
        out.append(f"{ttft} {r.ttft_s:.3f} s > max_ttft_s {spec.max_ttft_s:g} at ctx {r.prompt_tokens}"
                   + (f" with {r.concurrency} users" if r.concurrency > 1 else ""))
    for name, label, value in (("max_ttft_p90_s", "ttft p90", r.ttft_p90_s), ("max_ttft_p99_s", "ttft p99",
                                                                             r.ttft_p99_s)):
        bound = getattr(spec, name)
        if bound is not None and value is not None and value > bound:
            out.append(f"{label} {value:.3f} s > {name} {bound:g} at ctx {r.prompt_tokens} with {r.concurrency} "
                       f"users (median {r.ttft_s:.3f} s)")
    # Without a reasoning phase the first token is the answer's, so the floor reads ttft_s.
    ttft_content = r.ttft_content_s if r.ttft_content_s is not None else r.ttft_s
    if spec.max_ttft_content_s is not None and ttft_content > spec.max_ttft_content_s:
        after = f" (after {r.reasoning_tokens} reasoning tokens)" if r.reasoning_tokens else ""
        out.append(f"time to first answer token {ttft_content:.3f} s > max_ttft_content_s "
                   f"{spec.max_ttft_content_s:g}{after} at ctx {r.prompt_tokens}")
    return out


def ttft_label(r: SustainedResult) -> str:
    """What a sustained result's ``ttft_s`` is: one stream's TTFT ('ttft'), or the median of several ('ttft p50')."""
    return "ttft p50" if r.concurrency > 1 or len(r.streams) > 1 else "ttft"


#: keyword -> (the result's attribute it judges, its label, unit, True for a floor); kind-specific ones below
_GOALS: dict[str, tuple[str, str, str, bool]] = {
    "min_tps": ("decode_tps", "decode", "tok/s", True),
    "min_total_tps": ("total_tps", "aggregate", "tok/s", True),
    "max_ttft_s": ("ttft_s", "ttft", "s", False),
    "max_ttft_p90_s": ("ttft_p90_s", "ttft p90", "s", False),
    "max_ttft_p99_s": ("ttft_p99_s", "ttft p99", "s", False),
    "max_ttft_content_s": ("ttft_content_s", "first answer token", "s", False),
    "max_burst_gap": ("burst_gap", "burst gap", "", False),
    "min_attainment": ("attainment", "SLO attainment", "", True),
    "min_goodput": ("goodput_rps", "goodput", "req/s", True),
    "min_rps": ("max_rps", "capacity", "req/s", True),
    "min_cache_hit": ("cache_hit", "cache hit", "", True),
}


def goals_of(r: Result, spec: CaseSpec) -> list[Goal]:
    """The floors and ceilings ``spec`` set that ``r`` was judged against (one number each), with the figure each
    read: under load ``min_tps`` reads the 10th-percentile user and ``max_ttft_s`` the median request (p50); a
    session's ``max_ttft_s`` reads its p90 turn (as ``max_ttft_p90_s`` does), each label naming the percentile; a
    rate case's slo bounds each read a percentile of their latency (``slo_goals``)."""
    out: list[Goal] = []
    if spec.KIND == "load_sweep":
        return out  # floors per level: each level records its own (LoadLevel.goals) and its row shows them
    session = spec.KIND == "session"
    load = getattr(r, "decode_p10_tps", None) is not None and not session
    for keyword, (figure, label, unit, floor) in _GOALS.items():
        bound = getattr(spec, keyword, None)
        if not is_number(bound):
            continue  # not set, or per category / per level (those rows show their own)
        if keyword == "min_tps" and (load or session):
            figure, label = "decode_p10_tps", "p10 user decode" if load else "p10 turn decode"
        elif keyword == "max_ttft_s" and session:
            figure, label = "ttft_p90_s", "ttft p90 turn"
        elif keyword in ("max_ttft_p90_s", "max_ttft_p99_s") and session:
            label = f"{label} turn"
        elif keyword == "max_ttft_s" and isinstance(r, SustainedResult):
            label = ttft_label(r)
        elif keyword == "max_ttft_content_s" and session:
            figure, label = "ttft_content_p90_s", "first answer token p90 turn"
        if keyword == "max_ttft_content_s" and getattr(r, figure, None) is None:
            figure = "ttft_p90_s" if session else "ttft_s"  # no reasoning phase: the first token is the answer's
        value = getattr(r, figure, None)
        out.append(Goal(keyword=keyword, bound=float(bound), figure=figure, label=label, unit=unit, floor=floor,
                        value=float(value) if is_number(value) else None))
    if isinstance(r, RateResult):
        out += slo_goals(r, spec)
    accept = getattr(spec, "min_accept_len", None)
    if isinstance(r, SustainedResult) and is_number(accept):
        acc = r.acceptance.mean_len if r.acceptance is not None else None
        out.append(Goal(keyword="min_accept_len", bound=float(accept), figure="acceptance.mean_len",
                        label="acceptance", unit="tokens/step", floor=True, value=acc))
    if isinstance(r, SustainedResult) and r.drift_verdict in ("passed", "failed") and r.max_drift is not None:
        out.append(Goal(keyword="max_drift", bound=float(r.max_drift), figure="drift", label="drift", unit="",
                        floor=False, value=r.drift))
    return out


#: an slo bound's name -> (its latency's figures' prefix and suffix, label, unit): ttft_s reads ttft_p90_s
_SLO_FIGURES = {"ttft_s": ("ttft", "s", "ttft", "s"),
                "ttft_content_s": ("ttft_content", "s", "first answer token", "s"),
                "tpot_ms": ("tpot", "ms", "tpot", "ms"), "e2e_s": ("e2e", "s", "e2e", "s")}


def slo_percentile(spec: CaseSpec) -> int:
    """The percentile a rate case's slo bounds are shown against: the lowest of p50, p90, p99 at or above the share
    of requests ``min_attainment`` asks (p90 without one), so a figure within its bound means at least that share
    of requests met that bound."""
    target = getattr(spec, "min_attainment", None)
    share = float(target) if is_number(target) else 0.9
    return 50 if share <= 0.5 else 90 if share <= 0.9 else 99


def slo_goals(r: RateResult, spec: CaseSpec) -> list[Goal]:
    """Each bound of a rate case's ``slo`` (per request; attainment counts the requests within every one) with the
    percentile of its latency that ``slo_percentile`` names ('slo ttft_s 2 s: ttft p90 150 ms')."""
    slo = getattr(spec, "slo", None)
    if not isinstance(slo, Mapping):
        return []
    q = slo_percentile(spec)
    out = []
    for key, bound in slo.items():
        if key not in _SLO_FIGURES or not is_number(bound):
            continue
        prefix, suffix, name, unit = _SLO_FIGURES[key]
        figure = f"{prefix}_p{q}_{suffix}"
        value = getattr(r, figure, None)
        out.append(Goal(keyword=f"slo {key}", bound=float(bound), figure=figure, label=f"{name} p{q}", unit=unit,
                        floor=False, value=float(value) if is_number(value) else None))
    return out


def _load_floors(r: SustainedResult, spec: SustainedSpec, where: str) -> list[str]:
    """Under load, min_tps holds for (nearly) every user: the 10th-percentile one; min_total_tps for the sum."""
    out = []
    users = f"{r.concurrency} users"
    if is_number(spec.min_tps) and r.decode_p10_tps is not None and r.decode_p10_tps < spec.min_tps:
        out.append(f"p10 user decode {r.decode_p10_tps:.1f} tok/s < min_tps {spec.min_tps:g} with {users} "
                   f"(median user {r.decode_tps:.1f}) {where}")
    if spec.min_total_tps is not None:
        if r.total_tps is None:
            out.append(f"min_total_tps {spec.min_total_tps:g} cannot be judged: the {users} never all decoded at "
                       f"once (lower ramp_s)")
        elif r.total_tps < spec.min_total_tps:
            out.append(f"aggregate {r.total_tps:.1f} tok/s < min_total_tps {spec.min_total_tps:g} with {users} "
                       f"{where}")
    return out


def _undecided_drift(r: SustainedResult, spec: SustainedSpec, policy: str, problems: list[str]) -> None:
    """Drift inconclusive, or not judged although asked for explicitly: pass, warn or fail by the policy."""
    if r.drift_verdict == "inconclusive":
        text = (f"{r.drift_gate}: early {r.early_tps:.1f} tok/s -> late {r.late_tps:.1f} tok/s over "
                f"{r.completion_tokens} tokens at ctx {r.prompt_tokens}")
    elif r.drift_verdict == "not judged":
        if spec.max_drift is None:
            r.notes.append(r.drift_gate)  # the default gate is off for short cases, and says so
            return
        text = f"{r.drift_gate}; max_drift={spec.max_drift:g} was asked for: inconclusive"
    else:
        return
    if policy == "fail":
        problems.append(text)
    elif policy == "warn":
        r.warnings.append(text)
    else:
        r.notes.append(text)


def causes(r: SustainedResult) -> str:
    """'acceptance 5.0 -> 2.9 tokens/step (62% of the slowdown), step 31 -> 39 ms (38%)', or ''."""
    a = r.attribution
    if a is None:
        return ""
    def pct(x: float | None) -> int:
        return round((x or 0.0) * 100)  # an int: no "-0%"

    return (f"acceptance {a.accept_early:.1f} -> {a.accept_late:.1f} tokens/step "
            f"({pct(a.accept_share)}% of the slowdown), step {a.step_ms_early:.0f} -> "
            f"{a.step_ms_late:.0f} ms ({pct(a.step_share)}%)")


def _causes(r: SustainedResult) -> str:
    parts = [causes(r), slower_phase(r)]
    text = "; ".join(p for p in parts if p)
    return f"; {text}" if text else ""
