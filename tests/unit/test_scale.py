"""Scale-out's pure parts on inputs built here: the per-process bound, the shares, the wire, a worker over capacity."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from pytest_specperf.cases.result_parts import WorkerShare
from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
from pytest_specperf.endpoint.sse import Chunk, Trace
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.run import lateness, workers
from pytest_specperf.scale import senders, wire
from pytest_specperf.scale.pool import SILENCE_ENV, SILENCE_S, Pool
from pytest_specperf.scale.senders import PER_PROCESS_STREAMS, Local, Sent


def test_more_streams_than_the_workers_read_is_a_one_line_error_naming_the_option() -> None:
    Local().check(PER_PROCESS_STREAMS, "concurrency")
    with pytest.raises(ConfigError) as err:
        Local().check(PER_PROCESS_STREAMS + 1, "concurrency")
    text = str(err.value)
    assert "\n" not in text and "--specperf-workers=2" in text and f"concurrency={PER_PROCESS_STREAMS + 1}" in text
    Pool(4).check(4 * PER_PROCESS_STREAMS, "concurrency")  # four workers read four times as many
    with pytest.raises(ConfigError, match=r"needs 5 worker processes .* this run has 4: give --specperf-workers=5"):
        Pool(4).check(4 * PER_PROCESS_STREAMS + 1, "concurrency")


def test_streams_past_the_open_file_limit_name_the_limit() -> None:
    with pytest.raises(ConfigError) as err:
        senders.check_streams(100, "concurrency", 1, nofile=120)  # 100 sockets + the process's own files
    assert "RLIMIT_NOFILE 120" in str(err.value) and "\n" not in str(err.value)
    senders.check_streams(100, "concurrency", 2, nofile=120)  # 50 each fit


def test_the_open_file_limit_is_raised_to_the_hard_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
    try:
        assert senders.raise_nofile() == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(("requests", "users", "n_workers"), [(10, 10, 3), (37, 8, 3), (2000, 2000, 7), (5, 5, 1)])
def test_closed_loop_shares_keep_each_users_requests_on_one_worker(requests: int, users: int, n_workers: int) -> None:
    shares = senders.by_user(requests, users, n_workers)
    mine = senders.users_of(users, n_workers)
    assert sorted(i for s in shares for i in s) == list(range(requests))  # every request once
    for share, us in zip(shares, mine, strict=True):
        assert {i % users for i in share} == set(us)  # a user's requests all go where the user is
        assert [i % users for i in share[: len(us)]] == us  # its first requests are its users' first, in order
    assert sorted(u for us in mine for u in us) == list(range(users))


def test_open_loop_shares_deal_arrivals_round_robin() -> None:
    shares = senders.by_arrival(10, 3)
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_outcomes_come_back_on_the_controllers_clock() -> None:
    req = StreamRequest(prompt="p", max_tokens=3, api="chat", seed=4, at_s=0.5,
                        messages=({"role": "user", "content": "hi"},))
    assert wire.request_from(wire.loads(wire.dumps(wire.request_dict(req)))) == req
    trace = Trace(chunks=[Chunk(0.1, 1, "a"), Chunk(0.2, 2, "bc", 1)], total_s=0.3, usage={"completion_tokens": 3},
                  finish_reason="length", response_id="r1", count_source="token_ids", exact=True, t0=1000.25)
    out = StreamOutcome(req, trace, None, sent_s=0.51, origin=999.0, user=2)
    # The worker's clock runs 2.5 s ahead of the controller's: its stamps move back by that much.
    back = wire.outcome_from(wire.loads(wire.dumps(wire.outcome_dict(out))), req, 2.5, origin=5.0)
    assert back.trace is not None and back.trace.t0 == 997.75 and back.origin == 5.0
    assert back.trace.chunks == trace.chunks and back.sent_s == 0.51 and back.user == 2
    failed = StreamOutcome(req, None, MeasurementError("HTTP 503 from POST /v1/completions"), 0.6, 999.0)
    back = wire.outcome_from(wire.loads(wire.dumps(wire.outcome_dict(failed))), req, 2.5, origin=5.0)
    assert isinstance(back.error, MeasurementError) and str(back.error) == "HTTP 503 from POST /v1/completions"


def _sent(late: list[list[float]], cpu: list[float]) -> Sent:
    outcomes, shares, shares_out = [], [], []
    for k, (lates, share) in enumerate(zip(late, cpu, strict=True)):
        idx = []
        for x in lates:
            idx.append(len(outcomes))
            outcomes.append(StreamOutcome(StreamRequest("p", 8, at_s=0.0), None, None, sent_s=x, origin=0.0))
        shares.append(idx)
        shares_out.append(WorkerShare(host=f"socket=10.0.0.{k}:8888", pid=100 + k, streams=len(lates), offset_s=0.0,
                                      offset_err_s=1e-4, cpu_share=share, late_p99_s=max(lates)))
    return Sent(outcomes, shares_out, shares)


def test_a_worker_over_its_capacity_makes_the_verdict_inconclusive_and_names_it() -> None:
    bound = (0.010, "10% of slo ttft_s 0.1 s")
    # worker 1 used a whole core; worker 2 kept up
    r = SimpleNamespace(client_behind="", workers=None, warnings=[], notes=[])
    workers.attach(r, _sent([[0.001] * 50, [0.001] * 50], [0.97, 0.3]), bound)
    assert r.workers is not None and len(r.workers) == 2
    assert "pid 100 on socket=10.0.0.0:8888: CPU share 0.97" in r.client_behind and "pid 101" not in r.client_behind
    # by the rule every load kind uses: no floor speaks for the server; with "warn" the sentence is a warning
    assert lateness.judge(r, ["attainment 0.80 < 0.95"], "warn") == []
    assert r.warnings and "pid 100" in r.warnings[0] and "inconclusive" in r.warnings[0]
    # a worker whose own sends ran late past the bound, though the case's p99 over all workers stays within it
    r = SimpleNamespace(client_behind="", workers=None, warnings=[], notes=[])
    sent = _sent([[0.001] * 200, [0.001] * 197 + [0.05] * 3], [0.2, 0.2])
    assert lateness.figures(o.late_s for o in sent.outcomes)["late_p99_s"] < bound[0]
    workers.attach(r, sent, bound)
    assert "pid 101 on socket=10.0.0.1:8888: send lateness 50.0 ms > 10.0 ms" in r.client_behind
    assert "pid 100" not in r.client_behind
    # nobody over capacity: nothing said
    r = SimpleNamespace(client_behind="", workers=None)
    workers.attach(r, _sent([[0.001] * 20, [0.002] * 20], [0.5, 0.6]), bound)
    assert r.client_behind == "" and not math.isnan(r.workers[0].cpu_share)


def test_one_worker_leaves_the_record_as_it_was() -> None:
    r = SimpleNamespace(client_behind="", workers=None)
    workers.attach(r, Sent([StreamOutcome(StreamRequest("p", 8), None, None, 0.0, 0.0)]), (0.01, "x"))
    assert r.workers is None and r.client_behind == ""


@pytest.mark.parametrize("raw", ["soon", "0", "-2", "nan", "inf"])
def test_a_bad_silence_window_is_a_one_line_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                                      raw: str) -> None:
    monkeypatch.setenv(SILENCE_ENV, raw)
    with pytest.raises(ConfigError) as err:
        Pool(2)
    text = str(err.value)
    assert "\n" not in text and f"{SILENCE_ENV}={raw!r}" in text and f"default {SILENCE_S:g}" in text, text


def test_the_silence_window_is_the_constant_unless_the_variable_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SILENCE_ENV, raising=False)
    assert Pool(2).silence_s == SILENCE_S
    monkeypatch.setenv(SILENCE_ENV, " 2.5 ")
    assert Pool(2).silence_s == 2.5
