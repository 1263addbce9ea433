"""Ground truth per response: what the model meant to do and when each step really went out.

A record (``GET /sim/truth/{id}``, ``SimServer.truth(id)``) is plain JSON::

    {"id", "route", "stream", "model", "dialect", "profile", "speed", "content_kind", "category",
     "prompt_tokens", "max_tokens", "temperature", "seed", "speculation", "completion_tokens", "finish_reason", "done",
     "body",                        # the request's sampling/length fields as the client sent them
     "arrival_monotonic",           # server's time.monotonic() when its loop read the request's first bytes, before
                                    # any handler's work (arrival.py; the same clock as the client's on one host)
     "received_monotonic",          # when those bytes reached the socket: on Linux the kernel's receive time, which a
                                    # busy loop cannot delay (a replay's send fidelity); else = arrival_monotonic
     "queue_s",                     # arrival -> start of the step that prefilled it (waiting for a slot)
     "ttft_s",                      # = steps[0].t_s: the first token's chunk written
     "total_s",                     # the response finished (last byte written), null until done
     "reasoning_tokens", "content_tokens",  # sent as reasoning (chat with reasoning_tokens) / as the answer
     "ttft_content_s",              # the first answer token's chunk written (= ttft_s without reasoning)
     "cached_tokens",               # prompt tokens the prefix cache held (0 with the cache off)
     "behind_s",                    # how far the real schedule ran behind the model's when it arrived
     "steps": [{"t_s", "tokens", "step_ms", "intended_t_s", "start_t_s", "due_t_s", "accepted", "drafted", "ctx",
                "phase", "step", "batch", "batch_tokens", "batch_ctx", "reasoning_tokens"}],
     "faults": [{"kind", "at_token", "t_s", ...}]}

``category`` is the profile's category of the prompt text (``categories`` rules, matched on the
text alone), null when no rule matches; ``content_kind`` is the classifier's kind either way.

Per step: ``t_s`` is the real time, relative to arrival, just before the step's chunk was
written to the socket (non-streamed: when the step finished; the body goes out at the end);
``intended_t_s`` is when the model's schedule wanted it, ``due_t_s`` when the real one did (the
model's plus the late wake-ups the server did not catch up, ``engine.CATCH_UP_S``); ``step_ms`` is
the model's real-time duration of that step (model ms divided by speed; for the first,
``phase: "prefill"``, step the prefill time); ``tokens = accepted + 1`` for decode steps;
``drafted`` draft tokens were proposed.
Sum of ``tokens`` == ``completion_tokens``. Steps are shared (continuous batching): ``step`` is
the server-wide step number (requests in one step share it, its end and its ``step_ms``),
``batch`` the sequences in it, ``batch_tokens`` the tokens it verified for its decoding
sequences (drafts + bonus each), ``batch_ctx`` the context it attended over (summed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

MAX_RECORDS = 2000  # oldest records are dropped so a long-lived server stays bounded in memory


class TruthStore:
    """Records by response id, bounded; safe to read from another thread (in-process helper)."""

    def __init__(self, limit: int = MAX_RECORDS) -> None:
        self._lock = threading.Lock()
        self._records: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._limit = limit

    def add(self, record: dict[str, Any]) -> None:
        """Register a new (in-progress) record under its ``id``."""
        with self._lock:
            self._records[record["id"]] = record
            while len(self._records) > self._limit:
                self._records.popitem(last=False)

    def live(self, response_id: str) -> dict[str, Any] | None:
        """The record itself, not a copy: for the server's own code on its event loop (a proxy fault setting the
        write times of the steps it held)."""
        return self._records.get(response_id)

    def get(self, response_id: str) -> dict[str, Any] | None:
        """A snapshot copy of a record (steps list copied), or None when unknown."""
        with self._lock:
            rec = self._records.get(response_id)
            if rec is None:
                return None
            out = dict(rec)
            out["steps"] = [dict(s) for s in rec["steps"]]
            out["faults"] = [dict(f) for f in rec["faults"]]
            return out

    def summaries(self) -> list[dict[str, Any]]:
        """Every record without its steps, oldest first: what each request asked for (wire checks)."""
        with self._lock:
            return [{k: v for k, v in rec.items() if k not in ("steps", "faults")} for rec in self._records.values()]

    def clear(self) -> int:
        """Drop every record; returns how many there were."""
        with self._lock:
            n = len(self._records)
            self._records.clear()
            return n
