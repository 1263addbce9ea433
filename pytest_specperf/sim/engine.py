"""The request engine: runs one generation on the clock, feeding a sink and recording truth.

Timing uses absolute deadlines on the event loop's monotonic clock: each step is due at the
previous step's deadline plus its duration, so lateness of one wake-up never accumulates and a
request's total time is exact up to the last wake-up. Concurrent requests each run their own
timeline; a step is slowed by ``batch_slowdown`` for every other request decoding when it starts
(see ``model.py``), so "one request at a time" is exact and a batch makes every step slower.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from .faults import FaultSpec, StatusCounters, parse_faults
from .metrics import SimMetrics
from .model import RequestModel
from .profile import Profile
from .textgen import token_stream
from .truth import TruthStore


class FaultDisconnect(Exception):
    """Raised after the connection was dropped on purpose by a ``disconnect@N`` fault."""


class Sink(Protocol):
    """Where a generation's tokens go: a streamed response or a body built at the end."""

    async def start(self) -> None:
        """Called once, before the prefill (a stream sends its headers here)."""

    async def step(self, ids: list[int], generated: int, finish_reason: str | None) -> None:
        """One step's tokens; ``finish_reason`` is set on the last step."""

    async def malformed(self) -> None:
        """Send one malformed SSE line (stream only)."""

    def abort(self) -> None:
        """Drop the connection now."""

    async def finish(self, record: dict[str, Any]) -> None:
        """After the last step: final chunks and [DONE], or the whole non-streamed body."""


@dataclass
class GenRequest:
    """A validated generation request, independent of route and dialect."""

    id: str
    route: str  # "completions" | "chat"
    stream: bool
    prompt_ids: list[int]
    kind: str
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    seed: int | None = None
    temperature: float = 0.0
    faults: FaultSpec = field(default_factory=FaultSpec)
    body: dict[str, Any] = field(default_factory=dict)  # sampling fields as sent, for wire checks
    arrival: float = field(default_factory=time.monotonic)


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


class Engine:
    """Shared state of one simulated server: profile, clock scale, truth, metrics, counters."""

    def __init__(self, profile: Profile, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.profile = profile
        self.speed = float(speed)
        self.truth = TruthStore()
        self.metrics = SimMetrics(profile.dialect, profile.model, profile.max_accept)
        self.status = StatusCounters()
        self.profile_faults = parse_faults(profile.faults)
        self._counter = itertools.count()
        self.decoding = 0  # requests past prefill right now (the batch)

    def request_seed(self, seed: int | None, prompt_ids: list[int]) -> int:
        """A request's RNG seed: fixed by (seed, prompt) when the client gives a seed, else fresh."""
        if seed is not None:
            digest = zlib.crc32(",".join(map(str, prompt_ids)).encode())
            return (seed * 1_000_003) ^ digest
        return self.profile.rng_seed * 1_000_003 + next(self._counter) + 0x5EED

    def target(self, req: GenRequest) -> tuple[int, str]:
        """How many tokens this request will produce and why it stops ("length" or "stop")."""
        eos = self.profile.eos_after_tokens
        if eos is None or req.ignore_eos:
            return req.max_tokens, "length"
        stop_at = max(eos, req.min_tokens)
        return (stop_at, "stop") if stop_at < req.max_tokens else (req.max_tokens, "length")

    def _record(self, req: GenRequest) -> dict[str, Any]:
        p = self.profile
        return {"id": req.id, "route": req.route, "stream": req.stream, "model": p.model, "dialect": p.dialect,
                "profile": p.name, "speed": self.speed, "content_kind": req.kind,
                "prompt_tokens": len(req.prompt_ids), "max_tokens": req.max_tokens, "temperature": req.temperature,
                "seed": req.seed, "body": req.body,
                "completion_tokens": 0, "finish_reason": None, "done": False, "arrival_monotonic": req.arrival,
                "ttft_s": None, "total_s": None, "steps": [], "faults": []}

    async def generate(self, req: GenRequest, sink: Sink) -> dict[str, Any]:
        """Run the request to its end on the clock; returns its (finished) truth record."""
        rec = self._record(req)
        self.truth.add(rec)
        speed, faults = self.speed, req.faults
        self.metrics.running += 1
        joined = False
        try:
            # the timeline starts at arrival, so parsing and tokenizing the prompt are part of the
            # modelled prefill (as on a real server) instead of adding to it
            start = req.arrival + faults.first_byte_s / speed
            if faults.first_byte_s > 0:
                await _sleep_until(start)
                rec["faults"].append({"kind": "first_byte", "at_token": 0, "s": faults.first_byte_s,
                                      "t_s": time.monotonic() - req.arrival})
            await sink.start()
            seed = self.request_seed(req.seed, req.prompt_ids)
            model = RequestModel(self.profile, len(req.prompt_ids), req.kind, seed)
            text = token_stream(req.kind, seed + 1)
            target, reason = self.target(req)
            stalls = list(faults.stalls)
            state = {"malformed_done": False}
            prefill_ms = model.prefill_ms() / speed
            deadline = start + prefill_ms / 1000.0
            deadline = self._stalls(stalls, 0, deadline, rec, req)
            await _sleep_until(deadline)
            self.metrics.on_prefill(len(req.prompt_ids))
            generated = 1
            self.decoding += 1
            joined = True
            deadline = await self._emit(sink, rec, req, [next(text)], generated, target, reason, deadline,
                                        {"step_ms": prefill_ms, "accepted": 0, "drafted": 0,
                                         "ctx": len(req.prompt_ids), "batch": self.decoding, "phase": "prefill"},
                                        stalls, state)
            while generated < target:
                batch = self.decoding  # the batch when the step starts sets its cost
                s = model.step(generated, target - generated, batch)
                step_ms = s.step_ms / speed
                deadline += step_ms / 1000.0
                await _sleep_until(deadline)
                generated += s.tokens
                self.metrics.on_step(s.accepted, s.drafted, s.tokens)
                deadline = await self._emit(sink, rec, req, [next(text) for _ in range(s.tokens)], generated,
                                            target, reason, deadline,
                                            {"step_ms": step_ms, "accepted": s.accepted, "drafted": s.drafted,
                                             "ctx": s.ctx, "batch": batch, "phase": "decode"},
                                            stalls, state)
            if joined:
                self.decoding -= 1
                joined = False
            rec["finish_reason"] = reason
            await sink.finish(rec)
        except FaultDisconnect:
            rec["finish_reason"] = "fault_disconnect"
        except (ConnectionError, asyncio.CancelledError) as exc:
            rec["finish_reason"] = "client_disconnected" if isinstance(exc, ConnectionError) else "cancelled"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if joined:
                self.decoding -= 1
            self.metrics.running -= 1
            rec["total_s"] = time.monotonic() - req.arrival
            rec["done"] = True
            self.metrics.on_finish(rec)
        return rec

    def _stalls(self, stalls: list[tuple[int, float]], generated: int, deadline: float, rec: dict[str, Any],
                req: GenRequest) -> float:
        """Push the next deadline back by every pending stall whose token has been reached."""
        while stalls and stalls[0][0] <= generated:
            at, seconds = stalls.pop(0)
            deadline += seconds / self.speed
            rec["faults"].append({"kind": "stall", "at_token": at, "s": seconds, "after_tokens": generated,
                                  "t_s": time.monotonic() - req.arrival})
        return deadline

    async def _emit(self, sink: Sink, rec: dict[str, Any], req: GenRequest, ids: list[int], generated: int,
                    target: int, reason: str, deadline: float, info: dict[str, Any],
                    stalls: list[tuple[int, float]], state: dict[str, bool]) -> float:
        await sink.step(ids, generated, reason if generated >= target else None)
        now = time.monotonic()
        step = {"t_s": now - req.arrival, "tokens": len(ids), "intended_t_s": deadline - req.arrival, **info}
        rec["steps"].append(step)
        rec["completion_tokens"] = generated
        if rec["ttft_s"] is None:
            rec["ttft_s"] = step["t_s"]
        faults = req.faults
        if faults.malformed_at is not None and not state["malformed_done"] and generated >= faults.malformed_at:
            state["malformed_done"] = True
            await sink.malformed()
            rec["faults"].append({"kind": "malformed", "at_token": faults.malformed_at, "after_tokens": generated,
                                  "t_s": time.monotonic() - req.arrival})
        if faults.disconnect_at is not None and generated >= faults.disconnect_at:
            rec["faults"].append({"kind": "disconnect", "at_token": faults.disconnect_at, "after_tokens": generated,
                                  "t_s": time.monotonic() - req.arrival})
            sink.abort()
            raise FaultDisconnect()
        return self._stalls(stalls, generated, deadline, rec, req)
