"""The one writer of verdicts and reasons: a case failed by a gate, and a comparison given a new verdict.

Every gate (a baseline or A/B comparison, the history, the crossover's ``min_speedup``, the arms'
``max_loss_vs_best``) fails a case through ``fail``, so a reason is always its parts joined one way and an error
record (a case that could not be measured) keeps its verdict. The rules that turn a comparison's verdict after its
statistics live here too: a baseline measured unlike this run (``unlike``), the TTFT noise floor and the prefix
cache (``ttft_judged``), each reading both sides' values (``samples.Side``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.cases.results import Recorded, is_error
from pytest_specperf.compare import trials as compare
from pytest_specperf.compare.samples import Side


def fail(result: Recorded, reasons: Sequence[str], *, first: bool = False) -> None:
    """Fail ``result`` for ``reasons``, added after the reason it has (before it with ``first``: the gate the case
    asked for leads); nothing for no reasons or an error record."""
    if not reasons or is_error(result):
        return
    prior = [r for r in [result.reason] if r]
    result.verdict = "failed"
    result.reason = "; ".join([*reasons, *prior] if first else [*prior, *reasons])


def with_verdict(cc: CaseComparison, verdict: str, reason: str) -> CaseComparison:
    """The same comparison with a new verdict and reason, inside and out, so every report says one thing."""
    inner = replace(cc.comparison, verdict=verdict, reason=reason) if cc.comparison is not None else None
    return replace(cc, verdict=verdict, reason=reason, comparison=inner)


def unlike(ccs: list[CaseComparison], differences: list[str], strict: bool) -> list[CaseComparison]:
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
        out.append(with_verdict(cc, verdict, why))
    return out


def judged(ccs: list[CaseComparison], base: Side, cand: Side, *, differences: Sequence[str] = (),
           strict: bool = False, sides: tuple[str, str] = ("baseline", "now")) -> list[CaseComparison]:
    """The comparisons of a baseline (or A) against a candidate after every rule past their statistics: the TTFT
    noise floor and the prefix cache (``ttft_judged``), then how the baseline was measured unlike the candidate
    (``differences`` given, and each sampling temperature of the baseline's unlike the candidate's; ``unlike``)."""
    temps = [f"temperature: {t!r} (baseline) != {now!r} (now)" for now in sorted(cand.temperatures)
             for t in sorted(base.temperatures) if t != now]
    return unlike(ttft_judged(ccs, base, cand, sides), [*differences, *temps], strict)


def _ttft_floor(ccs: list[CaseComparison], base: Side, cand: Side) -> list[CaseComparison]:
    """A change of any TTFT figure (``compare.is_ttft``: the median, p50, p90, p99) smaller than TTFT_FLOOR_S in
    absolute terms is noise, not news: it passes, saying why, for a case, a sweep point and each load level alike
    (an 'improved' inside the floor is no more real than a 'regressed')."""
    out = []
    for cc in ccs:
        key = (cc.nodeid, cc.ctx, cc.users)
        m = cc.metric or ""
        if compare.is_ttft(m) and cc.verdict in ("regressed", "inconclusive", "improved"):
            b, c = base.entries.get(key), cand.entries.get(key)
            before, after = (b.medians.get(m) if b else None), (c.medians.get(m) if c else None)
            if before is not None and after is not None and compare.within_ttft_floor(m, before, after):
                at = "" if cc.users is None else f"at {cc.users} user{'' if cc.users == 1 else 's'}: "
                why = (f"{at}{m} {before * 1000:.1f} -> {after * 1000:.1f} ms: within the "
                       f"{compare.TTFT_FLOOR_S * 1000:.0f} ms noise floor")
                cc = with_verdict(cc, "passed", why)
        out.append(cc)
    return out


#: Sides whose cached shares differ by more than this measured different prefills: their TTFTs do not compare.
CACHE_SHARE_GAP = 0.10


def _cache_differs(ccs: list[CaseComparison], base: Side, cand: Side, sides: tuple[str, str]) -> list[CaseComparison]:
    """Sides whose cached shares differ (or whose cold requests came back cached) measured the prefix cache,
    not the server, in their TTFT: that comparison is inconclusive and every reason names the shares."""
    b, c = base.cached_share, cand.cached_share
    hot = base.ttft_cache or cand.ttft_cache
    differ = b is not None and c is not None and abs(b - c) > CACHE_SHARE_GAP
    if not differ and not hot:
        return ccs
    what = (f"cached share of the prompt {b:.2f} ({sides[0]}) vs {c:.2f} ({sides[1]})" if differ
            else hot.removeprefix("ttft inconclusive: "))
    out = []
    for cc in ccs:
        if cc.comparison is None:
            out.append(cc)
        elif compare.is_ttft(cc.metric or "") and cc.verdict in ("regressed", "improved"):
            out.append(with_verdict(cc, "inconclusive", f"{cc.reason}; {what}: the prefix cache moved TTFT, "
                                                        "inconclusive"))
        else:
            out.append(with_verdict(cc, cc.verdict, f"{cc.reason}; {what}"))
    return out


def ttft_judged(ccs: list[CaseComparison], base: Side, cand: Side, sides: tuple[str, str] = ("baseline", "now")
                ) -> list[CaseComparison]:
    """TTFT comparisons after the noise floor and the prefix cache (``_ttft_floor``, ``_cache_differs``)."""
    return _cache_differs(_ttft_floor(ccs, base, cand), base, cand, sides)
