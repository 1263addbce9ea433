"""TTFT on the server's clock: the plugin's time to first token against the simulator's recorded first write.

Run: ``python benchmarks/ttft_clock.py`` (about a minute). For each situation the issue names (sustained chat at
1 and 4 users, session turns 2-4, rate, the first answer token) it runs the case through the runner against a
simulator child and prints the median and p90 of (plugin TTFT - the truth's ``ttft_s``) in ms over every stream.
The truth's clock starts when the server read the request's first bytes (``sim/arrival.py``) and stops at its
first write; the plugin's starts just before its headers are written and stops when it read the first token, so
the difference is what the client adds (its own start, the read on the way back) plus either process's late
wake-ups on a busy machine. Sustained chat at 4 users runs 6 times per round (4 streams a run); ``--only TEXT``
picks situations.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer

#: 32 reasoning tokens before the answer: the first answer token is its own figure.
PROFILE = {"reasoning_tokens": 32, "jitter": 0.0}


@contextmanager
def _runner(speed: float) -> Iterator[tuple[Runner, SimServer]]:
    with SimServer("healthy", speed=speed, overrides=PROFILE) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        yield Runner(client), sim


def _errors(sim: SimServer, pairs: list[tuple[str | None, float | None]], field: str) -> list[float]:
    out = []
    for rid, got in pairs:
        if rid is None or got is None:
            continue
        truth = sim.truth(rid).get(field)
        if truth is not None:
            out.append(1000.0 * (got - truth))
    return out


def _streams(r: Any) -> list[Any]:
    return list(r.streams)


SITUATIONS: dict[str, tuple[dict[str, Any], Callable[[Any], list[tuple[str | None, float | None]]], str]] = {
    "sustained chat, 1 user": (
        {"kind": "sustained", "api": "chat", "ctx": 500, "tokens": 64, "repeat": 8},
        lambda r: [(s.response_id, s.ttft_s) for s in _streams(r)], "ttft_s"),
    "sustained chat, 4 users": (
        {"kind": "sustained", "api": "chat", "ctx": 500, "tokens": 64, "concurrency": 4},
        lambda r: [(s.response_id, s.ttft_s) for s in _streams(r)], "ttft_s"),
    "session turns 2-4": (
        {"kind": "session", "turns": 4, "users": 2, "ctx": 500, "tokens": 64},
        lambda r: [(row.response_id, row.ttft_s) for row in r.per_request if row.turn >= 2], "ttft_s"),
    "rate": (
        {"kind": "rate", "rps": 4.0, "requests": 16, "tokens": 64, "ctx": 500},
        # the rate case's ttft_s counts from the scheduled send (late_s included, by design): the time on the wire
        lambda r: [(row.response_id, row.ttft_s - row.late_s) for row in r.per_request
                   if row.ttft_s is not None], "ttft_s"),
    "first answer token (chat)": (
        {"kind": "sustained", "api": "chat", "ctx": 500, "tokens": 64, "repeat": 8},
        lambda r: [(s.response_id, s.ttft_content_s) for s in _streams(r)], "ttft_content_s"),
}


#: Runs per round: a 4-user run gives 4 streams, and its median needs as many as the others have.
RUNS_PER_ROUND = {"sustained chat, 4 users": 6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--speed", type=float, default=1.0, help="simulator speed (default 1: real time)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each situation (default 3)")
    ap.add_argument("--quick", action="store_true", help="one run of each situation at speed 4: a check that it runs")
    ap.add_argument("--only", metavar="TEXT", default="", help="only the situations whose name contains TEXT")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.speed = 1, max(args.speed, 4.0)
    print(f"{'situation':28} {'streams':>7} {'median ms':>10} {'p90 ms':>8}")
    for name, (kw, pick, field) in SITUATIONS.items():
        if args.only not in name:
            continue
        errors: list[float] = []
        with _runner(args.speed) as (runner, sim):
            for i in range(args.rounds * RUNS_PER_ROUND.get(name, 1)):
                kw2 = {k: v for k, v in kw.items() if k != "kind"}
                result = runner.run(build_spec(kw["kind"], kw2), f"ttft::{name}::{i}")
                errors += _errors(sim, pick(result), field)
        e = np.asarray(errors)
        print(f"{name:28} {e.size:7d} {np.median(e):10.2f} {np.percentile(e, 90):8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
