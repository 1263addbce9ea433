"""In what order a replay writes the requests due at one instant, and which write the simulator's arrival stamp follows.

Run: ``python benchmarks/send_order.py [--runs 3]`` (about 30 s a run). Each run replays what
``tests/http/test_replay_truth.py::test_arrivals_within_5_ms_p99_of_the_schedule[10]`` replays (the shipped Mooncake
excerpt's first 10 s and Azure's first 40 s at speed 10, 127 rows, against the simulator at speed 5) and records, per
request, from httpcore's trace events on the client: when its headers were written (the client's send stamp, just
before the write), and when its body's write began (``send_request_body.started``: httpcore writes the body as soon
as that event returns). Against them it sets the simulator's ``received_monotonic`` (the kernel's receive time of the
request's first read) and prints:

- per run: arrival - schedule p50/p99 over the 127 rows; how many times a request's body was written before the
  headers of another request due at the same instant (the order "headers of all, then bodies" rules out); and, for
  requests whose header and body writes lay over 2 ms apart, whether the stamp was nearer the one or the other;
- with ``--groups``: for every group of rows due at one instant, each row's header write, body write, the kernel's
  stamp and the simulator's loop read, in ms after the schedule.

``--quick``: one run of the Mooncake window only (38 rows; CI's check that the script still runs).

The kernel stamps a read with the receive time of its last segment, so a request that the simulator reads only after
its body came is stamped at its body's arrival (docs/benchmarks.md, replay arrivals).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.endpoint import concurrent
from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer

WINDOWS = (("builtin:mooncake-conversation", 10.0), ("builtin:azure-conv-2023", 40.0))


@contextmanager
def body_writes() -> Iterator[dict[float, float]]:
    """While open: each request's header stamp (``SentClock.at``) -> when its body's write began."""
    seen: list[tuple[Any, float]] = []
    original = concurrent._GatedClock.atrace

    async def atrace(self: concurrent._GatedClock, name: str, info: dict[str, Any]) -> None:
        await original(self, name, info)
        if name.endswith("send_request_body.started"):
            seen.append((self, time.perf_counter()))

    concurrent._GatedClock.atrace = atrace  # type: ignore[method-assign]
    out: dict[float, float] = {}
    try:
        yield out
    finally:
        concurrent._GatedClock.atrace = original  # type: ignore[method-assign]
        out.update({clock.at: t for clock, t in seen if clock.at is not None})


def one_run(sim: SimServer, groups: bool, windows: tuple[tuple[str, float], ...] = WINDOWS) -> list[float]:
    """One replay of ``windows``; prints its figures and returns arrival - schedule per row (s)."""
    errors: list[float] = []
    body_first = near_header = near_body = 0
    for trace, window in windows:
        client = Client(sim.url, timeout=60)
        try:
            client.detect()
            with body_writes() as bodies:
                r = Runner(client).run(build_spec("replay", {"trace": trace, "speed": 10, "duration_s": window}),
                                       "send_order::replay")
        finally:
            client.close()
        assert isinstance(r, ReplayResult) and r.origin_s is not None
        rows = []
        for p in r.per_request:
            assert p.response_id is not None
            truth = sim.truth(p.response_id)
            due, header = r.origin_s + p.scheduled_s, r.origin_s + p.sent_s
            body = min(bodies.items(), key=lambda kv: abs(kv[0] - header))[1] if bodies else float("nan")
            rows.append((due, header, body, truth["received_monotonic"], truth["arrival_monotonic"], p.input_length))
        errors += [stamp - due for due, _, _, stamp, _, _ in rows]
        for due, header, body, stamp, _, _ in rows:
            together = [h for d, h, *_ in rows if d == due and h != header]
            body_first += sum(1 for h in together if body < h)
            if body - header > 0.002:
                if abs(stamp - header) < abs(stamp - body):
                    near_header += 1
                else:
                    near_body += 1
        if groups:
            for due in sorted({d for d, *_ in rows}):
                group = sorted((row for row in rows if row[0] == due), key=lambda row: row[1])
                if len(group) < 2:
                    continue
                print(f"  {trace}: {len(group)} rows due together (ms after the schedule)")
                for _, header, body, stamp, read, tokens in group:
                    print(f"    {tokens:6d} tokens: headers {1e3 * (header - due):6.2f}  body {1e3 * (body - due):6.2f}"
                          f"  kernel stamp {1e3 * (stamp - due):6.2f}  loop read {1e3 * (read - due):7.2f}")
    p50, p99 = (1e3 * float(np.percentile(errors, q)) for q in (50, 99))
    print(f"arrival - schedule p50 {p50:.1f} ms p99 {p99:.1f} ms over {len(errors)} rows; a body written before the "
          f"headers of another row due with it: {body_first} times; stamps of rows whose headers and body went over "
          f"2 ms apart: {near_header} nearer the headers, {near_body} nearer the body")
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--groups", action="store_true", help="print every group of rows due together")
    parser.add_argument("--quick", action="store_true", help="one run of the Mooncake window only")
    args = parser.parse_args()
    with SimServer("healthy", speed=5) as sim:
        for _ in range(1 if args.quick else args.runs):
            one_run(sim, args.groups, WINDOWS[:1] if args.quick else WINDOWS)


if __name__ == "__main__":
    main()
