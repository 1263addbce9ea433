"""Figures per prompt category, for cases over a prompt file, and the floors a category is judged on.

A category's figures are over that category's own requests (streams of a sustained case, users of a
load, arrivals of a rate case), and say how many (``n``) and how many distinct prompts
(``n_prompts``): a median over three streams is said to be one. Acceptance comes from what the
server shows for those requests alone: per-response counts (vLLM, SGLang, llama.cpp), else chunk
sizes where each chunk is one engine step; never from counters other categories moved too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_specperf.cases.prompt_cases import ANY, floor_for, prompt_set
from pytest_specperf.cases.result_parts import CategoryFigures
from pytest_specperf.cases.results import StreamResult, SustainedResult
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.prompts import cold
from pytest_specperf.prompts.files import BUILTIN_PREFIX, PromptRecord
from pytest_specperf.run import acceptance


def records(spec: Any) -> list[PromptRecord] | None:
    """The prompts a case over a prompt file sends, in file order (None: a case of built prompts); marked to be
    sent under a fresh tag each (``draw``) unless the case asks for ``prefix_cache="warm"``."""
    found = prompt_set(spec)
    if found is None:
        return None
    cold = getattr(spec, "prefix_cache", "cold") == "cold"
    return [dataclasses.replace(r, cold=True) if cold else r for r in found.records]


def ctx_needed(spec: Any) -> int:
    """Prompt tokens a case needs of the server's context before it runs: its ``ctx``; 0 over a prompt file, whose
    prompts are only counted as they are sent (one too long for the server is its error then)."""
    return 0 if spec.prompts is not None else spec.ctx


def content_label(spec: Any) -> str:
    """What a result says its content was over a prompt file: the file's name (``builtin:NAME`` as given)."""
    source = str(spec.prompts)
    return source if source.startswith(BUILTIN_PREFIX) else Path(source).name


def messages(record: PromptRecord, api: str) -> tuple[dict[str, str], ...] | None:
    """What a chat request sends of a record (None on /v1/completions, which sends ``record.text``)."""
    return tuple(record.messages()) if api == "chat" else None


def draw(recs: list[PromptRecord], n: int, seed: int, *, tag: bool = True) -> list[PromptRecord]:
    """The prompts of ``n`` arrivals drawn from a prompt file: a seeded shuffle of the file, cycled, so every
    prompt (and category) arrives as often as the others, in an order no category can lean on. With ``tag``
    each arrival of a record marked cold opens with its own tag (``cold.fresh_record``)."""
    order = np.random.default_rng(seed).permutation(len(recs))
    picked = [recs[int(order[i % len(recs)])] for i in range(n)]
    return [cold.fresh_record(r) for r in picked] if tag else picked


@dataclass
class Sample:
    """One request of a case over a prompt file, as the category figures need it."""

    category: str
    prompt_id: str
    decode_tps: float
    ttft_s: float
    drift: float | None
    prompt_tokens: int | None
    trace: Trace | None


def _pct(values: Sequence[float | None], q: float) -> float | None:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.percentile(finite, q)) if finite else None


def _acceptance(traces: list[Trace], step_chunks: bool
                ) -> tuple[float | None, float | None, str | None, int | None, int | None]:
    """(mean accepted length, acceptance rate, source, drafted, accepted) over one category's requests."""
    timings, resp_metrics, details = acceptance.response_fields(traces)
    found = acceptance.from_vllm_response(resp_metrics) or acceptance.from_sglang_details(details)
    if found is None and timings and len(timings) == len(traces):
        found = acceptance.from_llamacpp_timings(timings)
    mean_len, rate = (found.mean_len, found.rate) if found else (None, None)
    source = found.source if found else None
    if mean_len is None and step_chunks:
        # pooled over the category's decode steps: tokens after the first chunk / chunks after the first
        tokens = sum(t.completion_tokens - t.chunks[0].tokens for t in traces if len(t.chunks) > 1)
        steps = sum(len(t.chunks) - 1 for t in traces if len(t.chunks) > 1)
        if steps:
            mean_len, source = tokens / steps, source or "chunks"
    return mean_len, rate, source, found.drafted if found else None, found.accepted if found else None


def figures(samples: Sequence[Sample], step_chunks: bool) -> dict[str, CategoryFigures]:
    """``{category: its figures}``, categories in the order they were first sent."""
    out: dict[str, CategoryFigures] = {}
    for cat in dict.fromkeys(s.category for s in samples):
        group = [s for s in samples if s.category == cat]
        traces = [s.trace for s in group if s.trace is not None]
        mean_len, rate, source, drafted, accepted = (_acceptance(traces, step_chunks) if traces
                                                      else (None, None, None, None, None))
        drifts = [s.drift for s in group if s.drift is not None]
        out[cat] = CategoryFigures(
            n=len(group), n_prompts=len({s.prompt_id for s in group}),
            decode_tps_p50=_pct([s.decode_tps for s in group], 50),
            decode_tps_p10=_pct([s.decode_tps for s in group], 10),
            ttft_p50_s=_pct([s.ttft_s for s in group], 50),
            accept_len=mean_len, accept_rate=rate, accept_source=source,
            drafted=drafted, accepted=accepted,  # the server's per-response counts, where it gives them
            completion_tokens=sum(t.completion_tokens for t in traces),
            drift=float(np.median(drifts)) if drifts else None,
            prompt_tokens_p50=_pct([s.prompt_tokens for s in group], 50),
        )
    return out


def floor_problems(cats: dict[str, CategoryFigures] | None, spec: Any, *, per_user: bool = False) -> list[str]:
    """The per-category floors (``min_tps`` / ``min_accept_len`` given as ``{category: value}``) a result misses.

    A number applies to the whole case and is judged there; only a mapping is judged per category, on the
    category's median decode (its 10th percentile under load, ``per_user``) and mean accepted length.
    """
    out: list[str] = []
    if not cats:
        return out
    tps_floors = spec.min_tps if isinstance(spec.min_tps, Mapping) else None
    len_floors = getattr(spec, "min_accept_len", None)
    len_floors = len_floors if isinstance(len_floors, Mapping) else None
    for cat, f in cats.items():
        if tps_floors and floor_for(tps_floors, cat) is not None:
            f.min_tps = floor_for(tps_floors, cat)  # the floors each category was judged on, for the reports
        if len_floors and floor_for(len_floors, cat) is not None:
            f.min_accept_len = floor_for(len_floors, cat)
        prompts = f.n_prompts
        n = f"n={f.n} ({prompts} prompt{'' if prompts == 1 else 's'})"  # as the category's row says it
        floor = floor_for(tps_floors, cat) if tps_floors else None
        tps, label = (f.decode_tps_p10, "p10 decode") if per_user else (f.decode_tps_p50, "decode")
        if floor is not None and tps is not None and tps < floor:
            out.append(f"{cat}: {label} {tps:.1f} tok/s < min_tps {floor:g} ({n}, median {f.decode_tps_p50:.1f})")
        floor = floor_for(len_floors, cat) if len_floors else None
        if floor is not None:
            if f.accept_len is None:
                out.append(f"{cat}: min_accept_len {floor:g} cannot be judged: the server shows no accepted length "
                           f"for its requests ({n})")
            elif f.accept_len < floor:
                out.append(f"{cat}: acceptance {f.accept_len:.2f} tokens/step < min_accept_len {floor:g} "
                           f"({n}, {f.accept_source})")
    return out


def unsent_floors(cats: dict[str, CategoryFigures] | None, spec: Any) -> list[str]:
    """Notes for per-category floors whose category got no request (fewer users than prompts drew none of its
    prompts): such a floor is not judged, and the case says so rather than pass it in silence."""
    if not cats:
        return []
    out = []
    for name in ("min_tps", "min_accept_len"):
        floors = getattr(spec, name, None)
        if not isinstance(floors, Mapping) or (spec.KIND == "load_sweep" and name == "min_tps"):
            continue  # a load sweep's min_tps mapping is by level
        for cat, value in floors.items():
            if cat != ANY and cat not in cats:
                out.append(f"{name} {value:g} for {cat} not judged: none of its prompts was sent (the case sent "
                           f"{sum(f.n for f in cats.values())} requests); raise concurrency or "
                           f"repeat, or give sample= so every category is drawn")
    return out


def attach(r: SustainedResult, spec: Any, streams: list[StreamResult], found: list[Trace], step_chunks: bool) -> None:
    """A sustained case (or load) over a prompt file: its file, the median server-counted prompt length as its
    ctx, and figures per category."""
    counted = [s.prompt_tokens for s in streams if s.prompt_tokens is not None]
    if counted:
        r.ctx = r.prompt_tokens = int(np.median(counted))
    r.prompts, r.content = spec.prompts, content_label(spec)
    samples = [Sample(s.category or "", s.prompt_id or "", s.decode_tps, s.ttft_s, s.drift, s.prompt_tokens, t)
               for s, t in zip(streams, found, strict=True)]
    r.categories = figures(samples, step_chunks)
