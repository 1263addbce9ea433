"""Records from the few fields a unit test writes: what a rule does not read filled in with neutral values, then
loaded through the plugin's one JSON-to-record loader (``saved_results.load_record``), as a saved run is."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_specperf.cases.results import Recorded
from pytest_specperf.cases.saved_results import load_record

#: a stream's required fields; a figure the test does not give is NaN, which no rule reads as a value
STREAM: dict[str, Any] = {
    "prompt_tokens": None, "completion_tokens": 0, "ttft_s": math.nan, "total_s": math.nan, "decode_tps": math.nan,
    "client_tps": math.nan, "window_tokens": None, "window_tps": [], "early_tps": None, "late_tps": None,
    "drift": None, "trend_p": None, "stalls": [], "tokens_per_chunk": math.nan, "count_source": "",
    "counts_exact": True}
RESULT: dict[str, Any] = {"endpoint": "", "model": "", "server": "", "ctx": 0, "prompt_tokens": None}
POINT: dict[str, Any] = {"prompt_tokens": None, "t_short_s": math.nan, "t_long_s": math.nan}


def _streams(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"streams": [{**STREAM, **s} for s in data["streams"]]} if "streams" in data else {}


def record(data: Mapping[str, Any]) -> Recorded:
    """The record of a result written as a few fields (a test's hand-built row)."""
    if data.get("verdict") == "error":
        return load_record({"kind": "sustained", "nodeid": "", **data})
    extra: dict[str, Any] = _streams(data)
    if "levels" in data:
        extra["levels"] = [{**lv, **_streams(lv)} for lv in data["levels"]]
    if "points" in data:
        extra["points"] = [{**POINT, **p} for p in data["points"]]
    return load_record({**RESULT, **data, **extra})


def records(rows: Iterable[Mapping[str, Any]]) -> list[Recorded]:
    """``record`` of each row."""
    return [record(r) for r in rows]
