"""From streamed SSE events to a :class:`Trace`, shared by the sync and async clients.

Both clients timestamp an event when it arrives and hand ``(t, data)`` to a :class:`TraceBuilder`;
the builder counts tokens per event from what the server reports (continuous usage stats,
llama.cpp's ``timings_per_token``, token ids), else marks the event's text to be counted later.
:func:`split_events` turns timestamped raw byte reads into ``(t, data)`` pairs, so the async client
can keep its hot loop to a clock read and an append and parse everything after the stream ends.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_specperf.errors import MeasurementError, shorten

if TYPE_CHECKING:
    from pytest_specperf.endpoint.server_kinds import Capabilities

Fail = Callable[[str], MeasurementError]
# raw_decode skips json.loads' type checks and trailing-whitespace regex per event; feed checks the rest.
_decode = json.JSONDecoder().raw_decode


@dataclass(slots=True)
class Chunk:
    """One SSE event that carried generated tokens (slots: a 32k-token stream holds 32k of them)."""

    t: float  # seconds since the request was sent
    tokens: int
    text: str = ""
    reasoning: int = 0  # of its tokens, how many were reasoning (characters of reasoning text until finish)


@dataclass
class Trace:
    """A timed streamed completion."""

    chunks: list[Chunk]
    total_s: float
    usage: dict[str, Any]
    finish_reason: str | None
    response_id: str | None
    count_source: str  # continuous_usage | timings_per_token | token_ids | tokenize | chunks
    exact: bool
    timings: dict[str, Any] | None = None  # llama.cpp's last `timings` object
    extras: dict[str, Any] = field(default_factory=dict)  # other per-response stats (vLLM metrics, sglext)
    t0: float = 0.0  # time.perf_counter() when the request was sent: chunk times are relative to it

    @property
    def completion_tokens(self) -> int:
        """Tokens generated, as the server counted them."""
        return int(self.usage.get("completion_tokens", sum(c.tokens for c in self.chunks)))

    @property
    def reasoning_tokens(self) -> int:
        """Tokens sent as reasoning (``reasoning_content`` / ``reasoning`` deltas); 0 without a reasoning phase."""
        return sum(c.reasoning for c in self.chunks)

    @property
    def content_tokens(self) -> int:
        """Answer tokens (content and tool-call arguments): every token that was not reasoning."""
        return self.completion_tokens - self.reasoning_tokens

    @property
    def ttft_s(self) -> float:
        """Time to the first token of any kind, reasoning included."""
        return self.chunks[0].t

    @property
    def ttft_content_s(self) -> float | None:
        """Time to the first answer token (the first chunk not all reasoning); None when all was reasoning."""
        for c in self.chunks:
            if c.tokens > c.reasoning:
                return c.t
        return None

    @property
    def cached_tokens(self) -> int | None:
        """Prompt tokens the server took from its prefix cache, where it says: ``usage.prompt_tokens_details``
        (vLLM with --enable-prompt-tokens-details, SGLang with --enable-cache-report) or llama.cpp's
        ``timings.cache_n``; None when it does not say."""
        details = self.usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            return int(details["cached_tokens"])
        if self.timings and isinstance(self.timings.get("cache_n"), int):
            return int(self.timings["cache_n"])
        return None

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt tokens, as the server counted them."""
        v = self.usage.get("prompt_tokens")
        return int(v) if v is not None else None


class TraceBuilder:
    """Accumulates one stream's events; :meth:`feed` each, then :meth:`finish`."""

    def __init__(self, caps: Capabilities, fail: Fail) -> None:
        self.caps = caps
        self._fail = fail
        self.chunks: list[Chunk] = []
        self.usage: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.timings: dict[str, Any] | None = None
        self.extras: dict[str, Any] = {}
        self.source = ""
        self.done = False
        self.tokens = 0  # tokens seen so far (text-only chunks count 1 until counted)
        self._prev_usage = 0  # cumulative counts seen so far, per source
        self._prev_timings = 0
        self._continuous = caps.continuous_usage
        self._reasoning = False  # a chunk carried reasoning text
        self._rchars = 0  # reasoning characters of the chat delta being fed

    def feed(self, t: float, data: str) -> bool:
        """Take one event's data received at ``t``; True once the stream's ``[DONE]`` arrived."""
        obj = self._parse(data)
        if obj is None:
            return self.done
        if self.response_id is None:
            self.response_id = obj.get("id")
        choices = obj.get("choices")
        text, count, src = self._from_choice(choices[0]) if choices else ("", None, "")
        u = obj.get("usage")
        if u.__class__ is dict:
            count, src = self._from_usage(u, bool(choices), count, src)
        tm = obj.get("timings")
        if isinstance(tm, dict):
            count, src = self._from_timings(tm, bool(choices), count, src)
        if "metrics" in obj:
            self.extras["metrics"] = obj["metrics"]
        if "sglext" in obj:
            self.extras["sglext"] = obj["sglext"]
        if count is None and text:
            count, src = -1, "text"  # counted after the stream, off the clock
        if count:
            if not self.source:
                self.source = src
            self.chunks.append(Chunk(t, count, text))
            if self._rchars:  # only chat deltas with reasoning text get here
                self.chunks[-1].reasoning = self._rchars
                self._reasoning = True
            self.tokens += count if count > 0 else 1
        return False

    def _parse(self, data: str) -> dict[str, Any] | None:
        """The event's JSON object; None for ``[DONE]`` (which sets ``done``) and blank data.

        Malformed data and an error the server sent mid-stream raise the named error.
        """
        # The hot path (thousands of events per second): a JSON object goes straight to the decoder.
        if not data.startswith("{"):
            stripped = data.strip()
            if stripped == "[DONE]":
                self.done = True
                return None
            if not stripped:
                return None
        try:
            obj, end = _decode(data)
            if end != len(data) and data[end:].strip():
                raise ValueError("extra data")
        except ValueError:
            raise self._fail(f"malformed SSE line after {self.tokens} tokens: {shorten('data: ' + data, 80)!r}"
                             ) from None
        if not isinstance(obj, dict):
            raise self._fail(f"malformed SSE event after {self.tokens} tokens: {shorten(data, 80)!r}")
        if "error" in obj:
            err = obj["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise self._fail(f"server error mid-stream after {self.tokens} tokens: {shorten(str(msg), 100)}")
        return obj

    def _from_choice(self, ch: dict[str, Any]) -> tuple[str, int | None, str]:
        """The choice's text, and its token count when the server sent the token ids (a chat delta's
        reasoning characters go to ``_rchars``)."""
        fr = ch.get("finish_reason")
        if fr:
            self.finish_reason = fr
        if ch.get("delta") or ch.get("message"):  # set on every delta, so no event inherits another's
            text, self._rchars = choice_parts(ch)
        else:  # completions: text only (the common case, kept quick)
            text = ch.get("text") or ""
            if text.__class__ is not str:
                text = str(text)
        ids = ch.get("token_ids")
        if isinstance(ids, list):
            return text, len(ids), "token_ids"
        return text, None, ""

    def _from_usage(self, u: dict[str, Any], has_choice: bool, count: int | None, src: str
                    ) -> tuple[int | None, str]:
        """This chunk's count from cumulative per-chunk usage, where asked for and present from the start."""
        self.usage = u
        # A final-only usage (llama.cpp completions) is a total, not this chunk's count.
        cum = u.get("completion_tokens")
        if has_choice and cum is not None and self._continuous and self.source in ("", "continuous_usage"):
            cum = int(cum)
            count, src = cum - self._prev_usage, "continuous_usage"
            self._prev_usage = cum
        return count, src

    def _from_timings(self, tm: dict[str, Any], has_choice: bool, count: int | None, src: str
                      ) -> tuple[int | None, str]:
        """This chunk's count from llama.cpp's cumulative ``timings.predicted_n`` (timings_per_token)."""
        self.timings = tm
        if ("predicted_n" in tm and src != "continuous_usage" and has_choice
                and self.source in ("", "timings_per_token")):
            count, src = int(tm["predicted_n"]) - self._prev_timings, "timings_per_token"
            self._prev_timings = int(tm["predicted_n"])
        return count, src

    def finish(self, total_s: float, t0: float, count_text: Callable[[list[Chunk]], None]) -> Trace:
        """The Trace, counts reconciled with the server's total; ``count_text`` counts text-only chunks."""
        if not self.done:
            raise self._fail(f"stream cut after {self.tokens} tokens: it ended without data: [DONE]")
        chunks = self.chunks
        exact = self.source in ("continuous_usage", "timings_per_token", "token_ids")
        if self.source == "text":
            count_text(chunks)
        chunks = [c for c in chunks if c.tokens > 0]
        usage = self.usage
        if "completion_tokens" in usage:
            exact = reconcile(chunks, int(usage["completion_tokens"])) and exact
        else:
            usage = {**usage, "completion_tokens": sum(c.tokens for c in chunks)}
            exact = False
        if not chunks:
            raise self._fail("the stream carried no tokens")
        if self._reasoning:
            split_reasoning(chunks, usage)
        return Trace(chunks, total_s, usage, self.finish_reason, self.response_id, self.source or "chunks", exact,
                     self.timings, self.extras, t0)


_gc_lock = threading.Lock()
_gc_users = 0
_gc_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection while streams are read (as timeit does while it times).

    A full collection walks every object the process holds (numpy, scipy, the test session): it
    was measured at 120 ms during a 10,000-event stream, and every event arriving meanwhile got a
    late stamp. Reference counting still frees what a stream drops; the collector resumes after
    the last concurrent reader is done (a count, so threads of the sync client nest safely).
    """
    global _gc_users, _gc_was_enabled
    with _gc_lock:
        if _gc_users == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_was_enabled:
                gc.enable()


def split_events(reads: Iterable[tuple[float, bytes]]) -> Iterator[tuple[float, str]]:
    """SSE events' ``(t, data)`` from timestamped raw reads: an event is stamped with the read that completed it.

    Multi-line ``data:`` fields join with newlines; comments, other fields and a trailing
    unterminated event are dropped, as an SSE client does. Lazy: a generator of reads that stamps
    each as it is pulled gives every event the time its last bytes arrived, before any parsing.
    """
    buf = b""
    data: list[bytes] = []
    for t, raw in reads:
        buf = buf + raw if buf else raw
        if b"\n" not in raw:
            continue
        if not data and b"\r" not in buf:
            # The common shape, one "data: ..." line per event and plain newlines: split on event ends.
            *events, buf = buf.split(b"\n\n")
            for ev in events:
                if ev.startswith(b"data: ") and b"\n" not in ev:
                    yield t, ev[6:].decode("utf-8", errors="replace")
                else:
                    yield from _events_of((ev + b"\n\n").split(b"\n")[:-1], data, t)
            if b"\n" not in buf:
                continue
        *lines, buf = buf.split(b"\n")
        yield from _events_of(lines, data, t)


def _events_of(lines: list[bytes], data: list[bytes], t: float) -> Iterator[tuple[float, str]]:
    """The general SSE line rules; ``data`` holds the current event's data lines across reads."""
    for line in lines:
        if line.startswith(b"data:"):
            value = line[6:] if line.startswith(b"data: ") else line[5:]
            data.append(value[:-1] if value.endswith(b"\r") else value)
        elif data and (not line or line == b"\r"):
            yield t, (data[0] if len(data) == 1 else b"\n".join(data)).decode("utf-8", errors="replace")
            data.clear()


def choice_text(ch: dict[str, Any]) -> str:
    """All generated text in a choice: content, reasoning (both spellings) and tool-call arguments."""
    return choice_parts(ch)[0]


def choice_parts(ch: dict[str, Any]) -> tuple[str, int]:
    """A choice's generated text (reasoning first, then content and tool-call arguments) and how many of its
    characters are reasoning (``reasoning_content`` as vLLM, SGLang and llama.cpp send it, ``reasoning`` as
    newer vLLM does)."""
    text = ch.get("text") or ""
    delta = ch.get("delta") or ch.get("message")
    if not delta:  # completions: text only (the common case, kept quick)
        return (text if isinstance(text, str) else str(text)), 0
    parts = [text]
    rchars = 0
    if isinstance(delta, dict):
        # Some servers send ``reasoning`` as an alias beside ``reasoning_content``: the first one that has text counts.
        for key in ("reasoning_content", "reasoning"):
            v = delta.get(key)
            if isinstance(v, str) and v:
                parts.append(v)
                rchars += len(v)
                break
        v = delta.get("content")
        if isinstance(v, str):
            parts.append(v)
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                parts.append(fn["arguments"])
    return "".join(parts), rchars


def split_reasoning(chunks: list[Chunk], usage: dict[str, Any]) -> None:
    """Turn each chunk's reasoning characters into reasoning tokens, once its token count is final.

    A chunk all reasoning gives all its tokens; one that holds the end of the reasoning and the
    start of the answer (vLLM and SGLang send one such chunk per stream) is split by characters,
    or, where the server counts reasoning tokens (``usage.completion_tokens_details.reasoning_tokens``,
    vLLM and SGLang with a reasoning parser), so that the chunks add up to the server's count.
    """
    mixed: list[Chunk] = []
    for c in chunks:
        if not c.reasoning:
            continue
        n = len(c.text)
        if c.reasoning >= n:
            c.reasoning = c.tokens
        else:
            c.reasoning = min(c.tokens, max(0, round(c.tokens * c.reasoning / n)))
            mixed.append(c)
    details = usage.get("completion_tokens_details")
    server = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if len(mixed) == 1 and isinstance(server, int):
        c = mixed[0]
        rest = sum(x.reasoning for x in chunks) - c.reasoning
        c.reasoning = min(c.tokens, max(0, server - rest))


def reconcile(chunks: list[Chunk], total: int) -> bool:
    """Make chunk counts sum to the server's total; True if they already did."""
    have = sum(c.tokens for c in chunks)
    if have == total or not chunks:
        return have == total
    # Spread the difference proportionally; the counts were approximate anyway.
    scale = total / have if have else 0.0
    acc = 0.0
    assigned = 0
    for c in chunks:
        acc += c.tokens * scale
        new = round(acc) - assigned
        assigned += new
        c.tokens = new
    return False
