"""Streams per worker process against the error of what they measure, on the simulator's clock.

Run: ``python benchmarks/scale_out.py`` (several minutes; ``--quick`` for a short look, under a minute). For 1, 2
and 4 worker processes (1: the pytest process itself, as without ``--specperf-workers``; more: execnet workers,
``scale/pool.py``) and a rising number of streams per worker, it runs ``sustained(concurrency=W x S)`` through the
runner against one simulator child process and compares every stream with the simulator's record of it:

- TTFT error: the plugin's first-token read, on the controller's clock (a worker's stamp moved by its measured
  offset), minus the server's first write (``arrival_monotonic + ttft_s``), p50 and p99 over the streams, in ms;
- TTFT against the truth's: the plugin's TTFT (first read less its header write) minus the truth's ``ttft_s`` (first
  write less the server loop's read of the request), p50 in ms: it adds the server's own late reads on a busy host;
- per-user decode error: the plugin's decode tok/s over the truth's (tokens after the first step over first to
  last step written), median and p99 of its absolute value in %;
- the simulator's own lag: p99 of its last step's real write less its model schedule (``t_s - intended_t_s``);
  where it is large the simulator, not the client, is the limit and the row says nothing of the client;
- the workers' CPU share (the busiest) and send lateness p99.

The per-process bound ``PER_PROCESS_STREAMS`` (scale/senders.py) comes from these rows: the most streams per
worker at which TTFT p50 stays under 1 ms, p99 under 5 ms and decode within 1% while the simulator keeps up.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx
import numpy as np

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
from pytest_specperf.scale.pool import Pool
from pytest_specperf.scale.senders import Local
from pytest_specperf.sim import SimServer


class _Local(Local):
    """The pytest process alone, without the bound this benchmark measures."""

    def check(self, streams: int, what: str) -> None:
        """No bound: the rows past it are the point."""


class _Pool(Pool):
    """Worker processes, without the bound this benchmark measures."""

    def check(self, streams: int, what: str) -> None:
        """No bound: the rows past it are the point."""


def _true_decode(rec: dict[str, Any]) -> float:
    steps = rec["steps"]
    k = sum(s["tokens"] for s in steps) - steps[0]["tokens"]
    return float(k / (steps[-1]["t_s"] - steps[0]["t_s"]))


def row(runner: Runner, truth: httpx.Client, users: int, tokens: int, i: int) -> dict[str, float]:
    """One case of ``users`` streams: its errors against the truth."""
    r = runner.run(SustainedSpec(tokens=tokens, ctx=64, concurrency=users, max_drift=0.99), f"scale::{users}::{i}")
    ttft, decode, lag = [], [], []
    for s in r.streams:
        rec = truth.get(f"/sim/truth/{s.response_id}").raise_for_status().json()
        ttft.append(1000.0 * (s.ttft_s - rec["ttft_s"]))
        decode.append(100.0 * abs(s.decode_tps / _true_decode(rec) - 1))
        last = rec["steps"][-1]
        lag.append(1000.0 * (last["t_s"] - last["intended_t_s"]))
    first = _first_reads(truth)
    shares = r.workers or []
    return {"read_p50": float(np.percentile(first, 50)), "read_p99": float(np.percentile(first, 99)),
            "ttft_p50": float(np.percentile(ttft, 50)),
            "decode_p50": float(np.percentile(decode, 50)), "decode_p99": float(np.percentile(decode, 99)),
            "sim_lag_p99": float(np.percentile(lag, 99)),
            "cpu": max((w.cpu_share for w in shares), default=float("nan")),
            "late_p99": 1000.0 * float(r.late_p99_s or 0.0), "verdict_ok": float(not r.client_behind)}


_LAST: list[tuple[str, float]] = []  # (response id, absolute first read on the controller's clock) of the last case


def _first_reads(truth: httpx.Client) -> list[float]:
    out = []
    for rid, at in _LAST:
        rec = truth.get(f"/sim/truth/{rid}").raise_for_status().json()
        out.append(1000.0 * (at - (rec["arrival_monotonic"] + rec["ttft_s"])))
    _LAST.clear()
    return out


def _record_first_reads(senders: Any) -> None:
    """Wrap the senders so each case's absolute first reads are kept (the result holds only relative times)."""
    for name in ("streams", "closed_loop"):
        inner = getattr(senders, name)

        def wrapped(*a: Any, _inner: Any = inner, **kw: Any) -> Any:
            sent = _inner(*a, **kw)
            _LAST.extend((o.trace.response_id, o.trace.t0 + o.trace.chunks[0].t) for o in sent.outcomes
                         if o.trace is not None and o.trace.response_id)
            return sent

        setattr(senders, name, wrapped)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 and 2 workers, 16 and 48 streams each, at speed 4")
    ap.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    ap.add_argument("--per-worker", default="64,128,256,384", help="streams per worker (default 64,128,256,384)")
    ap.add_argument("--tokens", type=int, default=64, help="tokens per stream (default 64)")
    ap.add_argument("--speed", type=float, default=1.0, help="simulator speed (default 1)")
    ap.add_argument("--rounds", type=int, default=1, help="cases per row (default 1)")
    ap.add_argument("--max-streams", type=int, default=1024, help="skip rows with more streams in all (default 1024)")
    args = ap.parse_args()
    if args.quick:
        args.workers, args.per_worker, args.tokens, args.speed = "1,2", "16,48", 32, 4.0
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.tokens} tokens per stream, "
          f"simulator speed {args.speed:g}")
    print("| workers | streams per worker | streams | TTFT error p50 / p99 ms | TTFT - truth's p50 ms | "
          "decode error p50 / p99 % | simulator lag p99 ms | busiest worker CPU | send late p99 ms | judged |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with SimServer("healthy", speed=args.speed, overrides={"jitter": 0.0, "max_batch": 4096}) as sim, \
            Client(sim.url, timeout=120) as client, httpx.Client(base_url=sim.url, timeout=60) as truth:
        client.detect()
        for w in (int(x) for x in args.workers.split(",")):
            senders: Any = _Local() if w == 1 else _Pool(w)
            _record_first_reads(senders)
            runner = Runner(client, senders=senders, inconclusive="pass")
            try:
                for per in (int(x) for x in args.per_worker.split(",")):
                    if w * per > args.max_streams:
                        continue
                    rows = [row(runner, truth, w * per, args.tokens, i) for i in range(args.rounds)]
                    m = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
                    cpu = "-" if np.isnan(m["cpu"]) else f"{m['cpu']:.2f}"  # "-": the pytest process alone
                    print(f"| {w} | {per} | {w * per} | {m['read_p50']:.2f} / {m['read_p99']:.2f} | "
                          f"{m['ttft_p50']:+.2f} | {m['decode_p50']:.2f} / {m['decode_p99']:.2f} | "
                          f"{m['sim_lag_p99']:.1f} | {cpu} | "
                          f"{m['late_p99']:.1f} | "
                          f"{'yes' if m['verdict_ok'] else 'no'} |", flush=True)
            finally:
                senders.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
