"""Results into pytest-benchmark's JSON and storage, as seconds per decoded token per trial.

pytest-benchmark only knows times where larger is worse, so it gets 1 / decode_tps of every trial
(stream or two-point sample) and the scalar result fields as ``extra_info``; drift, acceptance and
the verdicts stay with specperf. It has no public way to add measured values, so this uses its
``_make_stats`` (present in 3.x to 5.x) and says so once if that ever disappears.
"""

from __future__ import annotations

from typing import Any

from pytest_specperf.report.exports import benchmark_extra_info, per_token_seconds

OUTPUT_OPTIONS = ("benchmark_json", "benchmark_save", "benchmark_autosave", "benchmark_compare")
#: pytest-benchmark versions whose private names below were checked (tests/test_benchmark_bridge.py).
SUPPORTED = ">=4.0,<6"
#: The private parts of ``BenchmarkFixture`` this bridge relies on, all here and nowhere else.
PRIVATE_METHOD = "_make_stats"  # (rounds) -> Stats with .update(seconds): how timings enter its stats
PRIVATE_MODE = "_mode"  # set once the fixture was used, else pytest-benchmark warns that it sat idle


def wanted(config: Any) -> bool:
    """True when pytest-benchmark is active and asked to write or compare results."""
    if not config.pluginmanager.hasplugin("pytest_benchmark") and not config.pluginmanager.hasplugin("benchmark"):
        return False
    # Truthiness, not None: --benchmark-compare defaults to [] when not given.
    return any(bool(config.getoption(name, None)) for name in OUTPUT_OPTIONS)


def feed(bench: Any, result: dict[str, Any]) -> str | None:
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
