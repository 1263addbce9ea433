"""Run files (storage/saved_runs.py): round trip, atomic writes, bad files, lookup, never-raising probes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage.saved_runs import (
    FORMAT,
    VERSION,
    SpecperfStorageWarning,
    commit_info,
    default_folder,
    find_run,
    fingerprint_diff,
    list_runs,
    load_run,
    machine_info,
    save_run,
)

RESULTS = [
    {"nodeid": "perf_cases/test_decode.py::test_long", "kind": "sustained", "verdict": "passed", "reason": "",
     "decode_tps": 48.1, "ttft_s": 0.21, "streams": [{"decode_tps": 48.0, "ttft_s": 0.2}]},
    {"nodeid": "perf_cases/test_decode.py::test_burst", "kind": "two_point", "verdict": "passed", "reason": "",
     "decode_tps": 66.8, "samples_tps": [66.1, 66.8, 67.0]},
    {"nodeid": "perf_cases/test_decode.py::test_down", "kind": "sustained", "verdict": "error", "reason": "refused"},
]
META = {"plugin_version": "9.9.9", "endpoint": "http://127.0.0.1:8000", "model": "m", "server": "vllm",
        "server_version": "0.11.0", "repeat": 3}


def test_round_trip(tmp_path: Path) -> None:
    folder = default_folder(tmp_path)
    assert folder == tmp_path / ".specperf" / "runs"
    path = save_run(folder, RESULTS, META, name="main", root=tmp_path)
    assert path == folder / "0001_main.json"
    run = load_run(path)
    assert run is not None
    assert run.results == RESULTS
    assert (run.format, run.version, run.counter, run.name, run.label) == (FORMAT, VERSION, 1, "main", "0001_main")
    assert (run.plugin_version, run.endpoint, run.model, run.server, run.server_version) == (
        "9.9.9", "http://127.0.0.1:8000", "m", "vllm", "0.11.0")
    assert run.meta == {"repeat": 3}
    assert run.created.endswith("Z") and run.commit["id"] and run.machine["python_version"]
    assert save_run(folder, RESULTS, META, name="main", root=tmp_path).name == "0002_main.json"


def test_atomic_write_leaves_only_the_run_file(tmp_path: Path) -> None:
    path = save_run(tmp_path, RESULTS, META, name="x", root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object) -> None:
        raise PermissionError("disk says no")

    monkeypatch.setattr(os, "link", boom)
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(PermissionError):
        save_run(tmp_path, RESULTS, META, name="x", root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writer_is_not_clobbered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = tmp_path / "0001_theirs.json"
    theirs.write_text("their run")
    counters = iter([1, 2])  # we computed 1 before their file appeared
    monkeypatch.setattr(storage, "_next_counter", lambda folder: next(counters))
    path = save_run(tmp_path, RESULTS, META, name="theirs", root=tmp_path)
    assert path.name == "0002_theirs.json"
    assert theirs.read_text() == "their run"


def test_odd_values_and_secrets(tmp_path: Path) -> None:
    results = [{"nodeid": "t::a", "decode_tps": np.float64(48.5), "window_tps": np.array([1.0, 2.0]),
                "obj": object(), "path": Path("/x"), "note": "key sk-SECRET in url"}]
    path = save_run(tmp_path, results, {**META, "endpoint": "http://h/?key=sk-SECRET"}, root=tmp_path,
                    redact=["sk-SECRET"])
    text = path.read_text()
    assert "sk-SECRET" not in text and "***" in text
    run = load_run(path)
    assert run is not None
    r = run.results[0]
    assert r["decode_tps"] == 48.5 and r["window_tps"] == [1.0, 2.0] and r["path"] == "/x"
    assert r["obj"] == "UNSERIALIZABLE[object]"


def _load_warns(path: Path, match: str) -> None:
    with pytest.warns(SpecperfStorageWarning, match=match) as rec:
        assert load_run(path) is None
    (w,) = rec
    assert "\n" not in str(w.message) and str(path) in str(w.message)


@pytest.mark.parametrize(("content", "match"), [
    ("{not json", "not valid JSON"),
    ("", "empty file"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"format": "pytest-benchmark", "results": []}), "not a pytest-specperf run"),
    (json.dumps({"format": FORMAT, "version": 99, "results": []}), "newer pytest-specperf"),
    (json.dumps({"format": FORMAT, "version": "1", "results": []}), "not an integer"),
    (json.dumps({"format": FORMAT, "version": 0, "results": []}), "unknown format version"),
    (json.dumps({"format": FORMAT, "version": 1}), "missing field 'results'"),
    (json.dumps({"format": FORMAT, "version": 1, "results": [{"kind": "sustained"}]}), r"results\[0\] has no"),
])
def test_bad_files_warn_and_give_none(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "0001_bad.json"
    path.write_text(content)
    _load_warns(path, match)


def test_truncated_and_unreadable_files(tmp_path: Path) -> None:
    path = save_run(tmp_path, RESULTS, META, name="t", root=tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    _load_warns(path, "truncated or corrupt")
    path.write_bytes(b"\xff\xfe\x00garbage")
    _load_warns(path, "cannot read it")
    _load_warns(tmp_path / "0009_gone.json", "cannot read it")


def test_normalize_on_load_and_report_files(tmp_path: Path) -> None:
    minimal = tmp_path / "0001_min.json"
    minimal.write_text(json.dumps({"format": FORMAT, "version": 1, "results": [{"nodeid": "t::a"}]}))
    run = load_run(minimal)
    assert run is not None
    assert run.results == [{"nodeid": "t::a", "kind": "", "verdict": "", "reason": ""}]
    assert (run.name, run.commit, run.machine, run.meta, run.model) == ("min", {}, {}, {}, None)
    # a --specperf-json report works as a baseline too
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"format": "pytest-specperf/1", "plugin_version": "0.1.0", "created": "x",
                                  "model": "m", "server": "sglang", "max_drift": 0.15, "results": RESULTS}))
    run = load_run(report)
    assert run is not None
    assert (run.version, run.model, run.server, run.meta, run.counter) == (0, "m", "sglang", {"max_drift": 0.15}, None)
    assert len(run.results) == 3


def test_find_run(tmp_path: Path) -> None:
    assert find_run(tmp_path / "nothing-here") is None
    assert list_runs(tmp_path / "nothing-here") == []
    a = save_run(tmp_path, RESULTS, META, name="main", root=tmp_path)
    b = save_run(tmp_path, RESULTS, META, name="feature x", root=tmp_path)
    c = save_run(tmp_path, RESULTS, META, name="main", root=tmp_path)
    (tmp_path / ".specperf-run-abc.tmp").write_text("partial")
    (tmp_path / "notes.json").write_text("{}")
    assert list_runs(tmp_path) == [a, b, c]
    assert b.name == "0002_feature-x.json"
    assert find_run(tmp_path) == c
    assert find_run(tmp_path, "main") == c  # ambiguous -> the latest
    assert find_run(tmp_path, "1") == a
    assert find_run(tmp_path, "0002") == b
    assert find_run(tmp_path, "0002_feature-x") == b
    assert find_run(tmp_path, "feature-x") == b
    assert find_run(tmp_path, "0001_main.json") == a
    assert find_run(tmp_path, str(a)) == a
    assert find_run(tmp_path, "nope") is None
    assert find_run(tmp_path, "7") is None


def test_commit_and_machine_info_never_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = commit_info(tmp_path)
    assert plain["id"] == "unversioned" and plain["dirty"] is False and plain["project"] == tmp_path.name
    assert commit_info(tmp_path / "missing" / "file.txt")["id"] in ("unversioned", "unknown")
    run = load_run(save_run(tmp_path / "runs", RESULTS, META, root=tmp_path))
    assert run is not None and run.path.name == "0001_run.json"  # no name, no commit -> 'run'
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no git at all
    broken = commit_info(tmp_path)
    assert broken["id"] == "unknown" and broken["error"]

    def boom() -> str:
        raise OSError("no platform today")

    monkeypatch.setattr(storage.platform, "system", boom)
    monkeypatch.setattr(storage.socket, "gethostname", boom)
    info = machine_info()
    assert info["system"] is None and info["host_id"] is None and info["cpu_count"] == os.cpu_count()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_commit_info_in_a_repository(tmp_path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    (tmp_path / "f.txt").write_text("1")
    for args in (["init", "-q", "-b", "trunk"], ["add", "f.txt"], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True)
    info = commit_info(tmp_path)
    assert len(info["id"]) == 40 and info["branch"] == "trunk" and info["dirty"] is False and info["time"]
    path = save_run(tmp_path / "runs", RESULTS, META, root=tmp_path)
    assert path.name == f"0001_{info['id'][:12]}.json"
    (tmp_path / "f.txt").write_text("2")
    assert commit_info(tmp_path)["dirty"] is True
    assert save_run(tmp_path / "runs", RESULTS, META, root=tmp_path).name.endswith("-dirty.json")


def test_fingerprint_diff() -> None:
    assert fingerprint_diff(META, {**META, "endpoint": "http://other"}) == []
    assert fingerprint_diff(META, {**META, "server_version": None}) == []
    assert fingerprint_diff(META, {**META, "model": "m2"}) == ["model: 'm' (baseline) != 'm2' (now)"]
