"""The SSE splitter's fast path (one ``data:`` line per event) gives what the general line rules give."""

from __future__ import annotations

import random
from collections.abc import Iterator

from pytest_specperf.events import _events_of, split_events

PARTS = [b'data: {"a": 1}\n\n', b": comment\n\n", b"data: x\r\ndata: y\r\n\r\n", b"data:z\n\n",
         b"event: e\ndata: q\n\n", b"data: [DONE]\n\n", b"data: a\ndata: b\n\n", "data: \u00e9t\u00e9\n\n".encode(),
         b"retry: 5\n\n", b"data: {}\n\n"]


def _line_by_line(reads: list[tuple[float, bytes]]) -> Iterator[tuple[float, str]]:
    buf, data = b"", []
    for t, raw in reads:
        buf += raw
        *lines, buf = buf.split(b"\n")
        yield from _events_of(lines, data, t)


def test_fast_path_matches_the_line_rules_on_random_cuts() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        stream = b"".join(rng.choice(PARTS) for _ in range(rng.randint(1, 12)))
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 6))))
        reads, prev = [], 0
        for i, cut in enumerate([*cuts, len(stream)]):
            reads.append((float(i), stream[prev:cut]))
            prev = cut
        assert list(split_events(reads)) == list(_line_by_line(reads)), (stream, cuts)


def test_an_event_split_across_reads_is_stamped_with_the_read_that_completed_it() -> None:
    reads = [(0.1, b'data: {"a"'), (0.2, b': 1}\n'), (0.3, b"\ndata: [DONE]\n\n")]
    assert list(split_events(reads)) == [(0.3, '{"a": 1}'), (0.3, "[DONE]")]
