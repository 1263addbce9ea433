"""The one retry policy every request uses, sync or async.

Transient refusals (429 Too Many Requests, 502/503/504 from a proxy or a server still loading) are
retried a bounded number of times, waiting what the server's ``Retry-After`` asks (seconds or an
HTTP date), else backing off 1, 2, 4 ... seconds; every wait is capped. A 500 is not retried: an
inference server answers it for a request it cannot serve, and the same request fails the same way.
Exceptions are never retried here: a refused connection or a cut stream is an answer to report.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_result, stop_after_attempt

#: The statuses worth asking again for.
RETRY_STATUSES = frozenset({429, 502, 503, 504})

#: A retried call returns its response with a number that belongs to the attempt (a start time, a duration).
Sent = tuple[httpx.Response, float]
S = TypeVar("S", bound=Sent)


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for, as delay-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _transient(sent: Sent) -> bool:
    return sent[0].status_code in RETRY_STATUSES


def _last_answer(state: RetryCallState) -> Sent:
    # Out of retries: hand back the last refusal so the caller names its status and body.
    assert state.outcome is not None
    result: Sent = state.outcome.result()
    return result


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``retries`` retries of a transient refusal, each wait at most ``max_wait_s`` seconds."""

    retries: int = 3
    max_wait_s: float = 30.0

    def wait_s(self, resp: httpx.Response, attempt: int) -> float:
        """The wait before retry ``attempt`` (1 for the first): Retry-After if given, else 2**(attempt-1)."""
        asked = retry_after_s(resp.headers.get("retry-after"))
        wait = 2.0 ** (attempt - 1) if asked is None else asked
        return min(wait, self.max_wait_s)

    def _wait(self, state: RetryCallState) -> float:
        assert state.outcome is not None
        return self.wait_s(state.outcome.result()[0], state.attempt_number)

    def _settings(self) -> dict[str, object]:
        return {"stop": stop_after_attempt(self.retries + 1), "retry": retry_if_result(_transient),
                "wait": self._wait, "retry_error_callback": _last_answer, "reraise": True}

    def call(self, send: Callable[[], S]) -> S:
        """``send()`` until it is not refused or the retries are spent; returns the last answer."""
        return Retrying(sleep=time.sleep, **self._settings())(send)  # type: ignore[arg-type]

    async def acall(self, send: Callable[[], Awaitable[S]]) -> S:
        """As :meth:`call`, for a coroutine; waits without blocking the event loop."""
        result: S = await AsyncRetrying(**self._settings())(send)  # type: ignore[arg-type]
        return result
