"""The ``replay`` case's spec: a production trace sent open-loop, each request at its own time.

The trace is read when the spec is built (``prompts/traces.py``), so a bad file, a wrong timestamp unit or an
empty window is a collection error naming the file, the row and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_specperf.cases.base import CaseSpec, check, is_number
from pytest_specperf.cases.closed_loop import validate_arms
from pytest_specperf.cases.open_loop import check_slo
from pytest_specperf.prompts import traces

#: The key of a per-bucket floor mapping that stands for every input-length bucket the mapping does not name.
ANY_BUCKET = "*"


@dataclass(frozen=True, kw_only=True)
class ReplaySpec(CaseSpec):
    """A trace file replayed open-loop: each row sent at its own time (scaled by ``speed``), its exact lengths."""

    KIND: ClassVar[str] = "replay"
    trace: str | None = None  # a file (relative to the case file) or builtin:NAME
    speed: float = 1.0  # 2 = twice as fast: the trace's gaps halved
    start_s: float = 0.0  # the window, in the trace's own seconds from its first row
    duration_s: float | None = None
    timestamp_unit: str | None = None  # s, ms, us, ns or datetime; None: the format's own
    format: str | None = None  # mooncake, azure, burstgpt, csv, jsonl; None: read from the columns
    columns: Any = None  # {role: column} for csv/jsonl (roles: timestamp, input_length, output_length, hash_ids)
    slo: Any = None
    min_attainment: float | None = None
    min_goodput: float | None = None
    # Per input-length bucket (<1k, 1-4k, 4-16k, >16k tokens, or "*" for the rest): TTFT p90 ceilings in s and
    # median decode floors in tok/s, since a long prompt's TTFT and a short one's are different promises.
    max_ttft_p90_s: Any = None
    min_decode_tps: Any = None
    budget_s: float = 600.0  # the window's replay must fit in this many seconds
    max_loss_vs_best: float | None = None  # --specperf-arms: the deployed arm at most this much slower than the best
    deployed: str | None = None  # --specperf-arms: the arm max_loss_vs_best judges (default: the baseline arm)

    def validate(self) -> None:
        CaseSpec.validate(self)
        k = self.KIND
        check(isinstance(self.trace, str) and bool(self.trace.strip()), k,
              "trace is required: a trace file's path (relative to the case file) or "
              f"{', '.join(traces.BUILTIN_PREFIX + n for n in traces.BUILTIN_TRACES)}")
        check(is_number(self.speed) and self.speed > 0 and math.isfinite(self.speed), k,
              f"speed must be a positive number (2 = twice as fast as the trace), got {self.speed!r}")
        check(is_number(self.start_s) and self.start_s >= 0, k,
              f"start_s must be a non-negative number of the trace's seconds, got {self.start_s!r}")
        check(self.duration_s is None or (is_number(self.duration_s) and self.duration_s > 0), k,
              f"duration_s must be a positive number of the trace's seconds, got {self.duration_s!r}")
        check(self.columns is None or (isinstance(self.columns, Mapping) and all(
            isinstance(v, str) for v in self.columns.values())), k,
            f"columns must map roles to column names, e.g. {{'timestamp': 'ts'}}, got {self.columns!r}")
        check(self.min_tps is None, k, "min_tps does not apply to a replay; gate on min_decode_tps per length bucket")
        check(is_number(self.budget_s) and self.budget_s > 0, k,
              f"budget_s must be a positive number of seconds, got {self.budget_s!r}")
        check_slo(self.slo, k, required=self.min_attainment is not None or self.min_goodput is not None)
        for name in ("min_attainment",):
            v = getattr(self, name)
            check(v is None or (is_number(v) and 0 < v <= 1), k, f"{name} must be a fraction in (0, 1], got {v!r}")
        check(self.min_goodput is None or (is_number(self.min_goodput) and self.min_goodput > 0), k,
              f"min_goodput must be a positive number of requests per second, got {self.min_goodput!r}")
        for name in ("max_ttft_p90_s", "min_decode_tps"):
            _check_buckets(getattr(self, name), name, k)
        validate_arms(self, k)
        rows = self.rows()  # reads the trace: its mistakes are collection errors
        check(bool(rows), k, f"the window start_s={self.start_s:g}, duration_s={self.duration_s} holds no row of "
              f"{self.trace} (its rows span {self.load().span_s:.4g} s); move or widen the window")
        span = (rows[-1].at_s - rows[0].at_s) / self.speed
        check(span <= self.budget_s, k,
              f"the window's {len(rows)} requests take {span:.0f} s to send at speed={self.speed:g}, more than "
              f"budget_s={self.budget_s:g}; shorten duration_s, raise speed or raise budget_s")

    def load(self) -> traces.Trace:
        """The trace file, read (cached)."""
        return traces.load_trace(str(self.trace), format=self.format, timestamp_unit=self.timestamp_unit,
                                 columns=self.columns)

    def rows(self) -> list[traces.TraceRow]:
        """The rows of the window, in time order."""
        return self.load().window(float(self.start_s), self.duration_s)

    def schedule(self) -> list[float]:
        """Each row's send time in seconds after the case's start: its trace time less the window's first row's,
        over ``speed``."""
        rows = self.rows()
        return [(r.at_s - rows[0].at_s) / self.speed for r in rows]


def _check_buckets(value: Any, name: str, k: str) -> None:
    if value is None:
        return
    names = [b for b, _ in traces.BUCKETS]
    if is_number(value):
        check(value > 0, k, f"{name} must be positive, got {value!r}")
        return
    check(isinstance(value, Mapping) and len(value) > 0, k,
          f"{name} must be a number or a mapping of length buckets ({', '.join(names)}, '*') to numbers, got {value!r}")
    for key, v in value.items():
        check(key in names or key == ANY_BUCKET, k, f"{name} names unknown bucket {key!r}; use {', '.join(names)} "
              "or '*'")
        check(is_number(v) and v > 0, k, f"{name}[{key!r}] must be a positive number, got {v!r}")


def bucket_bound(value: Any, bucket: str) -> float | None:
    """The floor or ceiling a per-bucket keyword gives ``bucket`` (a number applies to every bucket)."""
    if value is None:
        return None
    if is_number(value):
        return float(value)
    got = value.get(bucket, value.get(ANY_BUCKET))
    return None if got is None else float(got)
