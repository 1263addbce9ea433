"""What a replay costs and how faithfully it is sent, on this machine, against the simulator's truth.

Run: ``python benchmarks/replay.py`` (a few minutes; ``--rows 162 --speeds 1 10`` by default). Per speed:

1. **Prompts**: time and client CPU to build the window's exact-length prompts (before the first send).
2. **Client CPU**: the client process's whole CPU seconds for the replay (building and sending), the figure to
   set beside another replay tool's on the same machine (AIPerf 0.13 used 10-17 CPU seconds for the first 162
   Mooncake rows, GuideLLM 0.8.1 30-36, as the issue measured them; neither is installed here).
3. **Arrivals**: the simulator's arrival stamp (the kernel's receive time) minus the schedule (origin + scheduled
   time), p50/p99 in ms, and the same stamp minus the client's own send, which isolates the client's lateness.
4. **Lengths and cache**: requests whose server-counted lengths differ from the trace's; the trace's reusable
   share against the server's cached share.

``--quick`` replays the first 38 rows at speed 10 only (CI's check that the script still runs).
``--build-all`` also times building all 400 rows of the Mooncake excerpt (5.7M prompt tokens).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.prompts.traces import build_trace_prompts, load_trace
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer

TRACE = "builtin:mooncake-conversation"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=162)
    ap.add_argument("--speeds", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--sim-speed", type=float, default=50.0)
    ap.add_argument("--build-all", action="store_true")
    ap.add_argument("--quick", action="store_true", help="38 rows at speed 10 (under a minute)")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.speeds, args.build_all = 38, [10.0], False
    rows = load_trace(TRACE).rows[:args.rows]
    window = rows[-1].at_s + 1e-3
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    with SimServer("healthy", speed=args.sim_speed, overrides={"cache_report": True}) as sim:
        client = Client(sim.url, timeout=120)
        client.detect()
        if args.build_all:
            every = list(load_trace(TRACE).rows)
            wall, cpu = time.perf_counter(), time.process_time()
            build_trace_prompts(every, client.count_tokens)
            print(f"build {len(every)} rows ({sum(r.input_length for r in every):,} prompt tokens): "
                  f"{time.perf_counter() - wall:.1f} s, client CPU {time.process_time() - cpu:.1f} s")
        for speed in args.speeds:
            spec = build_spec("replay", {"trace": TRACE, "speed": speed, "duration_s": window})
            cpu = time.process_time()
            r = Runner(client).run(spec, f"bench::replay{speed:g}")
            cpu = time.process_time() - cpu
            assert isinstance(r, ReplayResult) and r.origin_s is not None
            sched, sent = [], []
            for p in r.per_request:
                stamp = sim.truth(p.response_id)["received_monotonic"]
                sched.append(1000 * (stamp - (r.origin_s + p.scheduled_s)))
                sent.append(1000 * (stamp - (r.origin_s + p.sent_s)))
            print(f"speed {speed:g}: {r.requests} requests; prompts built in {r.prompts_build_s:.1f} s; client CPU "
                  f"{cpu:.1f} s in all ({r.client_cpu_share:.3f} of the sends' wall time); arrival - schedule p50 "
                  f"{np.percentile(sched, 50):.1f} ms p99 {np.percentile(sched, 99):.1f} ms; arrival - client send "
                  f"p50 {np.percentile(sent, 50):.2f} ms p99 {np.percentile(sent, 99):.2f} ms; length mismatches "
                  f"{r.length_mismatches}; reusable {r.reusable_share:.4f} vs cached {r.cached_share}")
        client.close()


if __name__ == "__main__":
    main()
