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

``--peers`` (not with ``--quick``) sets the client's whole CPU beside other replay tools', each run as a child
process replaying the same first rows at the trace's own pace against one simulator, one after the other, CPU
seconds from the kernel's account of the finished child and its workers (``RUSAGE_CHILDREN``), with the
simulator's own CPU meanwhile (``/proc``: ours counts each prompt's tokens on the server, which AIPerf does with
its local tokenizer): ours (``Runner`` on a replay case), AIPerf (``--aiperf PATH``, default ``aiperf`` on PATH:
``profile --custom-dataset-type mooncake_trace --fixed-schedule``, with ``--aiperf-tokenizer``, a Hugging Face
tokenizer it can load offline; with ``HF_HUB_OFFLINE=1`` AIPerf 0.13 takes only a repo id found in the Hugging Face
cache, not a folder) and GuideLLM (``--guidellm PATH``: ``benchmark --profile replay``). AIPerf runs twice: first
with an empty dataset cache of its own (it builds its prompts, as on a fresh CI runner), then again on that cache
(it keeps the built dataset on disk and reuses it for the same file and tokenizer). A tool that is not installed
is left out with a printed note.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.prompts.traces import BUILTIN_PREFIX, BUILTIN_TRACES, build_trace_prompts, load_trace
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
    ap.add_argument("--peers", action="store_true", help="the client CPU of ours, AIPerf and GuideLLM, one run each")
    ap.add_argument("--aiperf", default="aiperf")
    ap.add_argument("--aiperf-tokenizer", default=None, help="a tokenizer AIPerf loads (a Hugging Face name)")
    ap.add_argument("--guidellm", default="guidellm")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.speeds, args.build_all, args.peers = 38, [10.0], False, False
    if args.peers:
        peers(args)
        return
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


OURS = """
import sys
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
url, window = sys.argv[1], float(sys.argv[2])
client = Client(url, timeout=300)
client.detect()
r = Runner(client).run(build_spec("replay", {"trace": "builtin:mooncake-conversation", "duration_s": window}), "peers")
print(r.requests, r.length_mismatches)
"""


def peers(args: argparse.Namespace) -> None:
    """Each tool's whole CPU (its process and every worker it waited for) replaying the same rows, one at a time."""
    rows = load_trace(TRACE).rows[:args.rows]
    window = rows[-1].at_s + 1e-3
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {len(rows)} Mooncake rows at "
          f"the trace's pace ({window:.0f} s)")
    with tempfile.TemporaryDirectory() as tmp, SimServer("healthy", speed=args.sim_speed,
                                                         overrides={"cache_report": True}) as sim:
        rows_file = Path(tmp) / "mooncake.jsonl"
        text = resources.files("pytest_specperf").joinpath(
            "data/traces", BUILTIN_TRACES[TRACE.removeprefix(BUILTIN_PREFIX)]).read_text()
        rows_file.write_text("".join(line + "\n" for line in text.splitlines()[:args.rows]))
        runs = {"specperf": [sys.executable, "-c", OURS, sim.url, str(window)],
                # streams read raw under httpx (endpoint/capture.py; off by default)
                "specperf, raw reads": [sys.executable, "-c", OURS, sim.url, str(window)]}
        aiperf = shutil.which(args.aiperf)
        if aiperf is None or args.aiperf_tokenizer is None:
            print(f"AIPerf left out: {'no --aiperf-tokenizer given' if aiperf else f'{args.aiperf} not found'}")
        else:
            cmd = [aiperf, "profile", "-m", sim.model, "--url", sim.url, "--endpoint-type", "completions",
                   "--streaming", "--input-file", str(rows_file), "--custom-dataset-type", "mooncake_trace",
                   "--fixed-schedule", "--tokenizer", args.aiperf_tokenizer, "--use-server-token-count"]
            runs["AIPerf, dataset built"] = [*cmd, "--artifact-dir", str(Path(tmp) / "aiperf1")]
            runs["AIPerf, dataset from its cache"] = [*cmd, "--artifact-dir", str(Path(tmp) / "aiperf2")]
        guidellm = shutil.which(args.guidellm)
        if guidellm is None:
            print(f"GuideLLM left out: {args.guidellm} not found")
        else:
            runs["GuideLLM"] = [guidellm, "benchmark", "--target", sim.url, "--profile", "replay", "--data",
                                str(rows_file), "--output-dir", str(Path(tmp) / "guidellm")]
        # AIPerf's dataset cache in this run's folder: empty for its first run, filled by it for the second
        env = {**os.environ, "AIPERF_DATASET_MMAP_CACHE_DIR": str(Path(tmp) / "aiperf-cache")}
        ours = 0.0  # our own run's CPU (set by name below): each tool's figure is set beside it
        for name, cmd in runs.items():
            before, server = resource.getrusage(resource.RUSAGE_CHILDREN), _cpu_of(sim.pid)
            wall = time.perf_counter()
            raw = {"SPECPERF_RAW_READS": "1" if name == "specperf, raw reads" else ""}
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, check=False, env={**env, **raw})
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if name == "specperf":
                ours = cpu
            said = (done.stderr.strip() or done.stdout.strip())[-300:]  # AIPerf prints its errors on stdout
            note = "" if done.returncode == 0 else f" (exit {done.returncode}: {said})"
            print(f"{name}: client CPU {cpu:.1f} s in all over {time.perf_counter() - wall:.0f} s wall (ours "
                  f"{ours / cpu:.2f} of it); the simulator's CPU meanwhile {_cpu_of(sim.pid) - server:.1f} s{note}")


def _cpu_of(pid: int | None) -> float:
    """A running process's CPU seconds so far (user + system), from /proc; 0 where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
