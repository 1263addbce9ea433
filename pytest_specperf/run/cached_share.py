"""How much of a case's prompts the server's prefix cache served, and whether that decided its TTFT.

Where the server reports cached prompt tokens (``usage.prompt_tokens_details.cached_tokens`` from
vLLM with ``--enable-prompt-tokens-details`` or SGLang with ``--enable-cache-report``; llama.cpp's
``timings.cache_n``), a result carries ``cached_share``: the cached share of the prompt tokens of
the requests the case meant to be cold (every stream, user or arrival; a session's first turns; a
capacity search's every probe; not two-point's documented warm pair). With ``prefix_cache="cold"``
a request that came back with more cached tokens than a tag alone takes (``CaseContext.cold_allowance``)
had its prefill served by the cache, so its TTFT measures the cache: the result's ``ttft_cache`` says so, and the floors
and comparisons that read TTFT call it inconclusive instead of judging it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_specperf.cases.result_parts import RateRequest, SessionRequest
from pytest_specperf.cases.results import (
    CapacityResult,
    LoadSweepResult,
    Probe,
    RateResult,
    Result,
    SessionResult,
    StreamResult,
    SustainedResult,
)


def share(pairs: list[tuple[int | None, int | None]]) -> float | None:
    """Cached over prompt tokens of ``(prompt_tokens, cached_tokens)`` pairs; None unless every one is reported."""
    if not pairs or any(p is None or c is None for p, c in pairs):
        return None
    prompt = sum(int(p or 0) for p, _ in pairs)
    return sum(int(c or 0) for _, c in pairs) / prompt if prompt else None


def verdict(pairs: list[tuple[int | None, int | None]], allowance: int) -> str:
    """'' when no request meant to be cold came back cached, else the reason its TTFT is inconclusive."""
    hot = [(int(p or 0), int(c)) for p, c in pairs if c is not None and c > allowance]
    if not hot:
        return ""
    p, c = max(hot, key=lambda x: x[1] / x[0] if x[0] else 0.0)
    return (f"ttft inconclusive: {len(hot)} of {len(pairs)} requests meant to be cold came back from the server's "
            f"prefix cache (up to {c} of {p} prompt tokens cached), so their TTFT measures the cache (another "
            "client sent the same prompts, or a proxy or the server dropped the cache salt or tag); measure on an "
            "endpoint no other client shares, or ask prefix_cache='warm' if a cached prefill is what you mean")


def _pairs(items: Iterable[StreamResult | RateRequest | SessionRequest]) -> list[tuple[int | None, int | None]]:
    return [(s.prompt_tokens, s.cached_tokens) for s in items]


def cold_pairs(result: Result) -> list[tuple[int | None, int | None]]:
    """``(prompt_tokens, cached_tokens)`` of each request of ``result`` meant to be cold."""
    if isinstance(result, SustainedResult):
        return _pairs(result.streams)
    if isinstance(result, LoadSweepResult):
        return [p for lv in result.levels for p in _pairs(lv.streams)]
    if isinstance(result, RateResult):
        return _pairs(r for r in result.per_request if r.status == 200)
    if isinstance(result, SessionResult):
        return _pairs(r for r in result.per_request if r.turn == 1)
    if isinstance(result, CapacityResult):  # each probe's sums: the share over them is the share over every request
        return [(p.prompt_tokens, p.cached_tokens) for p in result.probes]
    return []  # two-point warms its prompt on purpose; sweeps of it likewise


def attach(result: Result, allowance: int, mode: str) -> None:
    """Set ``cached_share`` and, for a cold case, ``ttft_cache`` where it came back cached. A load sweep's levels
    got theirs as each was measured (``load.load_sweep``: before it was judged); here the case's, over them all."""
    pairs = cold_pairs(result)
    result.prefix_cache = mode
    result.cached_share = share(pairs)
    if isinstance(result, CapacityResult):  # a probe's verdict read its own requests (``probe_fields``)
        hot = [p for p in result.probes if p.ttft_cache]
        result.ttft_cache = f"at {hot[0].rps:.3g} req/s {hot[0].ttft_cache}" if hot and mode == "cold" else ""
        if hot and mode == "cold" and len(hot) > 1:
            result.ttft_cache += f" (and at {len(hot) - 1} more of the {len(result.probes)} probed rates)"
        return
    result.ttft_cache = verdict(pairs, allowance) if mode == "cold" else ""


def probe_fields(probe: Probe, requests: Iterable[RateRequest], allowance: int, mode: str) -> None:
    """A capacity probe's prompt and cached token sums over its answered requests, and (``mode`` cold) whether
    any came back cached; the sums stay None where the server does not report cached tokens."""
    pairs = _pairs(r for r in requests if r.status == 200)
    if share(pairs) is None:
        return
    probe.prompt_tokens = sum(int(p or 0) for p, _ in pairs)
    probe.cached_tokens = sum(int(c or 0) for _, c in pairs)
    probe.ttft_cache = (verdict(pairs, allowance) or None) if mode == "cold" else None
