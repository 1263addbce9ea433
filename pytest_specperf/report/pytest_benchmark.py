"""Results into pytest-benchmark's JSON and storage, as seconds per decoded token per trial.

pytest-benchmark only knows times where larger is worse, so it gets 1 / decode_tps of every trial
(stream or two-point sample) and the scalar result fields as ``extra_info``; drift, acceptance and
the verdicts stay with specperf. It has no public way to add measured values, so this uses its
``_make_stats`` (present in 3.x to 5.x) and says so once if that ever disappears.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_specperf.cases.figures import trials
from pytest_specperf.cases.results import Recorded, SweepResult
from pytest_specperf.report.table import Row, as_case
from pytest_specperf.report.table import finite_number as _num

OUTPUT_OPTIONS = ("benchmark_json", "benchmark_save", "benchmark_autosave", "benchmark_compare")
#: pytest-benchmark versions whose private names below were checked (tests/unit/test_benchmark_bridge.py).
SUPPORTED = ">=4.0,<6"
#: The private parts of ``BenchmarkFixture`` this bridge relies on, all here and nowhere else.
PRIVATE_METHOD = "_make_stats"  # (rounds) -> Stats with .update(seconds): how timings enter its stats
PRIVATE_MODE = "_mode"  # set once the fixture was used, else pytest-benchmark warns that it sat idle
#: the scalar result fields given as ``extra_info``
EXTRA_INFO_FIELDS = ("kind", "endpoint", "model", "server", "content", "ctx", "prompt_tokens", "tokens",
                     "completion_tokens", "short", "long", "repeat", "decode_tps", "client_tps", "ttft_s", "total_s",
                     "early_tps", "late_tps", "drift", "stalls", "tokens_per_chunk", "burst_tps", "burst_gap",
                     "verdict", "reason")


def benchmark_extra_info(result: Recorded | Mapping[str, Any]) -> dict[str, Any]:
    """Scalar result fields (no lists) for pytest-benchmark's ``benchmark.extra_info``."""
    r = as_case(result)  # an error record: the fields it has
    # each field where the case's kind has it and it holds one finite value
    info = {k: v for k in EXTRA_INFO_FIELDS
            if isinstance(v := getattr(r, k, None), str | int | float | bool) and not (
                isinstance(v, float) and not math.isfinite(v))}
    info["nodeid"] = r.nodeid
    return info


def per_token_seconds(result: Recorded | Mapping[str, Any]) -> list[float]:
    """Seconds per decoded token, one per trial; [] for an errored case."""
    r = as_case(result)
    if isinstance(r, Row) or r.verdict == "error":
        return []
    if isinstance(r, SweepResult):
        points = [p for p in r.points if _num(p.decode_tps)]
        if not points:
            return []
        low = min(points, key=lambda p: p.decode_tps)
        # the slowest point, as the two-point case ``figures.trials`` reads it (its samples are its trials)
        return [1.0 / x for x in trials(low, "decode_tps") if x > 0]
    return [1.0 / x for x in trials(r, "decode_tps") if x > 0]


def wanted(config: Any) -> bool:
    """True when pytest-benchmark is active and asked to write or compare results."""
    if not config.pluginmanager.hasplugin("pytest_benchmark") and not config.pluginmanager.hasplugin("benchmark"):
        return False
    # Truthiness, not None: --benchmark-compare defaults to [] when not given.
    return any(bool(config.getoption(name, None)) for name in OUTPUT_OPTIONS)


def feed(bench: Any, result: Recorded | Mapping[str, Any]) -> str | None:
    """Give one result's trials to a ``benchmark`` fixture; returns a warning text if it could not."""
    if getattr(bench, "disabled", False):
        return None
    seconds = per_token_seconds(result)
    if not seconds:
        return None
    make = getattr(bench, PRIVATE_METHOD, None)
    if make is None:
        return (f"this pytest-benchmark has no {PRIVATE_METHOD} (the bridge supports pytest-benchmark{SUPPORTED}); "
                "specperf results are not in its output")
    setattr(bench, PRIVATE_MODE, "specperf")
    stats = make(1)
    for s in seconds:
        stats.update(s)
    bench.extra_info.update(benchmark_extra_info(result))
    bench.extra_info["unit"] = "seconds per decoded token (1 / decode_tps), one round per trial"
    return None
