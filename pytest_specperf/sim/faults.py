"""Fault injection: the ``X-Specperf-Fault`` header / profile ``faults`` syntax and its counters.

Syntax: items separated by ``,`` or ``;`` (spaces ignored)::

    stall=S@N        pause S seconds once N tokens have been sent (N=0: before the first token)
    disconnect@N     drop the connection once N tokens have been sent (no [DONE], no final chunk)
    malformed@N      send one SSE line that is not valid JSON once N tokens have been sent
    hold=E@N         a buffering proxy: once N tokens have been sent, hold the next E events, then send them at once
    status=CODE*K    answer HTTP CODE (e.g. 503, 429) to the first K requests of this scope (K=1 if left out)
    retry_after=S    the Retry-After header (seconds) sent with status (default 1)
    retry_date=S     the same wait, sent as an HTTP date S seconds from now (whole seconds, as HTTP dates are)
    first_byte=S     hold the response (headers included) for S seconds before anything else
    first_byte=S*K   the same for the first K requests of this scope that are answered only
    first_byte=S*K%N the first K of every N answered (a slow path on a cycle: one backend of N behind a balancer)
    key=NAME         the scope of the status counter (default: the whole header value)

Times (stall, first_byte) are model seconds and are divided by ``--speed`` like every other
time; Retry-After is sent as given. The status counter counts requests per scope: header
faults per distinct ``key`` (or distinct header value), profile faults per server. ``POST
/sim/reset`` clears every counter, so tests stay independent.
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate

HEADER = "X-Specperf-Fault"


class FaultError(ValueError):
    """A fault spec that does not parse; the message is one line."""


@dataclass(frozen=True)
class FaultSpec:
    """Parsed faults of one request."""

    stalls: tuple[tuple[int, float], ...] = ()  # (at_token, seconds), sorted by token
    disconnect_at: int | None = None
    malformed_at: int | None = None
    status: int | None = None
    status_count: int = 1
    retry_after: float = 1.0
    retry_as_date: bool = False
    first_byte_s: float = 0.0
    first_byte_count: int | None = None  # None: every request
    first_byte_every: int | None = None  # the count's cycle: the first K of every N requests (None: once)
    hold_events: int = 0  # a buffering proxy: events held once hold_at tokens were sent, then sent at once
    hold_at: int = 0
    key: str = ""
    raw: str = field(default="", compare=False)

    @property
    def retry_after_header(self) -> str:
        """The Retry-After value sent with ``status``: delay-seconds, or an HTTP date when asked for."""
        if self.retry_as_date:
            return formatdate(time.time() + self.retry_after, usegmt=True)
        return f"{self.retry_after:g}"

    @property
    def empty(self) -> bool:
        """True when this spec injects nothing."""
        return not (self.stalls or self.disconnect_at is not None or self.malformed_at is not None
                    or self.status is not None or self.first_byte_s > 0 or self.hold_events > 0)


_AT = re.compile(r"^(stall)=([^@]+)@(\d+)$|^(disconnect|malformed)@(\d+)$")
_HOLD = re.compile(r"^hold=(\d+)@(\d+)$")


def _seconds(item: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise FaultError(f"fault {item!r}: {text!r} is not a number of seconds") from None
    if not math.isfinite(v) or v < 0:
        raise FaultError(f"fault {item!r}: seconds must be >= 0")
    return v


def _count(item: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise FaultError(f"fault {item!r}: the count after * must be a positive integer")
    return int(text)


def parse_faults(text: str) -> FaultSpec:
    """Parse a fault spec (see module docstring); raise FaultError naming the bad item."""
    stalls: list[tuple[int, float]] = []
    kw: dict[str, object] = {}
    for raw_item in re.split(r"[,;]", text):
        item = "".join(raw_item.split())
        if not item:
            continue
        if item.startswith("hold="):
            h = _HOLD.match(item)
            if not h or int(h.group(1)) < 2:
                raise FaultError(f"fault {item!r}: hold takes E@N, at least 2 events held once N tokens were sent, "
                                 "e.g. hold=20@100")
            kw["hold_events"], kw["hold_at"] = int(h.group(1)), int(h.group(2))
            continue
        m = _AT.match(item)
        if m and m.group(1):
            stalls.append((int(m.group(3)), _seconds(item, m.group(2))))
            continue
        if m:
            kw[f"{m.group(4)}_at"] = int(m.group(5))
            continue
        name, sep, value = item.partition("=")
        if not sep or not value:
            raise FaultError(f"fault {item!r}: unknown item; use stall=S@N, disconnect@N, malformed@N, hold=E@N, "
                             f"status=CODE*K, retry_after=S, retry_date=S, first_byte=S[*K[%N]] or key=NAME")
        if name == "status":
            code_text, _, count_text = value.partition("*")
            if not code_text.isdigit() or not 400 <= int(code_text) <= 599:
                raise FaultError(f"fault {item!r}: status must be an HTTP error code 400-599")
            kw["status"] = int(code_text)
            kw["status_count"] = _count(item, count_text) if count_text else 1
        elif name in ("retry_after", "retry_date"):
            kw["retry_after"] = _seconds(item, value)
            kw["retry_as_date"] = name == "retry_date"
        elif name == "first_byte":
            seconds_text, _, count_text = value.partition("*")
            count_text, cycle, every_text = count_text.partition("%")
            kw["first_byte_s"] = _seconds(item, seconds_text)
            count = _count(item, count_text) if count_text else None
            if count is not None:
                kw["first_byte_count"] = count
            if cycle:
                every = _count(item, every_text)
                if count is None or every <= count:
                    raise FaultError(f"fault {item!r}: first_byte=S*K%N holds the first K of every N requests, "
                                     "so it needs K and N > K, e.g. first_byte=0.5*2%4")
                kw["first_byte_every"] = every
        elif name == "key":
            kw["key"] = value
        else:
            raise FaultError(f"fault {item!r}: unknown item {name!r}; use stall, disconnect, malformed, hold, status, "
                             f"retry_after, retry_date, first_byte or key")
    return FaultSpec(stalls=tuple(sorted(stalls)), raw=text, **kw)  # type: ignore[arg-type]


def combine(base: FaultSpec, over: FaultSpec) -> FaultSpec:
    """Profile faults with a request's header faults on top (the header wins field by field)."""
    if over.empty:
        return base
    if base.empty:
        return over
    return FaultSpec(
        stalls=tuple(sorted(base.stalls + over.stalls)),
        disconnect_at=over.disconnect_at if over.disconnect_at is not None else base.disconnect_at,
        malformed_at=over.malformed_at if over.malformed_at is not None else base.malformed_at,
        first_byte_s=over.first_byte_s or base.first_byte_s,
        first_byte_count=over.first_byte_count if over.first_byte_s else base.first_byte_count,
        first_byte_every=over.first_byte_every if over.first_byte_s else base.first_byte_every,
        hold_events=over.hold_events or base.hold_events,
        hold_at=over.hold_at if over.hold_events else base.hold_at,
        raw=f"{base.raw}, {over.raw}",
    )  # status is decided per scope before combining, see StatusCounters


class StatusCounters:
    """Counts requests per scope so ``status=CODE*K`` hits only the first K of each scope."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the in-process helper may reset from another thread
        self._counts: dict[str, int] = {}

    def hit(self, spec: FaultSpec, scope: str) -> bool:
        """Count this request in its scope; True when it is one of the first K and must fail."""
        if spec.status is None:
            return False
        return self._count(f"{scope}:{spec.key or spec.raw}") <= spec.status_count

    def first_byte(self, spec: FaultSpec, scope: str) -> bool:
        """Count this answered request for ``first_byte=S*K[%N]``; True when it is held (one of the first K, of
        every N with a cycle)."""
        if spec.first_byte_s <= 0:
            return False
        if spec.first_byte_count is None:
            return True
        n = self._count(f"{scope}:{spec.key or spec.raw}")
        if spec.first_byte_every is not None:
            n = (n - 1) % spec.first_byte_every + 1
        return n <= spec.first_byte_count

    def _count(self, key: str) -> int:
        """Count one more request under ``key``; its number."""
        with self._lock:
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
        return n

    def reset(self) -> int:
        """Forget every count; returns how many scopes there were."""
        with self._lock:
            n = len(self._counts)
            self._counts.clear()
        return n
