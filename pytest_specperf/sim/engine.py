"""The request engine: runs generations on the clock as one continuous batch, feeding sinks and recording truth.

One stepper task per server plays the ``Batcher`` (``batch.py``) on the event loop's monotonic
clock: each step starts at the previous step's end (or at the arrival that wakes an idle
server) and is due at its start plus its duration. A wake-up late by more than ``CATCH_UP_S``
(40 ms, or one step) delays every later step, as on a real engine, instead of being caught up by
sending the held steps at once; smaller jitter is absorbed, so rates stay exact. The truth
records each step's end on the model's schedule (``intended_t_s``) and its real write (``t_s``). At a step's end every
member's tokens are handed to its request's task, which writes them (a slow client never holds
up the batch) and records the real write time next to the planned one. Alone, a request runs
exactly the single-request timeline: prefill, then one step after another.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_specperf.sim.batch import Batcher, BatchStep, Part, Seq, step_record
from pytest_specperf.sim.faults import FaultSpec, StatusCounters, parse_faults
from pytest_specperf.sim.metrics import SimMetrics
from pytest_specperf.sim.model import RequestModel
from pytest_specperf.sim.prefix_cache import PrefixCache
from pytest_specperf.sim.profile import Profile
from pytest_specperf.sim.textgen import token_stream
from pytest_specperf.sim.truth import TruthStore


class FaultDisconnect(Exception):
    """Raised after the connection was dropped on purpose by a ``disconnect@N`` fault."""


class Sink(Protocol):
    """Where a generation's tokens go: a streamed response or a body built at the end."""

    async def start(self) -> None:
        """Called once, before the prefill (a stream sends its headers here)."""

    async def step(self, ids: list[int], generated: int, finish_reason: str | None) -> float | None:
        """One step's tokens; ``finish_reason`` is set on the last step. Returns the monotonic time just before
        its bytes went to the socket, or None when none did (not streamed, or held back)."""

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
    category: str | None = None  # the profile's category of the prompt text (None: the kind decides)
    min_tokens: int = 0
    ignore_eos: bool = False
    seed: int | None = None
    temperature: float = 0.0
    faults: FaultSpec = field(default_factory=FaultSpec)
    body: dict[str, Any] = field(default_factory=dict)  # sampling fields as sent, for wire checks
    arrival: float = field(default_factory=time.monotonic)
    cache_salt: str = ""  # vLLM cache_salt: the prefix cache's namespace ("" = the shared one)
    cache_prompt: bool = True  # llama.cpp cache_prompt: false reuses nothing of the cache
    model_arrival: float = 0.0  # the arrival on the model's schedule (``Engine.late_s`` earlier), set by the engine
    received: float | None = None  # when its first bytes reached the socket (arrival.py: the kernel's stamp)


#: Real seconds a step may start late and still keep the schedule (see ``Engine._run_steps``).
CATCH_UP_S = 0.04
#: requests ``Engine.seen`` keeps (the newest)
SEEN_KEPT = 10_000


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
        #: what reached the server, route by route: method, path, query string, Authorization header (GET /sim/seen)
        self.seen: collections.deque[dict[str, str]] = collections.deque(maxlen=SEEN_KEPT)
        self.metrics = SimMetrics(profile.dialect, profile.model, profile.drafts_per_step + 1)
        self.status = StatusCounters()
        self.profile_faults = parse_faults(profile.faults)
        self._counter = itertools.count()
        self.batcher = Batcher(profile, self.speed)
        self.prefix_cache = PrefixCache(profile.prefix_cache_tokens, profile.prefix_cache_block)
        self._stepper: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        #: seconds the real schedule runs behind the model's: late wake-ups that were not caught up
        self.late_s = 0.0

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
                "category": req.category,
                "prompt_tokens": len(req.prompt_ids), "max_tokens": req.max_tokens, "temperature": req.temperature,
                "seed": req.seed, "body": req.body,
                "speculation": p.speculation,
                "completion_tokens": 0, "finish_reason": None, "done": False, "arrival_monotonic": req.arrival,
                "received_monotonic": req.arrival if req.received is None else min(req.received, req.arrival),
                "queue_s": None, "ttft_s": None, "total_s": None, "steps": [], "faults": [],
                **self._phase_fields(req)}

    def _phase_fields(self, req: GenRequest) -> dict[str, Any]:
        """Truth of the reasoning phase and the prefix cache (filled as the request runs)."""
        return {"reasoning_tokens": 0, "content_tokens": 0, "ttft_content_s": None,
                "cached_tokens": self.prefix_cache.admit(req.prompt_ids, req.cache_salt, reuse=req.cache_prompt)}

    def _join(self, seq: Seq) -> None:
        """Put a request into the batch and make sure a stepper runs."""
        self.batcher.add(seq)
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._stepper is None or self._stepper.done():
            self._stepper = asyncio.get_running_loop().create_task(self._run_steps())

    async def _run_steps(self) -> None:
        """Plan and time steps while any request is in the batch, then end (a new arrival restarts it)."""
        assert self._wake is not None
        last_s = 0.0
        while (start := self.batcher.next_start()) is not None:
            delay = start + self.late_s - time.monotonic()
            if delay > 0:  # idle until a stall ends, unless a new arrival comes first
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                continue
            self._fall_behind(start, last_s)
            step = self.batcher.step(start)
            last_s = step.end - step.start
            await _sleep_until(step.end + self.late_s)
            self._fall_behind(step.end, last_s)
            for part in step.parts:
                part.seq.owner.put_nowait((step, part))

    def _fall_behind(self, due: float, step_s: float) -> None:
        """After a wake-up for the model time ``due``: one later than CATCH_UP_S (or one step) moves every later step
        by as much, as on an engine whose next step starts when the last is done.

        The batcher keeps the model's schedule (the truth's ``intended_t_s``); the real one runs ``late_s`` behind
        it. Catching up instead would send the held steps at once, a burst no engine makes. Smaller lateness is
        caught up: a busy machine's wake-ups come a few ms late (tens beside CPU hogs at 16 streams), several
        steps at speed 10-50, and falling behind by each would change every rate the tests hold to the model."""
        late = time.monotonic() - (due + self.late_s)
        if late > max(CATCH_UP_S, step_s):
            self.late_s += late

    async def close(self) -> None:
        """Stop the stepper (server shutdown)."""
        if self._stepper is not None and not self._stepper.done():
            self._stepper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stepper

    async def generate(self, req: GenRequest, sink: Sink) -> dict[str, Any]:
        """Run the request to its end in the batch; returns its (finished) truth record."""
        rec = self._record(req)
        self.truth.add(rec)
        self.metrics.running += 1
        seq: Seq | None = None
        try:
            start = await self._first_byte(req, rec) - self.late_s  # on the model's schedule
            req.model_arrival = req.arrival - self.late_s
            rec["behind_s"] = self.late_s
            await sink.start()
            seed = self.request_seed(req.seed, req.prompt_ids)
            text = token_stream(req.kind, seed + 1)
            target, reason = self.target(req)
            inbox: asyncio.Queue[tuple[BatchStep, Part]] = asyncio.Queue()
            seq = self._seq(req, rec, seed, target, start, inbox)
            self._join(seq)
            out: list[int] = []
            await self._relay(req, rec, sink, inbox, text, target, reason, out)
            rec["finish_reason"] = reason
            self.prefix_cache.store(req.prompt_ids + out, req.cache_salt)
            await sink.finish(rec)
        except FaultDisconnect:
            rec["finish_reason"] = "fault_disconnect"
        except (ConnectionError, asyncio.CancelledError) as exc:
            rec["finish_reason"] = "client_disconnected" if isinstance(exc, ConnectionError) else "cancelled"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if seq is not None:
                self.batcher.remove(seq)
            self.metrics.running -= 1
            rec["total_s"] = time.monotonic() - req.arrival
            rec["done"] = True
            self.metrics.on_finish(rec)
        return rec

    async def _first_byte(self, req: GenRequest, rec: dict[str, Any]) -> float:
        """The request's timeline start, after a ``first_byte`` fault's wait (recorded in the truth)."""
        faults = req.faults
        # the timeline starts at arrival, so parsing and tokenizing the prompt are part of the
        # modelled prefill (as on a real server) instead of adding to it
        if not self.status.first_byte(faults, "first_byte"):  # first_byte=S*K holds only the first K answered
            return req.arrival
        start = req.arrival + faults.first_byte_s / self.speed
        if faults.first_byte_s > 0:
            await _sleep_until(start)
            rec["faults"].append({"kind": "first_byte", "at_token": 0, "s": faults.first_byte_s,
                                  "t_s": time.monotonic() - req.arrival})
        return start

    def _seq(self, req: GenRequest, rec: dict[str, Any], seed: int, target: int, start: float,
             inbox: asyncio.Queue[tuple[BatchStep, Part]]) -> Seq:
        """The request as the batcher sees it, its stall faults in real seconds (those before token 1 recorded)."""
        speed, faults = self.speed, req.faults
        model = RequestModel(self.profile, len(req.prompt_ids), req.kind, seed, req.category)
        model.reasoning = min(self.profile.reasoning_tokens, target) if req.route == "chat" else 0
        model.cached_tokens = rec["cached_tokens"]
        seq = Seq(model, target, start, stalls=[(at, s / speed) for at, s in faults.stalls], owner=inbox)
        for at, s in faults.stalls:
            if at <= 0:
                rec["faults"].append({"kind": "stall", "at_token": at, "s": s, "after_tokens": 0,
                                      "t_s": time.monotonic() - req.arrival})
        return seq

    async def _relay(self, req: GenRequest, rec: dict[str, Any], sink: Sink,
                     inbox: asyncio.Queue[tuple[BatchStep, Part]], text: Iterator[int], target: int,
                     reason: str, out: list[int]) -> None:
        """Hand each step's tokens to the sink as the batch makes them; metrics, truth and faults per step."""
        malformed_done = False
        generated = 0
        while generated < target:
            step, part = await inbox.get()
            generated = part.generated
            if part.phase == "prefill":
                first = part.seq.first_start  # the step of its first chunk (chunked prefill), else this one
                rec["queue_s"] = (step.start if first is None else first) - req.model_arrival
                self.metrics.on_prefill(len(req.prompt_ids))
            else:
                self.metrics.on_step(part.accepted, part.drafted, part.tokens)
            ids = [next(text) for _ in range(part.tokens)]
            out.extend(ids)
            written = await sink.step(ids, generated, reason if generated >= target else None)
            self._record_step(rec, req, step, part, written)
            malformed_done = await self._faults(sink, rec, req, part, malformed_done)

    def _record_step(self, rec: dict[str, Any], req: GenRequest, step: BatchStep, part: Part,
                     written: float | None) -> None:
        """Append the step to the truth record: real write time next to the planned one.

        The write time is stamped just before the bytes went to the socket (``written``), not after the write
        returned: on a busy host the server can be descheduled between the two for milliseconds while the client
        already read them, and a truth stamped late made a user's TTFT look shorter than the server's."""
        now = time.monotonic() if written is None else written
        entry = step_record(step, part, now - req.arrival, step.end - req.model_arrival, self.speed)
        entry["due_t_s"] = step.end + self.late_s - req.arrival  # the real schedule: the model's, plus its delays
        rec["steps"].append(entry)
        rec["completion_tokens"] = part.generated
        if rec["ttft_s"] is None:
            rec["ttft_s"] = entry["t_s"]
        _phase_truth(rec, entry, part.seq.model.reasoning, part.generated - part.tokens, part.generated)

    async def _faults(self, sink: Sink, rec: dict[str, Any], req: GenRequest, part: Part, malformed_done: bool) -> bool:
        """Stalls the batcher applied after this step, then malformed and disconnect faults; returns malformed_done."""
        now = time.monotonic() - req.arrival
        for at, s in part.stalls:
            rec["faults"].append({"kind": "stall", "at_token": at, "s": s * self.speed, "after_tokens": part.generated,
                                  "t_s": now})
        faults, generated = req.faults, part.generated
        if faults.malformed_at is not None and not malformed_done and generated >= faults.malformed_at:
            malformed_done = True
            await sink.malformed()
            rec["faults"].append({"kind": "malformed", "at_token": faults.malformed_at, "after_tokens": generated,
                                  "t_s": time.monotonic() - req.arrival})
        if faults.disconnect_at is not None and generated >= faults.disconnect_at:
            rec["faults"].append({"kind": "disconnect", "at_token": faults.disconnect_at, "after_tokens": generated,
                                  "t_s": time.monotonic() - req.arrival})
            sink.abort()
            raise FaultDisconnect()
        return malformed_done


def _phase_truth(rec: dict[str, Any], entry: dict[str, Any], reasoning: int, before: int, after: int) -> None:
    """Split a step's tokens (``before`` -> ``after`` generated) into reasoning and answer, in the truth."""
    entry["reasoning_tokens"] = max(0, min(after, reasoning) - before)
    rec["reasoning_tokens"] = min(after, reasoning)
    rec["content_tokens"] = after - rec["reasoning_tokens"]
    if rec["ttft_content_s"] is None and after > reasoning:
        rec["ttft_content_s"] = entry["t_s"]
