"""The SSE splitter gives the events httpx-sse gives, each stamped with the read that completed it.

The client splits SSE itself (so it can stamp raw reads before parsing, and parse stored reads after
a concurrent run); these tests hold it to httpx-sse's decoder and to its own general line rules.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import httpx
import httpx_sse

from pytest_specperf.endpoint.sse import _events_of, split_events

PARTS = [b'data: {"a": 1}\n\n', b": comment\n\n", b"data: x\r\ndata: y\r\n\r\n", b"data:z\n\n",
         b"event: e\ndata: q\n\n", b"data: [DONE]\n\n", b"data: a\ndata: b\n\n", "data: \u00e9t\u00e9\n\n".encode(),
         b"retry: 5\n\n", b"data: {}\n\n", b"data:  spaced \n\n"]


def _line_by_line(reads: list[tuple[float, bytes]]) -> Iterator[tuple[float, str]]:
    buf, data = b"", []
    for t, raw in reads:
        buf += raw
        *lines, buf = buf.split(b"\n")
        yield from _events_of(lines, data, t)


def _httpx_sse(reads: list[tuple[float, bytes]]) -> list[tuple[float, str]]:
    """httpx-sse's events, each with the time of the last read pulled when it came out."""
    now = [0.0]

    def body() -> Iterator[bytes]:
        for t, raw in reads:
            now[0] = t
            yield raw

    resp = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    return [(now[0], ev.data) for ev in httpx_sse.EventSource(resp).iter_sse()]


def _random_reads(rng: random.Random, parts: list[bytes]) -> list[tuple[float, bytes]]:
    stream = b"".join(rng.choice(parts) for _ in range(rng.randint(1, 12)))
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 6))))
    return [(float(i), stream[a:b]) for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(stream)], strict=True))]


def test_fast_path_matches_the_line_rules_on_random_cuts() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        reads = _random_reads(rng, PARTS)
        assert list(split_events(reads)) == list(_line_by_line(reads)), reads


def test_same_events_and_stamps_as_httpx_sse_on_random_cuts() -> None:
    # httpx-sse also dispatches a data-less event (``retry: 5``), which the SSE rules drop: left out here.
    parts = [p for p in PARTS if not p.startswith(b"retry")]
    rng = random.Random(1)
    for _ in range(2000):
        reads = _random_reads(rng, parts)
        assert list(split_events(reads)) == _httpx_sse(reads), reads


def test_an_event_split_across_reads_is_stamped_with_the_read_that_completed_it() -> None:
    reads = [(0.1, b'data: {"a"'), (0.2, b': 1}\n'), (0.3, b"\ndata: [DONE]\n\n")]
    assert list(split_events(reads)) == [(0.3, '{"a": 1}'), (0.3, "[DONE]")]
