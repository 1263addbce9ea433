"""Charts of a case whose lengths were drawn from a distribution (``tokens=``/``ctx=`` strings): each request's
TTFT against its prompt length and its decode rate against its context, since a long prompt's TTFT and a short
one's are different promises. Every point is one request of the result's JSON (a rate case's ``per_request``, a
load case's ``streams``), at the prompt tokens the server counted."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_specperf.cases.result_parts import RateRequest
from pytest_specperf.cases.results import Result, StreamResult
from pytest_specperf.report.table import finite_number
from pytest_specperf.report.views.base import Chart, Series


def drawn_charts(r: Result, requests: Sequence[RateRequest | StreamResult]) -> list[Chart]:
    """TTFT against prompt tokens and decode against context tokens, one point per answered request; none unless
    the case drew its lengths (``Result.drawn``)."""
    if not r.drawn:
        return []
    ttft, decode = [], []
    for q in requests:
        x = finite_number(q.prompt_tokens if q.prompt_tokens is not None else q.drawn_ctx)
        if x is None or (isinstance(q, RateRequest) and q.status != 200):
            continue
        if (t := finite_number(q.ttft_s)) is not None:
            ttft.append((float(x), float(t)))
        if (d := finite_number(q.decode_tps)) is not None:
            decode.append((float(x), float(d)))
    what = ", ".join(f"{k}={v}" for k, v in r.drawn.items())
    charts = [Chart("ttft_by_prompt", f"TTFT per request against its prompt length ({what})", "prompt tokens",
                    "seconds", [Series("answered", [x for x, _ in ttft], [y for _, y in ttft], "points")]),
              Chart("decode_by_context", f"decode per request against its context ({what})", "context (prompt tokens)",
                    "tok/s", [Series("answered", [x for x, _ in decode], [y for _, y in decode], "points")])]
    return [c for c in charts if c.series[0].x]
