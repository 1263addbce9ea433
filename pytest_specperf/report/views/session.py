"""What a report shows for a ``session`` case (plain data): per-turn TTFT and cached share, every turn's TTFT
against its prompt length. Every number drawn is a field of the result as written to ``--specperf-json``."""

from __future__ import annotations

from typing import Any

from pytest_specperf.report.table import finite_number
from pytest_specperf.report.views.base import CaseView, Chart, Level, Series, common_facts, count_text, fmt, pct


def _ms(v: Any) -> str:
    x = finite_number(v)
    return fmt(None if x is None else x * 1000, ".0f", " ms")


def session(r: dict[str, Any], baseline: list[dict[str, Any]]) -> CaseView:
    """Facts of the sessions, a per-turn chart (TTFT p50/p90 and cached share by turn) and TTFT over prompt length."""
    acc = r.get("acceptance") or {}
    growth = finite_number(r.get("ttft_growth_ms_per_1k"))
    facts = [
        *common_facts(r),
        ("sessions", f"{count_text(r.get('users'))} x {count_text(r.get('turns'))} turns, "
                     f"{count_text(r.get('tokens'))} tokens per turn, think {fmt(r.get('think_s'), 'g', ' s')}"),
        ("ttft per turn", f"p50 {_ms(r.get('ttft_p50_s'))}, p90 {_ms(r.get('ttft_p90_s'))}, "
                          f"p99 {_ms(r.get('ttft_p99_s'))}"),
        ("ttft growth", "-" if growth is None else f"{growth:+.1f} ms per 1000 prompt tokens"),
        ("conversation", f"last turn's prompt {count_text(r.get('prompt_tokens_last') or '-')} tokens"),
        ("cache hit (later turns)", pct(r.get("cache_hit")) + (f" (floor {pct(r.get('min_cache_hit'))})"
                                                               if r.get("min_cache_hit") is not None else "")),
        ("decode per turn", f"median {fmt(r.get('decode_tps'))}, p10 {fmt(r.get('decode_p10_tps'))} tok/s"),
        ("aggregate", fmt(r.get("total_tps"), ".1f", " tok/s") + " (every turn's tokens over the case)"),
        ("drift", f"{fmt(r.get('drift'), '.2f')}: {r.get('drift_verdict', '-')}"),
        ("acceptance", f"{fmt(acc.get('mean_len'), '.2f')} tokens/step ({acc.get('source', '-')})" if acc else "-"),
    ]
    if r.get("reasoning_tokens") is not None:
        facts.append(("first answer token", f"p50 {_ms(r.get('ttft_content_s'))}, p90 "
                                            f"{_ms(r.get('ttft_content_p90_s'))} after {r['reasoning_tokens']} "
                                            "reasoning tokens"))
    return CaseView(facts, [c for c in (per_turn_chart(r), cached_chart(r), ttft_over_prompt(r)) if c.series])


def per_turn_chart(r: dict[str, Any]) -> Chart:
    """TTFT p50 and p90 by turn: how the first token's wait grows with the conversation."""
    turns = _turns(r)
    chart = Chart("turn_ttft", "time to first token by turn", "turn", "ms", categories=_categories(turns))
    for key, name in (("ttft_p50_s", "ttft p50"), ("ttft_p90_s", "ttft p90")):
        pts = [(float(i), float(t[key]) * 1000) for i, t in enumerate(turns) if finite_number(t.get(key)) is not None]
        if pts:
            chart.series.append(Series(name, [p[0] for p in pts], [p[1] for p in pts]))
    return chart


def _turns(r: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in r.get("per_turn") or [] if isinstance(t, dict) and finite_number(t.get("turn")) is not None]


def _categories(turns: list[dict[str, Any]]) -> list[str]:
    """Turns as the x axis' names: x = 0, 1, ... is turn 1, 2, ..."""
    return [count_text(t["turn"]) for t in turns]


def cached_chart(r: dict[str, Any]) -> Chart:
    """The cached share of each turn's prompt tokens, as the server reported it."""
    turns = _turns(r)
    pts = [(float(i), float(t["cache_hit"])) for i, t in enumerate(turns)
           if finite_number(t.get("cache_hit")) is not None]
    chart = Chart("turn_cached", "cached share of the prompt by turn", "turn", "share of prompt tokens",
                  categories=_categories(turns))
    if pts:
        chart.series.append(Series("cached share", [p[0] for p in pts], [p[1] for p in pts], "bars"))
    if finite_number(r.get("min_cache_hit")) is not None:
        chart.levels.append(Level(float(r["min_cache_hit"]), f"floor {r['min_cache_hit']:g} (later turns)", "solid"))
    return chart


def ttft_over_prompt(r: dict[str, Any]) -> Chart:
    """Every turn's TTFT against its prompt tokens (one point per turn of every session)."""
    rows = [x for x in r.get("per_request") or [] if isinstance(x, dict)]
    pts = [(float(x["prompt_tokens"]), float(x["ttft_s"]) * 1000) for x in rows
           if finite_number(x.get("prompt_tokens")) is not None and finite_number(x.get("ttft_s")) is not None]
    chart = Chart("ttft_prompt", "time to first token over the conversation's length", "prompt tokens", "ms")
    if pts:
        chart.series.append(Series("turns", [p[0] for p in pts], [p[1] for p in pts], "points"))
    return chart
