"""Timing fidelity benchmark: do real emission times follow the truth?

``python -m pytest_specperf.sim.fidelity [--streams 1 16] [--tokens 300] [--speed 1]`` starts a
simulator subprocess, streams ``--tokens`` tokens on N concurrent requests with httpx (as the
plugin's client does) and compares, chunk by chunk, three clocks on the host's shared
monotonic clock:

- lateness: the truth's real write time ``t_s`` minus the real schedule's ``due_t_s``;
- receive: the client's receive time minus the truth's write time (transport + client);
- total: the client's receive time minus the intended time (what a measurement sees).

It prints the median and p95 of each in milliseconds, one line per concurrency level.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

import httpx
import numpy as np
from httpx_sse import EventSource

from pytest_specperf.sim.launcher import SimServer
from pytest_specperf.sim.textgen import prompt_text


def _pct(values: list[float], q: float) -> float:
    return float(np.quantile(values, q, method="nearest")) if values else float("nan")


async def _one(client: httpx.AsyncClient, url: str, model: str, prompt: str, tokens: int,
               seed: int) -> tuple[str, list[float]]:
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "ignore_eos": True, "stream": True,
            "seed": seed}
    recv: list[float] = []
    rid = ""
    async with client.stream("POST", url + "/v1/completions", json=body) as resp:
        resp.raise_for_status()
        async for sse in EventSource(resp).aiter_sse():
            now = time.monotonic()
            if sse.data == "[DONE]":
                break
            chunk = json.loads(sse.data)
            rid = chunk["id"]
            if chunk["choices"]:
                recv.append(now)
    return rid, recv


async def _run(sim: SimServer, streams: int, tokens: int) -> dict[str, Any]:
    prompt = prompt_text("prose", 200)
    limits = httpx.Limits(max_connections=streams + 4, max_keepalive_connections=streams + 4)
    async with httpx.AsyncClient(timeout=120.0, limits=limits) as client:
        await _one(client, sim.url, sim.model, prompt, 8, 0)  # warm the connection pool and code paths
        results = await asyncio.gather(*[_one(client, sim.url, sim.model, prompt + f" ({i})", tokens, i)
                                         for i in range(streams)])
    late: list[float] = []
    receive: list[float] = []
    total: list[float] = []
    for rid, recv in results:
        truth = sim.truth(rid)
        steps = truth["steps"]
        if len(steps) != len(recv):
            raise RuntimeError(f"{rid}: {len(recv)} chunks received but truth has {len(steps)} steps")
        base = truth["arrival_monotonic"]
        for step, t in zip(steps, recv, strict=True):
            late.append(1000.0 * (step["t_s"] - step["due_t_s"]))
            receive.append(1000.0 * (t - (base + step["t_s"])))
            total.append(1000.0 * (t - (base + step["due_t_s"])))
    return {"streams": streams, "chunks": len(late),
            **{f"{name}_median_ms": statistics.median(v) for name, v in
               (("lateness", late), ("receive", receive), ("total", total))},
            **{f"{name}_p95_ms": _pct(v, 0.95) for name, v in
               (("lateness", late), ("receive", receive), ("total", total))}}


def measure(streams: int = 1, tokens: int = 300, *, speed: float = 1.0, profile: str = "healthy",
            sim: SimServer | None = None) -> dict[str, Any]:
    """Run one fidelity measurement; uses ``sim`` if given, else starts a subprocess simulator."""
    if sim is not None:
        return asyncio.run(_run(sim, streams, tokens))
    with SimServer(profile, speed=speed) as own:
        return asyncio.run(_run(own, streams, tokens))


def main(argv: list[str] | None = None) -> int:
    """Print the fidelity figures for each ``--streams`` level."""
    ap = argparse.ArgumentParser(prog="python -m pytest_specperf.sim.fidelity", description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--profile", default="healthy")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = ap.parse_args(argv)
    with SimServer(args.profile, speed=args.speed) as sim:
        for n in args.streams:
            r = measure(n, args.tokens, sim=sim)
            if args.json:
                print(json.dumps(r))
                continue
            print(f"streams={n:3d} chunks={r['chunks']:5d}  "
                  f"lateness median {r['lateness_median_ms']:6.3f} p95 {r['lateness_p95_ms']:6.3f} ms | "
                  f"receive median {r['receive_median_ms']:6.3f} p95 {r['receive_p95_ms']:6.3f} ms | "
                  f"total median {r['total_median_ms']:6.3f} p95 {r['total_p95_ms']:6.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
