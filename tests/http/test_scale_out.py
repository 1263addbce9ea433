"""Load sent by worker processes (scale/): local execnet workers and a socket gateway standing in for another host,
every figure judged against the simulator's recorded truth; a worker killed mid-case, one stopped mid-case (alive
but silent) and one whose streams outlast the silence window; a host that cannot be reached.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import execnet
import httpx
import numpy as np
import pytest
from support.load_helpers import true_decode
from support.processes import alive

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.cases.open_loop import RateSpec
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.endpoint.client import Client
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.run.runner import Runner
from pytest_specperf.scale.pool import SILENCE_ENV, SILENT_BEATS, Pool
from pytest_specperf.scale.senders import PER_PROCESS_STREAMS
from pytest_specperf.sim import SimServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table in /proc")

#: Streams of the scale-out case: three workers at the per-process bound each (the simulator serves them from one
#: process on 2 cores; 2,000 would put 667 on each worker, past what one process reads faithfully).
STREAMS = 3 * PER_PROCESS_STREAMS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def socket_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """An execnet socket server on this machine, standing in for another host: its gateway spec and its process
    (which runs the worker itself)."""
    port = _free_port()
    script = Path(execnet.__file__).parent / "script" / "socketserver.py"
    proc = subprocess.Popen([sys.executable, str(script), f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "... Entering Accept loop ...": listening
        assert "Accept loop" in line, line
        yield f"socket=127.0.0.1:{port}", proc
    finally:
        proc.kill()
        proc.communicate()


@pytest.fixture
def socket_host(socket_server: tuple[str, subprocess.Popen[str]]) -> str:
    """The socket server's gateway spec."""
    return socket_server[0]


def _truths(sim: SimServer, ids: list[str]) -> list[dict]:
    """The simulator's records over one connection (a fresh connection per record costs ~50 ms each)."""
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        return [http.get(f"/sim/truth/{i}").raise_for_status().json() for i in ids]


def _over_two_workers(speed: float, kind: str, params: dict, name: str) -> tuple[Any, list[dict]]:
    """A ``kind`` case sent by two workers to a caching simulator at ``speed``: its result, and the simulator's
    record of each of its requests."""
    with SimServer("healthy", speed=speed, overrides={"cache_report": True}) as sim, \
            Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool(2)
        try:
            r = Runner(client, senders=pool).run(build_spec(kind, params), name)
            return r, _truths(sim, [str(p.response_id) for p in r.per_request])
        finally:
            pool.close()


def test_streams_over_two_workers_and_a_socket_host_match_truth(socket_host: str) -> None:
    with SimServer("healthy", speed=4.0, overrides={"jitter": 0.0, "max_batch": STREAMS}) as sim, \
            Client(sim.url, timeout=120) as client:
        client.detect()
        pool = Pool(2, [socket_host])
        try:
            r = Runner(client, senders=pool, inconclusive="pass").run(
                SustainedSpec(tokens=48, ctx=64, concurrency=STREAMS, max_drift=0.99), "scale::three")
            recs = _truths(sim, [str(s.response_id) for s in r.streams])
            local = [w.pid for w in r.workers or [] if w.host.startswith("popen")]
        finally:
            pool.close()
    assert r.workers is not None and len(r.workers) == 3
    assert {w.host.split(":")[0] for w in r.workers} == {"popen", "socket=127.0.0.1"}
    assert sum(w.streams for w in r.workers) == STREAMS == len(r.streams)
    # One host, one monotonic clock: the true offset is 0, and a reply stamped between the send and the receive is
    # within half the round trip of their midpoint, so each measured offset is within its uncertainty of 0.
    assert all(abs(w.offset_s) <= w.offset_err_s + 1e-9 and w.offset_err_s < 0.005 for w in r.workers), r.workers
    # Every stream really went, once, and the simulator batched them all together.
    assert len({rec["id"] for rec in recs}) == STREAMS
    assert max(s["batch"] for rec in recs for s in rec["steps"]) > STREAMS // 2
    # Per-user decode against the simulator's record of each stream, every worker alike. Within 5 %: 768 streams
    # of 24 tokens beside two CPU hogs read 3 % slow (the simulator writes 768 chunks a step on a shared core).
    truth = np.array([true_decode(rec) for rec in recs])
    measured = np.array([s.decode_tps for s in r.streams])
    assert abs(float(np.median(measured / truth)) - 1) < 0.05  # the median stream (house rule: not each one)
    # A user's TTFT runs from writing its headers, the server's from reading them: never shorter, on any worker.
    seen, true_ttft = np.array([s.ttft_s for s in r.streams]), np.array([rec["ttft_s"] for rec in recs])
    assert np.all(seen >= true_ttft), float((seen - true_ttft).min())
    assert r.ttft_p99_s is not None and r.ttft_p99_s >= float(np.percentile(true_ttft, 99))
    assert r.ttft_p50_s is not None and float(np.percentile(true_ttft, 50)) <= r.ttft_p50_s
    # Every local worker process ended with the pool (the socket host's worker ran inside its server).
    assert len(local) == 2
    deadline = time.monotonic() + 30
    while any(alive(p) for p in local) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in local), local


def test_a_worker_killed_mid_case_is_a_one_line_error_and_the_next_case_runs() -> None:
    with SimServer("healthy", speed=1.0) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool(2)
        runner = Runner(client, senders=pool, inconclusive="pass")
        runner.run(SustainedSpec(tokens=8, ctx=64, concurrency=4), "scale::before")  # opens both workers
        victim = pool._workers[0].pid
        errors: list[BaseException] = []

        def long_case() -> None:
            try:
                runner.run(SustainedSpec(tokens=2000, ctx=64, concurrency=4, max_drift=0.99), "scale::killed")
            except BaseException as exc:  # the test reads what the case raised
                errors.append(exc)

        seen = len(httpx.get(f"{sim.url}/sim/truth").json())
        case = threading.Thread(target=long_case)
        case.start()
        deadline = time.monotonic() + 60
        # Mid-case: once the new requests reached the simulator (its truth list grows), not before.
        while len(httpx.get(f"{sim.url}/sim/truth").json()) < seen + 4:
            assert time.monotonic() < deadline and case.is_alive(), "the case never reached the simulator"
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        case.join(120)
        assert not case.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], MeasurementError), errors
        text = str(errors[0])
        assert "\n" not in text and f"pid {victim}" in text and "ended mid-case" in text, text
        # The next case opens its workers afresh and is measured.
        after = runner.run(SustainedSpec(tokens=8, ctx=64, concurrency=4), "scale::after")
        assert after.workers is not None and victim not in {w.pid for w in after.workers}
        left = [w.pid for w in after.workers]
        pool.close()
    deadline = time.monotonic() + 30
    while any(alive(p) for p in left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in [victim, *left])


def _mid_case(runner: Runner, sim: SimServer, spec: SustainedSpec, name: str
              ) -> tuple[threading.Thread, list[tuple[BaseException, float]]]:
    """``spec`` run in a thread until its requests reached the simulator (its truth list grew): the thread, and
    what the case raised with when (monotonic), once it ends."""
    errors: list[tuple[BaseException, float]] = []

    def case() -> None:
        try:
            runner.run(spec, name)
        except BaseException as exc:  # the test reads what the case raised
            errors.append((exc, time.monotonic()))

    seen = len(httpx.get(f"{sim.url}/sim/truth").json())
    thread = threading.Thread(target=case)
    thread.start()
    deadline = time.monotonic() + 60
    while len(httpx.get(f"{sim.url}/sim/truth").json()) < seen + spec.concurrency:
        assert time.monotonic() < deadline and thread.is_alive(), f"the case never reached the simulator: {errors}"
        time.sleep(0.05)
    return thread, errors


def test_a_worker_stopped_mid_case_is_given_up_on_after_the_silence_window_and_the_next_case_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # SIGSTOP: the worker is alive and its pipe open, but it says nothing (a host that stopped answering, no reset)
    silence = 1.5
    monkeypatch.setenv(SILENCE_ENV, str(silence))
    with SimServer("healthy", speed=1.0) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool(2)
        runner = Runner(client, senders=pool, inconclusive="pass")
        try:
            runner.run(SustainedSpec(tokens=8, ctx=64, concurrency=4), "scale::before")  # opens both workers
            victim, other = (w.pid for w in pool._workers)
            case, errors = _mid_case(runner, sim, SustainedSpec(tokens=2000, ctx=64, concurrency=4, max_drift=0.99),
                                     "scale::stopped")
            os.kill(victim, signal.SIGSTOP)
            stopped = time.monotonic()
            case.join(10 * silence)
            if case.is_alive():  # never given up on: end it (a killed worker's channel closes), then fail
                os.kill(victim, signal.SIGKILL)
                case.join(60)
                pytest.fail(f"no error {10 * silence:g} s after the worker was stopped (silence window {silence} s)")
            assert len(errors) == 1 and isinstance(errors[0][0], MeasurementError), errors
            text, waited = str(errors[0][0]), errors[0][1] - stopped
            assert "\n" not in text and f"worker local (pid {victim}) sent nothing for" in text, text
            assert "mid-case (" in text and "streams ended)" in text and SILENCE_ENV in text, text
            assert "(0 of 2 streams ended)" in text, text  # its share: two streams of 2,000 tokens, none ended yet
            # Given up on once the window had passed since its last beat (a beat or so before the stop: a few beats'
            # slack for a busy machine), and then at once, its own end and the other worker's included.
            assert silence - 3 * silence / SILENT_BEATS <= waited <= 2 * silence, (waited, text)
            # The next case opens its workers afresh and is measured.
            after = runner.run(SustainedSpec(tokens=8, ctx=64, concurrency=4), "scale::after")
            assert after.workers is not None and len(after.workers) == 2 and len(after.streams) == 4
            fresh = [w.pid for w in after.workers]
            assert not {victim, other} & set(fresh)
        finally:
            pool.close()
    # No process outlives the pool: the stopped one was killed, not left stopped (a stopped process is alive).
    deadline = time.monotonic() + 30
    while any(alive(p) for p in [victim, other, *fresh]) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in [victim, other, *fresh] if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, left


def test_a_host_that_stops_answering_mid_case_is_given_up_on_and_the_next_case_runs(
        socket_server: tuple[str, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    # The socket server stopped: its connection stays open and says nothing, as a host behind a partition does.
    silence = 1.5
    monkeypatch.setenv(SILENCE_ENV, str(silence))
    spec, server = socket_server
    with SimServer("healthy", speed=1.0) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool(0, [spec])
        runner = Runner(client, senders=pool, inconclusive="pass")
        try:
            case, errors = _mid_case(runner, sim, SustainedSpec(tokens=2000, ctx=64, concurrency=4, max_drift=0.99),
                                     "scale::partitioned")
            server.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            case.join(10 * silence)
            server.send_signal(signal.SIGCONT)  # either way: the next case (or the failing test) goes on
            case.join(60)
            assert len(errors) == 1 and isinstance(errors[0][0], MeasurementError), errors
            text, waited = str(errors[0][0]), errors[0][1] - stopped
            assert "\n" not in text and f"worker {spec} (host " in text and "sent nothing for" in text, text
            # Given up on once the window passed, and its connection shut at once: nothing waits on the stopped host.
            assert silence - 3 * silence / SILENT_BEATS <= waited <= 2 * silence, (waited, text)
            # Going again, the host serves the next case on a fresh gateway.
            after = runner.run(SustainedSpec(tokens=8, ctx=64, concurrency=4), "scale::answering")
            assert after.workers is not None and [w.host for w in after.workers] == [spec] and len(after.streams) == 4
        finally:
            pool.close()


def test_streams_longer_than_the_silence_window_keep_their_workers_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    silence = 0.5
    monkeypatch.setenv(SILENCE_ENV, str(silence))
    with SimServer("healthy", speed=1.0) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool(2)
        try:
            # one user per worker, two streams each, one after the other
            r = Runner(client, senders=pool, inconclusive="pass").run(
                SustainedSpec(tokens=300, ctx=64, concurrency=2, requests=4, max_drift=0.99), "scale::slow")
            beats = [(w.ended, w.planned) for w in pool._workers]
        finally:
            pool.close()
    assert r.workers is not None and [w.streams for w in r.workers] == [2, 2]
    # Every stream outlasted the window several times over, with nothing but beats from its worker meanwhile.
    streams = [*r.streams, *r.warmup_drain_streams]
    assert len(streams) == 4 and min(s.total_s for s in streams) > 4 * silence, [s.total_s for s in streams]
    # The beats counted the streams that ended: the first of each worker's two (the second too, if a beat went
    # between its end and the answer).
    assert all(planned == 2 and ended in (1, 2) for ended, planned in beats), beats


def test_an_unreachable_host_is_a_one_line_error_before_anything_is_sent() -> None:
    spec = f"socket=127.0.0.1:{_free_port()}"  # nothing listens there
    with SimServer("healthy", speed=4.0) as sim, Client(sim.url, timeout=30) as client:
        client.detect()
        pool = Pool(1, [spec])
        try:
            with pytest.raises(ConfigError) as err:
                Runner(client, senders=pool).run(SustainedSpec(tokens=8, ctx=64, concurrency=4), "scale::unreachable")
            with pytest.raises(ConfigError) as again:  # said at once for every later case, without a new try
                Runner(client, senders=pool).run(RateSpec(rps=4.0, requests=4, tokens=8, ctx=64), "scale::again")
        finally:
            pool.close()
        sent = httpx.get(f"{sim.url}/sim/truth").json()
    text = str(err.value)
    assert "\n" not in text and spec in text and "--specperf-hosts" in text, text
    assert str(again.value) == text
    assert sent == [], "a request reached the simulator"


def test_a_host_without_the_plugin_names_what_to_install() -> None:
    # A Python that cannot import pytest_specperf's dependencies stands in for a host without the plugin.
    spec = "popen//python=/usr/bin/python3//env:PYTHONPATH="
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no system Python to stand in for a bare host")
    pool = Pool(1, [spec])
    try:
        with pytest.raises(ConfigError) as err:
            pool.start()
    finally:
        pool.close()
    text = str(err.value)
    assert "\n" not in text and spec in text and "install pytest-specperf==" in text, text


def test_a_replay_over_two_workers_keeps_the_traces_lengths_and_one_schedule() -> None:
    r, recs = _over_two_workers(50, "replay", {"trace": "builtin:mooncake-conversation", "speed": 10,
                                               "duration_s": 10}, "scale::replay")
    assert isinstance(r, ReplayResult) and r.requests == 38 and r.verdict == "passed"
    assert r.workers is not None and [w.streams for w in r.workers] == [19, 19]
    for p, rec in zip(r.per_request, recs, strict=True):
        assert (rec["prompt_tokens"], rec["completion_tokens"]) == (p.input_length, p.output_length), p.row
    # One start barrier: every worker sent on the controller's schedule, so the server read each request after
    # the controller's origin plus its send time, and the median request within 5 ms of it.
    assert r.origin_s is not None
    vs_sent = np.array([rec["received_monotonic"] - (r.origin_s + p.sent_s) for p, rec in zip(r.per_request, recs,
                                                                                                strict=True)])
    assert float(vs_sent.min()) >= -0.001 and float(np.median(vs_sent)) <= 0.005, vs_sent.round(4).tolist()


def test_a_closed_loop_with_refill_keeps_each_user_on_one_worker_one_request_at_a_time() -> None:
    with SimServer("healthy", speed=8.0) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool(2)
        try:
            r = Runner(client, senders=pool, inconclusive="pass").run(
                SustainedSpec(tokens=32, ctx=64, concurrency=4, requests=12), "scale::refill")
            streams = [*r.streams, *r.warmup_drain_streams]
            recs = _truths(sim, [str(s.response_id) for s in streams])
        finally:
            pool.close()
    assert r.requests == 12 and len(streams) == 12 and r.workers is not None
    assert [w.streams for w in r.workers] == [6, 6]
    users: dict[int, list[dict]] = {}
    for s, rec in zip(streams, recs, strict=True):
        users.setdefault(int(s.user or 0), []).append(rec)
    assert sorted(users) == [0, 1, 2, 3] and all(len(v) == 3 for v in users.values())
    # By the server's own clock: each user's next request arrived only after its previous answer was written.
    for mine in users.values():
        mine.sort(key=lambda rec: rec["arrival_monotonic"])
        for a, b in itertools.pairwise(mine):
            assert b["arrival_monotonic"] >= a["arrival_monotonic"] + a["total_s"], (a["id"], b["id"])


def test_auto_sends_a_case_one_process_reads_from_pytest_itself() -> None:
    with SimServer("healthy", speed=8.0) as sim, Client(sim.url, timeout=60) as client:
        client.detect()
        pool = Pool("auto")
        try:
            r = Runner(client, senders=pool).run(SustainedSpec(tokens=16, ctx=64, concurrency=4), "scale::auto")
            opened = list(pool._workers)
        finally:
            pool.close()
    assert r.workers is None and opened == []  # as without workers: no process opened, no `workers` key
    assert len(r.streams) == 4 and r.verdict == "passed"
    assert Pool("auto")._wanted(PER_PROCESS_STREAMS + 1) == min(2, os.cpu_count() or 1)


def test_sessions_over_two_workers_build_each_turn_from_the_last_answer() -> None:
    r, recs = _over_two_workers(8.0, "session", {"users": 4, "turns": 3, "ctx": 200, "turn_ctx": 40, "tokens": 24,
                                                 "api": "chat"}, "scale::sessions")
    assert r.workers is not None and [w.streams for w in r.workers] == [6, 6]  # two sessions of three turns each
    by_user: dict[int, list] = {}
    for p, rec in zip(r.per_request, recs, strict=True):
        by_user.setdefault(p.user, []).append((p.turn, rec))
    assert sorted(by_user) == [0, 1, 2, 3]
    for turns in by_user.values():
        turns.sort(key=lambda t: t[0])
        assert [t for t, _ in turns] == [1, 2, 3]
        # Each later turn resent the whole conversation, so the server saw its prompt grow and found the earlier
        # turns in its prefix cache: the worker built it from the answer it had just read.
        prompts = [rec["prompt_tokens"] for _, rec in turns]
        # each turn adds the last answer (24 tokens) and a new user message (40): not the user message alone
        assert all(b - a >= 40 + 20 for a, b in itertools.pairwise(prompts)), prompts
        assert all(rec["cached_tokens"] >= prev["prompt_tokens"] // 2 for (_, prev), (_, rec)
                   in itertools.pairwise(turns)), [rec["cached_tokens"] for _, rec in turns]
