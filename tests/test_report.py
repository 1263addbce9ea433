"""The summary table and the atomic JSON file."""

import json
import os

from pytest_specperf.report import COLUMNS, table, write_json_atomic


def _sustained(**kw):
    base = {"nodeid": "perf_cases/test_x.py::test_long", "kind": "sustained", "prompt_tokens": 5003, "ctx": 5000,
            "completion_tokens": 1500, "ttft_s": 0.25, "decode_tps": 33.4, "early_tps": 48.1, "late_tps": 28.4,
            "drift": 0.41, "verdict": "failed", "reason": "drift 0.41 > 0.15"}
    return {**base, **kw}


def test_table_has_every_column_and_the_diagnosis():
    lines = table([_sustained(), {"nodeid": "t.py::test_b", "kind": "two_point", "prompt_tokens": 5001,
                                   "short": 8, "long": 264, "decode_tps": 66.8, "verdict": "passed"}])
    assert lines[0].split() [:2] == ["case", "ctx"]
    for col in COLUMNS:
        assert col in lines[0]
    assert "[sustained] test_long" in lines[1]
    assert "48.1 -> 28.4" in lines[1] and "0.41" in lines[1] and "250 ms" in lines[1]
    assert lines[1].endswith("failed: drift 0.41 > 0.15")
    assert "256" in lines[2] and lines[2].endswith("passed")
    # columns align: the decode column ends at the same offset on every row
    ends = {line.index(v) + len(v) for line, v in zip(lines[1:], ["33.4", "66.8"], strict=True)}
    assert len(ends) == 1


def test_error_rows_show_the_reason():
    lines = table([{"nodeid": "t.py::test_c", "kind": "sustained", "ctx": 1000, "verdict": "error",
                    "reason": "endpoint http://x is down"}])
    assert lines[1].endswith("error: endpoint http://x is down")


def test_json_is_atomic_and_redacts(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, [_sustained(reason="key sk-SECRET leaked")], {"endpoint": "http://e"},
                      redact=["sk-SECRET"])
    doc = json.loads(path.read_text())
    assert doc["results"][0]["decode_tps"] == 33.4 and doc["endpoint"] == "http://e"
    assert "sk-SECRET" not in path.read_text()
    assert os.listdir(tmp_path) == ["r.json"]  # no temp file left behind
