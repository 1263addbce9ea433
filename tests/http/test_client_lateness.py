"""The client's own clock: lateness is measured as the server saw it, paid off the clock, and judged."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support import stalls

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamRequest, run_streams
from pytest_specperf.run import lateness
from pytest_specperf.sim import SimServer


@pytest.fixture(scope="module")
def fast_sim() -> Iterator[SimServer]:
    with SimServer("batching", speed=20) as sim:
        yield sim


def stall_once(client: Client, seconds: float, at_call: int = 1) -> dict[str, float]:
    """Make ``client`` stall once, inside its event loop, as it sends its ``at_call``-th request (support/stalls.py).

    This is the defect under test (a client busy with itself), not a wait: ``time.sleep`` blocks
    the loop exactly as a slow client would. Returns where the stall ended (the test's own clock).
    """
    return stalls.stall_once(seconds, at_call)


@pytest.fixture(autouse=True)
def _no_stall_after() -> Iterator[None]:
    yield
    stalls.restore()


def test_a_late_send_is_recorded_late_as_the_server_clocked_it(fast_sim: SimServer) -> None:
    with Client(fast_sim.url, timeout=30) as client:
        client.detect()
        stall = stall_once(client, 0.3)
        reqs = [StreamRequest(prompt=f"request {i} of six", max_tokens=4, seed=i, at_s=0.05 * i) for i in range(6)]
        outcomes = run_streams(client, reqs)
    origin = outcomes[0].origin
    for o in outcomes:
        assert o.trace is not None and o.trace.response_id
        # none of them can go out before the stall ended (the test's clock, not the plugin's)
        assert o.late_s >= stall["end"] - origin - o.request.at_s - 1e-4, o
        # and the server (same monotonic clock on one host) received it after the client sent it
        arrived = fast_sim.truth(o.trace.response_id)["arrival_monotonic"]
        assert origin + o.sent_s <= arrived + 1e-4
    assert max(o.late_s for o in outcomes) >= 0.25
    # the client's own stall is not the host's: the sending thread slept, it did not wait for a CPU
    held = [o for o in outcomes if o.late_s >= 0.25]
    assert held and all(o.starved_s is not None and o.starved_s < o.late_s - 0.2 for o in held), held


_STARVED = """
import json, os, subprocess, sys
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.run.runner import Runner
cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})
# a process that wants the same core all the time (it ends with its parent)
hog = subprocess.Popen([sys.executable, "-c", f"import os\\nos.sched_setaffinity(0, {{{cpu}}})\\n"
                        f"while os.getppid() == {os.getpid()}: pass"])
os.nice(16)  # and wins it whenever both want it
try:
    c = Client(sys.argv[1], timeout=60)
    c.detect()
    spec = build_spec("rate", {"rps": 20, "requests": 20, "tokens": 4, "ctx": 60, "arrivals": "constant"})
    r = Runner(c).run(spec, "starved")
finally:
    hog.kill()
print(json.dumps({"rows": [[p.late_s, p.starved_s] for p in r.per_request], "behind": r.client_behind}))
"""


def test_a_send_the_host_held_back_is_named_starved(fast_sim: SimServer) -> None:
    # The client pinned to one core beside a process that wants it all the time, at a lower priority: its sends go
    # late because the host runs the other process, and the kernel's own account of the sending thread's run-queue
    # wait (schedstat) says so. With the stall above (the client's own), the same figure stays near nothing.
    out = subprocess.run([sys.executable, "-c", _STARVED, fast_sim.url], capture_output=True, text=True, timeout=180,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    rows = got["rows"]
    late = sum(lt for lt, _ in rows)
    assert all(st is not None for _, st in rows)
    assert late > 0.05, rows  # the host held the sends back
    assert sum(min(st, lt) for lt, st in rows) >= 0.5 * late, rows  # and most of that is the host's, by the kernel
    # and the inconclusive sentence says whose the lateness was
    assert "client fell behind" in got["behind"] and "the host's scheduler caused most of it" in got["behind"]


_FRESH = """
import json, sys, time
from pytest_specperf.run import lateness
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamRequest, run_streams
c = Client(sys.argv[1], timeout=30); c.detect()
events = []
# an import of a module not loaded yet: a first-time import (a cached one costs nothing)
sys.addaudithook(lambda ev, args: events.append((time.perf_counter(), args[0]))
                 if ev == "import" and args[0] not in sys.modules else None)
out = run_streams(c, [StreamRequest(prompt="hello", max_tokens=4, at_s=0.02 * i) for i in range(3)])
o = out[0]
end = max(x.origin + x.sent_s + x.trace.total_s for x in out)
# (a failed import, httpcore's optional sniffio, is tried on every request and is never loaded)
print(json.dumps([name for t, name in events if o.origin <= t <= end and name in sys.modules]))
"""


def test_the_first_load_in_a_process_imports_nothing_on_the_clock(fast_sim: SimServer) -> None:
    # A fresh interpreter: the async network backend is imported on its first use, which must come
    # before the schedule's origin, not inside the first request's time.
    out = subprocess.run([sys.executable, "-c", _FRESH, fast_sim.url], capture_output=True, text=True, timeout=120,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_rate_case_whose_client_fell_behind_is_inconclusive(fast_sim: SimServer, runner_for: Any) -> None:
    spec = build_spec("rate", {"rps": 20, "requests": 10, "tokens": 8, "ctx": 60, "arrivals": "constant",
                               "slo": {"ttft_s": 0.4}, "min_attainment": 0.95})
    runner = runner_for(fast_sim.url)
    runner.warm_up()
    stall_once(runner.client, 0.6)
    r = runner.run(spec, "lateness::warn")
    late = sorted(p.late_s for p in r.per_request)
    assert r.late_p50_s == pytest.approx(late[4] + (late[5] - late[4]) / 2)
    assert r.late_p99_s >= 0.55 and r.late_bound_s == pytest.approx(0.04)
    # the stalled requests missed the ttft bound, yet that says nothing about the server
    assert r.attainment is not None and r.attainment < 0.95
    assert r.verdict == "passed" and r.reason == ""
    assert any("the client fell behind its schedule" in w and "SLO attainment" in w for w in r.warnings)
    assert "client fell behind" in r.client_behind and "scheduler" not in r.client_behind  # its own stall
    assert {"late_p50_s", "late_p99_s", "late_bound_s", "client_behind"} <= set(json.loads(json.dumps(r.as_dict())))

    strict = runner_for(fast_sim.url, inconclusive="fail")
    strict.warm_up()
    stall_once(strict.client, 0.6)
    s = strict.run(spec, "lateness::fail")
    assert s.verdict == "failed" and s.reason.startswith("the client fell behind its schedule")


def test_a_client_that_kept_its_schedule_is_judged(fast_sim: SimServer, runner_for: Any) -> None:
    spec = build_spec("rate", {"rps": 10, "requests": 6, "tokens": 8, "ctx": 60, "arrivals": "constant",
                               "slo": {"ttft_s": 60.0}, "min_attainment": 0.95})
    r = runner_for(fast_sim.url).run(spec, "lateness::kept")
    assert r.client_behind == "" and r.late_p99_s <= r.late_bound_s == pytest.approx(6.0)
    assert r.verdict == "passed" and not r.warnings


def test_a_load_case_carries_its_lateness_and_is_inconclusive_when_behind(fast_sim: SimServer,
                                                                         runner_for: Any) -> None:
    spec = build_spec("sustained", {"concurrency": 4, "tokens": 256, "ctx": 60, "min_tps": 1e5})
    runner = runner_for(fast_sim.url)
    runner.warm_up()
    kept = runner.run(spec, "lateness::load")
    assert kept.late_p50_s is not None and kept.late_bound_s is not None
    # a lateness every stream shares moves nothing: the streams still run together
    stall_once(runner.client, 1.0)
    shared = runner.run(spec, "lateness::load-shared")
    assert shared.late_p50_s >= 0.9 and shared.client_behind == "" and shared.verdict == "failed"
    # one stream sent, then the client stalls: the others start 1 s later than it
    ramped = build_spec("sustained", {"concurrency": 4, "tokens": 256, "ctx": 60, "min_tps": 1e5, "ramp_s": 0.2})
    stall_once(runner.client, 1.0, at_call=2)
    behind = runner.run(ramped, "lateness::load-behind")
    durations = sorted(s.total_s for s in behind.streams)
    assert behind.late_bound_s == pytest.approx(0.25 * (durations[1] + durations[2]) / 2)
    assert behind.late_p99_s >= 0.9 and "starts spread" in behind.client_behind
    # min_tps 1e5 fails every honest run; with the client behind it is not judged
    assert kept.verdict == "failed" and behind.verdict == "passed"
    assert any("min_tps" in w for w in behind.warnings)


def test_with_tpot_only_the_typical_lateness_is_judged_against_the_schedule() -> None:
    class R:
        late_p50_s = late_p99_s = late_bound_s = None
        client_behind = ""

    bound = lateness.open_loop_bound({"tpot_ms": 5.0}, 20 / 20.0)  # 20 requests at 20 req/s: a 1 s schedule
    one_hiccup, all_late = R(), R()
    lateness.attach(one_hiccup, [0.002] * 19 + [0.5], bound)  # one request half a second late
    lateness.attach(all_late, [0.15] * 20, bound)  # every request 150 ms late: the span is not the one asked
    assert one_hiccup.late_p99_s > 0.4 and one_hiccup.client_behind == ""
    assert "fell behind" in all_late.client_behind and all_late.late_bound_s == pytest.approx(0.1)
    # with a schedule-counted bound, the worst requests are what the SLO sees
    hiccup_ttft = R()
    lateness.attach(hiccup_ttft, [0.002] * 19 + [0.5], lateness.open_loop_bound({"ttft_s": 1.0}, 1.0))
    assert "fell behind" in hiccup_ttft.client_behind


def test_an_impossible_slo_fails_however_late_the_client(fast_sim: SimServer, runner_for: Any) -> None:
    # 0.1 ms to the first token: no request can meet it on time, so the client's lateness explains nothing
    spec = build_spec("rate", {"rps": 8, "requests": 16, "tokens": 8, "ctx": 60, "arrivals": "constant",
                               "slo": {"ttft_s": 0.0001}, "min_attainment": 0.9})
    runner = runner_for(fast_sim.url)
    runner.warm_up()
    stall_once(runner.client, 0.3)
    r = runner.run(spec, "lateness::impossible")
    assert r.late_p99_s >= 0.25  # the client was behind (the stall), far past 10% of the bound
    assert r.verdict == "failed" and "SLO attainment 0.00 < min_attainment 0.9" in r.reason
    assert r.client_behind == "" and not r.warnings
    assert any("the client fell behind" in n and "on time it reads the same" in n for n in r.notes)


def test_ttft_content_is_timed_from_the_schedule_and_counts_lateness(fast_sim: SimServer, runner_for: Any) -> None:
    assert lateness.open_loop_bound({"ttft_content_s": 0.5, "tpot_ms": 1.0}, 10.0)[0] == pytest.approx(0.05)
    spec = build_spec("rate", {"rps": 20, "requests": 8, "tokens": 8, "ctx": 60, "arrivals": "constant",
                               "slo": {"ttft_content_s": 0.4}, "min_attainment": 0.95})
    runner = runner_for(fast_sim.url)
    runner.warm_up()
    stall_once(runner.client, 0.6)
    r = runner.run(spec, "lateness::content")
    for p in r.per_request:
        # the first answer token cannot come before the request went out: its lateness is in the figure
        assert p.ttft_content_s >= p.late_s > 0 or p.late_s <= 0
        assert p.ttft_content_s == pytest.approx(p.ttft_s)  # no reasoning phase: the first token answers
    assert max(p.ttft_content_s for p in r.per_request) >= 0.55
    # the stalled requests missed the bound only through the client: inconclusive, a warning by default
    assert "client fell behind" in r.client_behind and r.verdict == "passed"
