"""The history store on real databases: schema and migrations, round trips, concurrent writers, bad databases."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from support.records import record
from support.result_json import full

from pytest_specperf.cases.results import Recorded
from pytest_specperf.storage import imports, records, schema
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage.store import HistoryError, Store, Target

WRITERS = 4
RUNS_EACH = 5


def _result_json(nodeid: str, values: list[float], ttft: float = 0.1, **extra: object) -> dict:
    streams = [{"decode_tps": v, "ttft_s": ttft} for v in values]
    return {"nodeid": nodeid, "kind": "sustained", "model": "m", "server": "sim", "verdict": "passed",
            "decode_tps": values[0], "ttft_s": ttft, "ctx": 100, "tokens": 200, "streams": streams, **extra}


def _result(nodeid: str, values: list[float], ttft: float = 0.1, **extra: object) -> Recorded:
    return record(_result_json(nodeid, values, ttft, **extra))


def _meta(commit: str = "c0", **extra: object) -> dict:
    return {"created": "2026-01-01T00:00:00Z", "model": "m", "server": "sim", "commit": {"id": commit}, **extra}


def test_a_new_database_gets_every_migration_once(target: Target) -> None:
    with schema.open_store(Store(target)) as store:
        versions = [r[0] for r in store.query("SELECT version FROM specperf_schema ORDER BY version")]
    with schema.open_store(Store(target)) as store:  # opening again applies nothing twice
        again = [r[0] for r in store.query("SELECT version FROM specperf_schema ORDER BY version")]
    assert versions == again == [m[0] for m in schema.MIGRATIONS]


def test_an_older_database_is_migrated_and_keeps_its_runs(target: Target) -> None:
    with Store(target) as store:
        assert schema.migrate(store, upto=1) == 1
        with store.transaction() as cur:  # the rows as version 1's code wrote them (today's code writes later columns)
            store.execute(cur, "INSERT INTO runs (created, commit_id) VALUES ('2026-01-01T00:00:00Z', 'old')")
            store.execute(cur, "INSERT INTO cases (run_id, case_key, nodeid, fingerprint, setup, verdict) VALUES "
                               "(1, 't::a', 't::a', 'f', '{}', 'passed') RETURNING id")
            case_id = cur.fetchone()[0]
            for i, v in enumerate([100.0, 101.0]):
                store.execute(cur, "INSERT INTO trials (case_id, metric, trial, value) VALUES (?, 'decode_tps', ?, ?)",
                              (case_id, i, v))
    with schema.open_store(Store(target)) as store:
        assert store.query("SELECT MAX(version) FROM specperf_schema")[0][0] == schema.VERSION
        (run,) = records.case_history(store, "t::a")
    assert run.commit_id == "old" and run.trials["decode_tps"] == [100.0, 101.0]
    assert not run.held and not run.failed_gate and run.accepted is None  # version 3's columns, at their defaults


def test_a_database_written_by_schema_version_2_loads_and_is_judged(tmp_path: Path) -> None:
    """tests/db/data/history_v2.sqlite was written by the code of schema version 2 (six runs of t::a, decode about
    100 tok/s): it opens, migrates, keeps every run, judges a new run against them and takes it."""
    import shutil

    from pytest_specperf.cases.saved_results import load_result
    from pytest_specperf.history import against_history

    db = tmp_path / "old.sqlite"
    shutil.copy(Path(__file__).parent / "data" / "history_v2.sqlite", db)
    with schema.open_store(Store(Target(path=db))) as store:
        assert [r[0] for r in store.query("SELECT version FROM specperf_schema")] == [1, 2, 3]
        past = records.case_history(store, "t::a")
        assert [h.commit for h in past] == [f"c{i:02d}" for i in range(6)] and not any(h.held for h in past)
        streams = [{"prompt_tokens": None, "completion_tokens": 200, "total_s": 1.0, "client_tps": 0.0,
                    "window_tokens": None, "window_tps": [], "early_tps": None, "late_tps": None, "drift": None,
                    "trend_p": None, "stalls": [], "tokens_per_chunk": 1.0, "count_source": "usage",
                    "counts_exact": True, "decode_tps": v, "ttft_s": 0.5} for v in [80.0, 80.5, 79.5, 80.2, 79.8]]
        cand = load_result({"endpoint": "", "prompt_tokens": None, "nodeid": "t::a", "kind": "sustained", "model": "m",
                            "server": "sim", "verdict": "passed", "decode_tps": 80.0, "ctx": 100, "tokens": 200,
                            "streams": streams})
        against_history.judge(store, cand, {}, max_regression=0.05)
        assert cand.verdict == "failed" and "against its history of 6 runs" in cand.reason
        run = records.record_run(store, [cand], _meta("new"), gated=True)
        assert [(h.run_id, h.held) for h in records.case_history(store, "t::a")][-1] == (run, True)


def test_a_newer_database_is_refused_naming_the_upgrade(target: Target) -> None:
    with schema.open_store(Store(target)) as store, store.transaction() as cur:
        store.execute(cur, "INSERT INTO specperf_schema (version, what, applied) VALUES (99, 'future', 'now')")
    with pytest.raises(HistoryError) as err, Store(target) as store:
        schema.migrate(store)
    assert "schema version 99" in str(err.value) and "upgrade pytest-specperf" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_run_round_trips_with_its_trials_and_setup(target: Target) -> None:
    with schema.open_store(Store(target)) as store:
        sweep = record({"nodeid": "t::sweep", "kind": "load_sweep", "model": "m", "server": "sim", "verdict": "passed",
                        "levels": [{"concurrency": 1, "decode_tps": 50.0, "ttft_s": 0.2, "total_tps": 50.0},
                                   {"concurrency": 4, "decode_tps": 40.0, "ttft_s": 0.3, "total_tps": 160.0}]})
        run_id = records.record_run(store, [_result("t::a", [100.0, 98.5, 101.25]), sweep,
                                            record({"nodeid": "t::bad", "verdict": "error"})], _meta(partial=""))
        (a,) = records.case_history(store, "t::a")
        (level,) = records.case_history(store, "t::sweep@users=4")
        whole = records.result_of(store, int(run_id or 0), "t::sweep")
    assert a.trials == {"decode_tps": [100.0, 98.5, 101.25], "ttft_s": [0.1, 0.1, 0.1]}
    # every record carries its concurrency, content and temperature (a run's results always did; the hand-built
    # dict this test once wrote lacked them)
    assert a.setup == {"model": "m", "server": "sim", "kind": "sustained", "ctx": 100, "tokens": 200,
                       "concurrency": 1, "content": "prose", "temperature": 0.0}
    assert level.trials == {"decode_tps": [40.0], "ttft_s": [0.3], "total_tps": [160.0]}
    assert whole is not None and [lv["concurrency"] for lv in whole["levels"]] == [1, 4]


def _write_runs(target: Target, writer: int, start: multiprocessing.synchronize.Event) -> None:
    start.wait()
    for i in range(RUNS_EACH):
        # each writer opens its own connection per run, as parallel CI jobs do; the first ones race to migrate
        with schema.open_store(Store(target)) as store:
            records.record_run(store, [_result("t::a", [100.0 + writer, 100.0 + i]),
                                       _result("t::b", [50.0, 51.0, 52.0])], _meta(f"w{writer}-{i}"))


def test_concurrent_writers_lose_nothing(target: Target) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_write_runs, args=(target, w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with schema.open_store(Store(target)) as store:
        commits = sorted(r["commit_id"] for r in records.runs(store))
        a, b = records.case_history(store, "t::a"), records.case_history(store, "t::b")
        versions = [r[0] for r in store.query("SELECT version FROM specperf_schema ORDER BY version")]
    assert commits == sorted(f"w{w}-{i}" for w in range(WRITERS) for i in range(RUNS_EACH))
    assert len(a) == len(b) == WRITERS * RUNS_EACH
    assert sorted(tuple(h.trials["decode_tps"]) for h in a) == sorted(
        (100.0 + w, 100.0 + i) for w in range(WRITERS) for i in range(RUNS_EACH))
    assert all(h.trials["decode_tps"] == [50.0, 51.0, 52.0] for h in b)
    assert versions == [m[0] for m in schema.MIGRATIONS]


def test_a_corrupt_sqlite_file_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not a database, it is a text file that happens to be here\n" * 100)
    with pytest.raises(HistoryError) as err, Store(Target(path=path)) as store:
        schema.migrate(store)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and "move it aside" in text


def test_an_sqlite_too_old_for_the_history_is_one_line_naming_the_fix(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """INSERT ... RETURNING (the history's) needs SQLite 3.35: an older one is refused up front, not blamed on the
    path's permissions when the first run is written."""
    from pytest_specperf.storage import store as store_module

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    assert conn.execute("INSERT INTO t (v) VALUES ('x') RETURNING id").fetchone() == (1,)  # what the history uses
    assert not store_module.sqlite_too_old(sqlite3.sqlite_version_info)
    assert store_module.sqlite_too_old((3, 34, 1)) and not store_module.sqlite_too_old((3, 35, 0))
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(HistoryError) as info:
        Store(Target(path=tmp_path / "h.sqlite"))
    text = str(info.value)
    assert "\n" not in text and "SQLite is 3.31.1" in text and "3.35.0 or later" in text and "postgresql://" in text


def test_a_locked_sqlite_file_is_one_line_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    schema.open_store(Store(Target(path=path))).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another job in the middle of its write
    try:
        with pytest.raises(HistoryError) as err, Store(Target(path=path), timeout=0.2) as store:
            records.record_run(store, [_result("t::a", [1.0])], _meta())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "\n" not in str(err.value) and "locked" in str(err.value) and "another process" in str(err.value)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket closes
    with pytest.raises(HistoryError) as err:
        Store(Target(url=f"postgresql://ci:s3cret@127.0.0.1:{port}/perf"), timeout=2)
    text = str(err.value)
    assert "\n" not in text and "s3cret" not in text and f"127.0.0.1:{port}" in text and "server is up" in text


def test_saved_json_runs_import_once_and_bad_files_are_named(target: Target, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    for i in range(3):
        storage.save_run(folder, [full(_result_json("t::a", [100.0 + i, 101.0]))], {"model": "m", "server": "sim",
                                                                         "commit": {"id": f"c{i}"}}, f"r{i}")
    (folder / "0004_broken.json").write_text("{ not json")
    with schema.open_store(Store(target)) as store:
        done, skipped = imports.import_folder(store, folder)
        again, skipped_again = imports.import_folder(store, folder)
        history = records.case_history(store, "t::a")
    assert done == ["0001_r0", "0002_r1", "0003_r2"] and again == []
    assert len(skipped) == 1 and skipped[0].startswith("0004_broken.json: not valid JSON")
    assert sum("already in the history" in s for s in skipped_again) == 3
    assert [h.commit_id for h in history] == ["c0", "c1", "c2"]
    assert [h.trials["decode_tps"][0] for h in history] == [100.0, 101.0, 102.0]
    assert json.loads(json.dumps(history[0].setup))["model"] == "m"


def test_drawn_lengths_and_trace_windows_are_set_ups_of_their_own(target: Target) -> None:
    # Same medians (ctx 1000, tokens 200), drawn two ways; one trace sent over two windows and at two speeds: each
    # is a set-up of its own, never the same history.
    def rate(drawn: str) -> Recorded:
        return record({"nodeid": "t::rate", "kind": "rate", "model": "m", "server": "sim", "verdict": "passed",
                       "rate": 2.0, "ctx": 1000, "tokens": 200, "drawn": {"ctx": drawn, "tokens": "200"}})

    def sweep(drawn: str) -> Recorded:
        return record({"nodeid": "t::sweep", "kind": "load_sweep", "model": "m", "server": "sim", "verdict": "passed",
                       "drawn": {"ctx": drawn}, "levels": [{"concurrency": 2, "decode_tps": 50.0, "ttft_s": 0.2}]})

    def replay(start_s: float, window_s: float, speed: float) -> Recorded:
        return record({"nodeid": "t::replay", "kind": "replay", "model": "m", "server": "sim", "verdict": "passed",
                       "trace": "builtin:mooncake-conversation", "speed": speed, "start_s": start_s,
                       "window_s": window_s})

    runs = [
        [rate("lognormal(median=1000, sigma=0.5)"), sweep("uniform(500, 1500)"), replay(0, 3, 2)],
        [rate("lognormal(median=1000, sigma=1.0)"), sweep("normal(mean=1000, sd=200)"), replay(3, 3, 2)],
        [rate("lognormal(median=1000, sigma=0.5)"), sweep("uniform(500, 1500)"), replay(0, 3, 4)],
        [rate("lognormal(median=1000, sigma=0.5)"), sweep("uniform(500, 1500)"), replay(0, 3, 2)],
    ]
    with schema.open_store(Store(target)) as store:
        for i, results in enumerate(runs):
            records.record_run(store, results, _meta(f"c{i}"))
        prints = {key: [h.fingerprint for h in records.case_history(store, key)]
                  for key in ("t::rate", "t::sweep@users=2", "t::replay")}
    for key, (first, other, _third, again) in prints.items():
        assert first == again, key  # the same set-up run twice: one history
        assert first != other, key  # another distribution, another window
    rate_fp, _, rate_third, _ = prints["t::rate"]
    _, _, replay_third, _ = prints["t::replay"]
    assert rate_fp == rate_third and replay_third != prints["t::replay"][0]  # the replay's speed alone differs
