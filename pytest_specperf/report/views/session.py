"""What a report shows for a ``session`` case (plain data): per-turn TTFT and cached share, every turn's TTFT
against its prompt length. Every number drawn is a field of the result as written to ``--specperf-json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_specperf.cases.result_parts import TurnFigures
from pytest_specperf.cases.results import SessionResult
from pytest_specperf.report.table import finite_number
from pytest_specperf.report.views.base import (
    CaseView,
    Chart,
    Level,
    ResultLike,
    Series,
    common_facts,
    count_text,
    fmt,
    pct,
    typed_as,
)


def _ms(v: Any) -> str:
    x = finite_number(v)
    return fmt(None if x is None else x * 1000, ".0f", " ms")


def session(result: ResultLike, baseline: Sequence[ResultLike]) -> CaseView:
    """Facts of the sessions, a per-turn chart (TTFT p50/p90 and cached share by turn) and TTFT over prompt length."""
    r = typed_as(result, SessionResult)
    acc = r.acceptance
    growth = finite_number(r.ttft_growth_ms_per_1k)
    facts = [
        *common_facts(r),
        ("sessions", f"{count_text(r.users)} x {count_text(r.turns)} turns, "
                     f"{count_text(r.tokens)} tokens per turn, think {fmt(r.think_s, 'g', ' s')}"),
        ("ttft per turn", f"p50 {_ms(r.ttft_p50_s)}, p90 {_ms(r.ttft_p90_s)}, p99 {_ms(r.ttft_p99_s)}"),
        ("ttft growth", "-" if growth is None else f"{growth:+.1f} ms per 1000 prompt tokens"),
        ("conversation", f"last turn's prompt {count_text(r.prompt_tokens_last or '-')} tokens"),
        ("cache hit (later turns)", pct(r.cache_hit) + (f" (floor {pct(r.min_cache_hit)})"
                                                        if r.min_cache_hit is not None else "")),
        ("decode per turn", f"median {fmt(r.decode_tps)}, p10 {fmt(r.decode_p10_tps)} tok/s"),
        ("aggregate", fmt(r.total_tps, ".1f", " tok/s") + " (every turn's tokens over the case)"),
        ("drift", f"{fmt(r.drift, '.2f')}: {r.drift_verdict}"),
        ("acceptance", f"{fmt(acc.mean_len, '.2f')} tokens/step ({acc.source})" if acc is not None else "-"),
    ]
    if r.reasoning_tokens is not None:
        facts.append(("first answer token", f"p50 {_ms(r.ttft_content_s)}, p90 "
                                            f"{_ms(r.ttft_content_p90_s)} after {r.reasoning_tokens} "
                                            "reasoning tokens"))
    return CaseView(facts, [c for c in (per_turn_chart(r), cached_chart(r), ttft_over_prompt(r)) if c.series])


def per_turn_chart(result: ResultLike) -> Chart:
    """TTFT p50 and p90 by turn: how the first token's wait grows with the conversation."""
    turns = _turns(typed_as(result, SessionResult))
    chart = Chart("turn_ttft", "time to first token by turn", "turn", "ms", categories=_categories(turns))
    for key, name in (("ttft_p50_s", "ttft p50"), ("ttft_p90_s", "ttft p90")):
        values = [(float(i), finite_number(getattr(t, key))) for i, t in enumerate(turns)]
        pts = [(x, y * 1000) for x, y in values if y is not None]
        if pts:
            chart.series.append(Series(name, [p[0] for p in pts], [p[1] for p in pts]))
    return chart


def _turns(r: SessionResult) -> list[TurnFigures]:
    return [t for t in r.per_turn if finite_number(t.turn) is not None]


def _categories(turns: list[TurnFigures]) -> list[str]:
    """Turns as the x axis' names: x = 0, 1, ... is turn 1, 2, ..."""
    return [count_text(t.turn) for t in turns]


def cached_chart(result: ResultLike) -> Chart:
    """The cached share of each turn's prompt tokens, as the server reported it."""
    r = typed_as(result, SessionResult)
    turns = _turns(r)
    shares = [(float(i), finite_number(t.cache_hit)) for i, t in enumerate(turns)]
    pts = [(x, y) for x, y in shares if y is not None]
    chart = Chart("turn_cached", "cached share of the prompt by turn", "turn", "share of prompt tokens",
                  categories=_categories(turns))
    if pts:
        chart.series.append(Series("cached share", [p[0] for p in pts], [p[1] for p in pts], "bars"))
    if r.min_cache_hit is not None and finite_number(r.min_cache_hit) is not None:
        chart.levels.append(Level(float(r.min_cache_hit), f"floor {r.min_cache_hit:g} (later turns)", "solid"))
    return chart


def ttft_over_prompt(result: ResultLike) -> Chart:
    """Every turn's TTFT against its prompt tokens (one point per turn of every session)."""
    rows = typed_as(result, SessionResult).per_request
    pairs = [(finite_number(x.prompt_tokens), finite_number(x.ttft_s)) for x in rows]
    pts = [(p, t * 1000) for p, t in pairs if p is not None and t is not None]
    chart = Chart("ttft_prompt", "time to first token over the conversation's length", "prompt tokens", "ms")
    if pts:
        chart.series.append(Series("turns", [p[0] for p in pts], [p[1] for p in pts], "points"))
    return chart
