"""Continuous batching without a clock: which sequences share each engine step, and how long it takes.

``Batcher`` is pure bookkeeping over times in seconds: the engine drives it on the event loop's
monotonic clock, ``simulate`` drives it on a virtual clock, so a load run against the server and
the profile's own answer for the same arrivals come from one piece of logic.

Rules of one step (planned by ``Batcher.step(start)``):

- members are the running sequences (prefilled, not finished) ready at ``start``, oldest first,
  then waiting sequences (arrived, not yet prefilled) ready at ``start`` in arrival order while
  fewer than ``max_batch`` sequences hold a slot; a stalled running sequence keeps its slot;
- running members decode one speculative step each, waiting members are prefilled and emit
  their first token; with ``prefill_chunk_tokens`` a step prefills at most that many prompt tokens
  (oldest first), and a prompt that does not fit goes on in the next steps, holding its slot,
  emitting its first token with its last chunk;
- the step lasts ``decode_step_ms(decoders) * jitter + the prefilled tokens' time`` (model
  ms), divided by ``speed``; ``jitter`` is the oldest decoder's draw;
- every member's tokens go out at the step's end, when the next step can start.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_specperf.sim.model import RequestModel, decode_step_ms
from pytest_specperf.sim.profile import Profile


@dataclass(eq=False)
class Seq:
    """One request inside the batcher; times are seconds on the driver's clock."""

    model: RequestModel
    target: int  # tokens it will produce
    ready_at: float  # earliest start of its next step (arrival, end of its last step, or end of a stall)
    stalls: list[tuple[int, float]] = field(default_factory=list)  # (after token N, pause in real s)
    generated: int = 0  # 0 until prefilled
    prefilled: int = 0  # prompt tokens prefilled so far by earlier chunks (chunked prefill)
    key: int = -1  # admission order, set by the batcher
    first_start: float | None = None  # start of the step that prefilled it
    owner: Any = None  # the driver's handle (the engine's inbox)

    @property
    def running(self) -> bool:
        """Prefilled and not finished: it holds a slot in the batch."""
        return 0 < self.generated < self.target


@dataclass(frozen=True)
class Part:
    """One sequence's share of one step."""

    seq: Seq
    phase: str  # "prefill" | "decode"
    tokens: int
    accepted: int
    drafted: int
    ctx: int  # its context when the step starts
    generated: int  # its tokens generated after the step
    stalls: tuple[tuple[int, float], ...] = ()  # stalls that start after this step


@dataclass(frozen=True)
class BatchStep:
    """One engine step: when it runs and what each member gets."""

    index: int
    start: float
    end: float
    model_ms: float  # at speed 1, jitter included
    batch: int  # sequences in the step
    batch_tokens: int  # tokens the target model verified for the decoders (drafts + bonus each)
    batch_ctx: int  # context the step attends over, summed over its sequences
    parts: tuple[Part, ...]


class Batcher:
    """The scheduler of one simulated server: add sequences, ask when the next step starts, plan it."""

    def __init__(self, profile: Profile, speed: float = 1.0) -> None:
        self.profile = profile
        self.speed = speed
        self.free_at = -math.inf  # end of the last planned step
        self.seqs: list[Seq] = []
        self._keys = itertools.count()
        self._index = itertools.count()

    def add(self, seq: Seq) -> None:
        """Admit a sequence (stalls at token 0 delay its prefill)."""
        seq.key = next(self._keys)
        while seq.stalls and seq.stalls[0][0] <= 0:
            seq.ready_at += seq.stalls.pop(0)[1]
        self.seqs.append(seq)

    def remove(self, seq: Seq) -> None:
        """Drop a sequence (finished, disconnected or cancelled); harmless when already gone."""
        if seq in self.seqs:
            self.seqs.remove(seq)

    @property
    def waiting(self) -> int:
        """Sequences not yet prefilled."""
        return sum(1 for s in self.seqs if s.generated == 0)

    def next_start(self) -> float | None:
        """When the next step can start (None with nothing to run); may lie in the past."""
        slots = sum(1 for s in self.seqs if s.running)
        ready = [s.ready_at for s in self.seqs if s.running or slots < self.profile.max_batch]
        return max(self.free_at, min(ready)) if ready else None

    def _members(self, start: float) -> tuple[list[Seq], list[Seq]]:
        running = sorted((s for s in self.seqs if s.running), key=lambda s: s.key)
        decoders = [s for s in running if s.ready_at <= start]
        # a prompt part-way through its chunks keeps its slot by sorting first among the waiting (oldest); counting
        # it here as well would take two slots for it, and with max_batch 1 leave none: empty steps forever
        room = self.profile.max_batch - len(running)
        waiting = sorted((s for s in self.seqs if s.generated == 0 and s.ready_at <= start), key=lambda s: s.key)
        return decoders, waiting[:max(0, room)]

    def step(self, start: float) -> BatchStep:
        """Plan the step starting at ``start``: draw every member's tokens and the step's length."""
        decoders, prefills = self._members(start)
        parts: list[Part] = []
        draws = [s.model.step(s.generated, s.target - s.generated) for s in decoders]
        shape = [(d.ctx, s.generated, d.drafted) for s, d in zip(decoders, draws, strict=True)]
        decode_ms = decode_step_ms(self.profile, shape)
        if self.profile.reasoning_step_ms:  # each sequence still reasoning costs its phase's extra
            decode_ms += self.profile.reasoning_step_ms * sum(s.model.in_reasoning(s.generated) for s in decoders)
        chunks = self._chunks(prefills)
        model_ms = decode_ms * (draws[0].jitter if draws else 1.0) + sum(ms for _, ms, _ in chunks)
        end = start + model_ms / self.speed / 1000.0
        for seq, d in zip(decoders, draws, strict=True):
            parts.append(self._advance(seq, "decode", d.tokens, d.accepted, d.drafted, d.ctx, end))
        for seq, _, tokens in chunks:
            if seq.first_start is None:
                seq.first_start = start
            if seq.prefilled + tokens < seq.model.prompt_tokens - seq.model.cached_tokens:  # more chunks to come
                seq.prefilled += tokens
                seq.ready_at = end
                continue
            parts.append(self._advance(seq, "prefill", 1, 0, 0, seq.model.prompt_tokens, end))
        self.free_at = end
        step = BatchStep(index=next(self._index), start=start, end=end, model_ms=model_ms,
                         batch=len(decoders) + len(chunks),
                         batch_tokens=sum(d.drafted + 1 for d in draws), batch_ctx=sum(p.ctx for p in parts),
                         parts=tuple(parts))
        for part in parts:
            if part.generated >= part.seq.target:
                self.remove(part.seq)
        return step

    def _chunks(self, prefills: list[Seq]) -> list[tuple[Seq, float, int]]:
        """(sequence, model ms, prompt tokens) each waiting member prefills in this step: whole prompts, or with
        ``prefill_chunk_tokens`` as many tokens as the step's budget leaves, oldest first."""
        budget = self.profile.prefill_chunk_tokens
        if budget is None:
            return [(s, s.model.prefill_ms(), s.model.prompt_tokens - s.model.cached_tokens) for s in prefills]
        out: list[tuple[Seq, float, int]] = []
        rate = self.profile.prefill_tokens_per_s
        for s in prefills:
            left = max(0, s.model.prompt_tokens - s.model.cached_tokens - s.prefilled)
            take = min(left, budget)
            if take < left and take <= 0:
                break  # the budget is spent: later prompts start in a later step
            budget -= take
            out.append((s, 1000.0 * take / rate, take))
        return out

    def _advance(self, seq: Seq, phase: str, tokens: int, accepted: int, drafted: int, ctx: int,
                 end: float) -> Part:
        seq.generated += tokens
        seq.ready_at = end
        stalls: list[tuple[int, float]] = []
        while seq.stalls and seq.stalls[0][0] <= seq.generated:
            stalls.append(seq.stalls.pop(0))
            seq.ready_at += stalls[-1][1]
        return Part(seq=seq, phase=phase, tokens=tokens, accepted=accepted, drafted=drafted, ctx=ctx,
                    generated=seq.generated, stalls=tuple(stalls))


@dataclass(frozen=True)
class Arrival:
    """One request for ``simulate``: when it arrives (s) and what it asks."""

    at_s: float
    prompt_tokens: int
    max_tokens: int
    kind: str = "prose"
    seed: int = 0


def simulate(profile: Profile, arrivals: Iterable[Arrival]) -> list[dict[str, Any]]:
    """The profile's own answer for these arrivals at speed 1: one record per request, in order.

    Each record has ``arrival_s``, ``queue_s`` (arrival to the start of its prefill step),
    ``ttft_s``, ``total_s`` (both from arrival) and ``steps`` as in a truth record (``t_s`` =
    ``intended_t_s``: no wake-up noise). The request's model is seeded with ``seed`` directly.
    """
    reqs = sorted(enumerate(arrivals), key=lambda item: (item[1].at_s, item[0]))
    batcher = Batcher(profile, 1.0)
    out: list[dict[str, Any]] = [{} for _ in reqs]
    pending = list(reqs)
    seq_of: dict[int, tuple[int, Arrival]] = {}
    while True:
        start = batcher.next_start()
        if pending and (start is None or pending[0][1].at_s <= start):
            i, a = pending.pop(0)
            seq = Seq(RequestModel(profile, a.prompt_tokens, a.kind, a.seed), a.max_tokens, a.at_s)
            batcher.add(seq)
            seq_of[id(seq)] = (i, a)
            out[i] = {"arrival_s": a.at_s, "prompt_tokens": a.prompt_tokens, "max_tokens": a.max_tokens,
                      "queue_s": None, "ttft_s": None, "total_s": None, "steps": []}
            continue
        if start is None:
            return out
        step = batcher.step(start)
        for part in step.parts:
            i, a = seq_of[id(part.seq)]
            rec = out[i]
            t = step.end - a.at_s
            rec["steps"].append(step_record(step, part, t, t, 1.0))
            if part.phase == "prefill":
                first = step.start if part.seq.first_start is None else part.seq.first_start
                rec["queue_s"], rec["ttft_s"] = first - a.at_s, t
            rec["total_s"] = t


def step_record(step: BatchStep, part: Part, t_s: float, intended_t_s: float, speed: float) -> dict[str, Any]:
    """A truth record's step entry (times relative to the request's arrival, real seconds)."""
    return {"t_s": t_s, "tokens": part.tokens, "intended_t_s": intended_t_s, "step_ms": step.model_ms / speed,
            "start_t_s": intended_t_s - step.model_ms / speed / 1000.0,
            "accepted": part.accepted, "drafted": part.drafted, "ctx": part.ctx, "phase": part.phase,
            "batch": step.batch, "batch_tokens": step.batch_tokens, "batch_ctx": step.batch_ctx, "step": step.index}
