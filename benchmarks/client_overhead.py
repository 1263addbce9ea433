"""What the measuring side costs: the plugin's client against the bare floor of Python, on this machine.

Run: ``python benchmarks/client_overhead.py`` (a few minutes; ``--quick`` for a short look). Sections:

1. **Throughput**: one stream of ``--chunks`` one-token events sent back to back by
   ``benchmarks/sse_source.py`` (a subprocess); client CPU seconds per 1000 chunks
   (``time.process_time`` of this process only) and chunks per second per core, for the plugin's
   ``Client.stream`` and for bare readers of the same stream: httpx + httpx-sse, and aiohttp, each
   parsing every event's JSON as any token-counting client must (and without, for reference).
   Ratios are against the cheaper bare reader.
2. **Timestamp error**: the source paces events (``--interval-us``) and writes its send time
   (``perf_counter_ns``, a system-wide monotonic clock) into each; the error is arrival stamp minus
   send time, at C=1 and at C=64 (the plugin's concurrent client, 64 streams at once; bare aiohttp
   beside it).
3. **Long prompts**: ``build_prompt`` of 131072 tokens against the simulator: tokenize round trips
   and client CPU; a ``ctx_sweep`` up to 131072 run by the runner on the simulator.
4. **Memory**: peak resident memory of a fresh process that streams 32,000 tokens at C=1, and one
   that streams 16 x 4,000 at once, through the plugin and its measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import httpx
import numpy as np
from httpx_sse import connect_sse

from pytest_specperf.endpoint.client import Client
from pytest_specperf.run import stream_figures as measure

HERE = Path(__file__).parent
PROMPT = "Benchmark the client."
Stamps = list[tuple[float, int]]  # (arrival, perf_counter seconds; send time, ns)


@contextmanager
def sse_source() -> Iterator[str]:
    """The SSE source in a child process (its CPU is not ours); yields its URL."""
    proc = subprocess.Popen([sys.executable, str(HERE / "sse_source.py")], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("listening on "):
            raise RuntimeError(f"sse_source did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def _body(n: int) -> dict[str, object]:
    return {"model": "bench", "prompt": PROMPT, "max_tokens": n, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def _headers(interval_us: int) -> dict[str, str]:
    return {"X-Interval-Us": str(interval_us)}


# -- readers: each returns (arrival, send-ns) per token event ----------------------------------------

_CLIENTS: dict[str, Client] = {}
_HTTPX: dict[str, httpx.Client] = {}


def _client(url: str) -> Client:
    """One plugin client per URL, detected, as a session keeps it: per-session costs are not per stream."""
    if url not in _CLIENTS:
        _CLIENTS[url] = Client(url)
        _CLIENTS[url].detect()
    return _CLIENTS[url]


def read_plugin(url: str, n: int, interval_us: int) -> Stamps:
    """The plugin's sync client, as a sustained case streams (the trace's analysis included)."""
    trace = _client(url).stream(PROMPT, n, headers=_headers(interval_us))
    measure.stream_result(trace)
    return [(trace.t0 + c.t, int(c.text)) for c in trace.chunks]


def read_httpx(url: str, n: int, interval_us: int, parse: bool = True) -> Stamps:
    """Bare httpx + httpx-sse (one client kept, as the plugin keeps its own): timestamp each event, parse its JSON."""
    out: Stamps = []
    clock = time.perf_counter
    http = _HTTPX.setdefault(url, httpx.Client())
    with connect_sse(http, "POST", url + "/v1/completions", json=_body(n), headers=_headers(interval_us)) as es:
        for sse in es.iter_sse():
            t = clock()
            if sse.data == "[DONE]":
                break
            if parse:
                out.append((t, int(json.loads(sse.data)["choices"][0]["text"])))
            else:
                out.append((t, 0))
    return out


async def _aiohttp_stream(session: aiohttp.ClientSession, url: str, n: int, interval_us: int,
                          parse: bool) -> Stamps:
    out: Stamps = []
    clock = time.perf_counter
    async with session.post(url + "/v1/completions", json=_body(n), headers=_headers(interval_us)) as resp:
        async for line in resp.content:
            t = clock()
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].rstrip()
            if payload == b"[DONE]":
                break
            out.append((t, int(json.loads(payload)["choices"][0]["text"]) if parse else 0))
    return out


def read_aiohttp(url: str, n: int, interval_us: int, parse: bool = True) -> Stamps:
    """Bare aiohttp: timestamp each ``data:`` line, parse its JSON (or not)."""
    async def go() -> Stamps:
        async with aiohttp.ClientSession() as s:
            return await _aiohttp_stream(s, url, n, interval_us, parse)

    return asyncio.run(go())


def read_plugin_concurrent(url: str, n: int, interval_us: int, c: int) -> Stamps:
    """The plugin's concurrent client (load cases): ``c`` streams at once."""
    from pytest_specperf.endpoint.concurrent import StreamRequest, run_streams

    client = Client(url)
    client.detect()
    client.http.headers.update(_headers(interval_us))
    outcomes = run_streams(client, [StreamRequest(PROMPT, n, seed=i) for i in range(c)])
    out: Stamps = []
    for o in outcomes:
        if o.trace is None:
            raise RuntimeError(str(o.error))
        measure.stream_result(o.trace)
        out += [(o.trace.t0 + ch.t, int(ch.text)) for ch in o.trace.chunks]
    client.close()
    return out


def read_plugin_threads(url: str, n: int, interval_us: int, c: int) -> Stamps:
    """``c`` threads of the plugin's sync client."""
    results: list[Stamps] = [[] for _ in range(c)]

    def one(i: int) -> None:
        results[i] = read_plugin(url, n, interval_us)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(c)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return [s for r in results for s in r]


def read_aiohttp_concurrent(url: str, n: int, interval_us: int, c: int) -> Stamps:
    """Bare aiohttp, ``c`` streams at once on one event loop."""
    async def go() -> list[Stamps]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as s:
            return await asyncio.gather(*(_aiohttp_stream(s, url, n, interval_us, True) for _ in range(c)))

    return [x for r in asyncio.run(go()) for x in r]


# -- measurements -----------------------------------------------------------------------------------

def cpu_per_chunk(fn: Callable[[], Stamps], repeats: int) -> tuple[float, int]:
    """Median client CPU seconds per chunk over ``repeats`` runs, and chunks per run."""
    per = []
    n = 0
    for _ in range(repeats):
        c0 = time.process_time()
        stamps = fn()
        per.append((time.process_time() - c0) / len(stamps))
        n = len(stamps)
    return statistics.median(per), n


def errors_ms(stamps: Stamps) -> np.ndarray:
    return np.array([(t - sent / 1e9) * 1000.0 for t, sent in stamps])


def section_throughput(url: str, n: int, repeats: int) -> None:
    print(f"\n1. throughput: {n} one-token events sent back to back; client CPU only (median of {repeats})")
    readers = {
        "plugin Client.stream": lambda: read_plugin(url, n, 0),
        "bare httpx+httpx-sse": lambda: read_httpx(url, n, 0),
        "bare aiohttp": lambda: read_aiohttp(url, n, 0),
        "bare httpx-sse, no JSON": lambda: read_httpx(url, n, 0, parse=False),
        "bare aiohttp, no JSON": lambda: read_aiohttp(url, n, 0, parse=False),
    }
    for fn in readers.values():
        fn()  # warm imports, clients and connections
    res = {name: cpu_per_chunk(fn, repeats)[0] for name, fn in readers.items()}
    floor = min(res["bare httpx+httpx-sse"], res["bare aiohttp"])
    print(f"   {'reader':<26}{'CPU s/1000 chunks':>18}{'chunks/s/core':>15}{'x floor':>9}")
    for name, cpu in res.items():
        print(f"   {name:<26}{cpu * 1000:>18.4f}{1 / cpu:>15,.0f}{cpu / floor:>9.2f}")


def section_timing(url: str, n: int, interval_us: int, c: int, n_c: int, interval_c_us: int, repeats: int) -> None:
    print(f"\n2. timestamp error (arrival stamp - sender's send time), ms: C=1 at one event per {interval_us} us "
          f"({n} events); C={c} at one event per {interval_c_us} us per stream ({n_c} each)")
    rows = {
        ("C=1", "plugin Client.stream"): lambda: read_plugin(url, n, interval_us),
        ("C=1", "bare httpx+httpx-sse"): lambda: read_httpx(url, n, interval_us),
        ("C=1", "bare aiohttp"): lambda: read_aiohttp(url, n, interval_us),
        (f"C={c}", "plugin concurrent client"): lambda: read_plugin_concurrent(url, n_c, interval_c_us, c),
        (f"C={c}", "plugin sync client x threads"): lambda: read_plugin_threads(url, n_c, interval_c_us, c),
        (f"C={c}", "bare aiohttp"): lambda: read_aiohttp_concurrent(url, n_c, interval_c_us, c),
    }
    for fn in rows.values():
        fn()  # warm
    got: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {k: [] for k in rows}
    for _ in range(repeats):  # interleaved, so a busy spell of the machine hits every reader alike
        for key, fn in rows.items():
            c0 = time.process_time()
            stamps = fn()
            cpu = (time.process_time() - c0) / len(stamps)
            e = errors_ms(stamps)
            got[key].append((float(np.percentile(e, 50)), float(np.percentile(e, 99)), float(e.max()), cpu))
    print(f"   medians over {repeats} interleaved runs (max: the worst run's)")
    print(f"   {'':<6}{'reader':<30}{'p50':>8}{'p99':>8}{'max':>8}{'CPU s/1000 chunks':>19}  p99 of each run")
    for (cc, name), runs in got.items():
        med = [statistics.median(r[i] for r in runs) for i in (0, 1, 3)]
        worst = max(r[2] for r in runs)
        each = " ".join(f"{r[1]:.2f}" for r in runs)
        print(f"   {cc:<6}{name:<30}{med[0]:>8.3f}{med[1]:>8.3f}{worst:>8.2f}{med[2] * 1000:>19.4f}  {each}")


def _counting(client: Client, calls: list[int], wall: list[float]) -> Callable[[str], int]:
    """The client's token counter, counting its round trips and their wall time."""
    def count(text: str) -> int:
        calls[0] += 1
        t = time.perf_counter()
        try:
            return client.count_tokens(text)
        finally:
            wall[0] += time.perf_counter() - t

    return count


def section_prompts(speed: float, ctxs: tuple[int, ...] = (32_768, 131_072)) -> None:
    from pytest_specperf.cases.registry import build_spec
    from pytest_specperf.errors import MeasurementError
    from pytest_specperf.prompts.exact_length import build_prompt
    from pytest_specperf.run.runner import Runner
    from pytest_specperf.sim import SimServer

    print("\n3. long prompts on the simulator (vllm dialect)")
    with SimServer("healthy", speed=speed, overrides={"max_model_len": 140_000}) as sim:
        client = Client(sim.url, timeout=120)
        client.detect()
        for ctx in ctxs:
            for kind in ("prose", "code"):
                calls, wall = [0], [0.0]
                c0, t0 = time.process_time(), time.perf_counter()
                p = build_prompt(kind, ctx, _counting(client, calls, wall), variant=7)
                cpu, total = time.process_time() - c0, time.perf_counter() - t0
                print(f"   build_prompt({kind!r}, {ctx}): {p.tokens} tokens, {calls[0]} tokenize round trips, "
                      f"client CPU {cpu:.3f} s (wall {total:.2f} s, {wall[0]:.2f} s of it in tokenize calls)")
        runner = Runner(client)
        # 1024 extra tokens: at speed 50, 64 took a few ms, within the client's timing noise (inconclusive)
        spec = build_spec("ctx_sweep", {"ctxs": [64, *ctxs], "tokens": 1024})
        t0 = time.perf_counter()
        try:
            r = runner.run(spec, "bench::sweep")
        except MeasurementError as exc:  # a sweep too short to time says so in one line, never a traceback
            print(f"   ctx_sweep to {ctxs[-1]}: {exc}")
        else:
            pts = ", ".join(f"{p.ctx}: {p.prompt_tokens} tokens {p.decode_tps:.0f} tok/s" for p in r.points)
            print(f"   ctx_sweep to {ctxs[-1]}: {r.verdict}; {pts} ({time.perf_counter() - t0:.1f} s)")
        client.close()


_MEM_CHILD = """
import sys
from pytest_specperf.run import stream_figures as measure
from pytest_specperf.endpoint.client import Client
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
url, mode = sys.argv[1], sys.argv[2]
before = status("VmRSS:")
client = Client(url); client.detect()
if mode == "c1":
    measure.stream_result(client.stream("Benchmark the client.", 32000, headers={"X-Interval-Us": "0"}))
else:
    from pytest_specperf.endpoint.concurrent import StreamRequest, run_streams
    outs = run_streams(client, [StreamRequest("Benchmark the client.", 4000, seed=i) for i in range(16)])
    for o in outs:
        measure.stream_result(o.trace)
print(before, status("VmRSS:"), status("VmHWM:"))
"""


def section_memory(url: str) -> None:
    print("\n4. peak resident memory of a fresh client process (imports included)")
    for mode, what in (("c1", "one stream of 32,000 tokens"), ("c16", "16 streams of 4,000 at once")):
        out = subprocess.run([sys.executable, "-c", _MEM_CHILD, url, mode], capture_output=True, text=True,
                             check=True).stdout.split()
        before, after, peak = (int(x) / 1024 for x in out)
        print(f"   {what:<30} peak RSS {peak:6.1f} MB; RSS after imports {before:.1f} MB, after the streams "
              f"{after:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20_000, help="events in the throughput stream (default 20000)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--interval-us", type=int, default=1000, help="C=1 pacing (default 1000 us)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--interval-c-us", type=int, default=20_000, help="pacing per stream at C=64 (default 20 ms)")
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    ap.add_argument("--only", nargs="*", default=["throughput", "timing", "prompts", "memory"])
    args = ap.parse_args()
    if args.quick:  # under a minute: every section once, small
        args.chunks, args.repeats, args.concurrency = 2000, 1, 8
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    with sse_source() as url:
        if "throughput" in args.only:
            section_throughput(url, args.chunks, args.repeats)
        if "timing" in args.only:
            section_timing(url, 200 if args.quick else 2000, args.interval_us, args.concurrency,
                           20 if args.quick else 200, args.interval_c_us, args.repeats)
        if "memory" in args.only:
            section_memory(url)
    if "prompts" in args.only:
        section_prompts(50.0, (4096,) if args.quick else (32_768, 131_072))
    print(f"\n(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
