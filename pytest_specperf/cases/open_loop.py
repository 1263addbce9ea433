"""Specs of open-loop cases: ``rate`` (requests arriving at a rate, judged on SLOs) and ``capacity`` (the most
rate a deploy carries within them). Validated like every other case spec; see ``ratecase`` and ``capacity``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_specperf.cases.base import CaseSpec, check, is_number

#: The bounds an SLO may give, with their units: a request meets the SLO when it meets every bound given.
SLO_KEYS = {"ttft_s": "s", "tpot_ms": "ms", "e2e_s": "s", "ttft_content_s": "s"}  # ttft_content_s: first answer token
ARRIVALS = ("poisson", "constant", "gamma")
#: A capacity probe is expected to last its arrivals plus this share for the last responses to drain.
DRAIN = 0.25


def check_slo(slo: Any, k: str, *, required: bool) -> None:
    """An SLO is a mapping of known bounds to positive numbers; unknown keys name themselves."""
    if slo is None:
        check(not required, k, f"slo is required, e.g. slo={{'tpot_ms': 50}}; bounds: {', '.join(SLO_KEYS)}")
        return
    check(isinstance(slo, Mapping) and len(slo) > 0, k,
           f"slo must be a non-empty mapping of bounds ({', '.join(SLO_KEYS)}) to numbers, got {slo!r}")
    for key, value in slo.items():
        check(key in SLO_KEYS, k, f"slo has unknown bound {key!r}; use {', '.join(SLO_KEYS)}")
        check(is_number(value) and value > 0 and math.isfinite(value), k,
               f"slo {key} must be a positive number of {SLO_KEYS[key]}, got {value!r}")


def check_burstiness(spec: Any, k: str) -> None:
    """``burstiness`` goes with ``arrivals="gamma"`` only, as a positive number."""
    b = spec.burstiness
    check(b is None or (spec.arrivals == "gamma" and is_number(b) and b > 0 and math.isfinite(b)), k,
          f"burstiness must be a positive number with arrivals='gamma' (1 = Poisson, 0.25 = bursts with a CV of "
          f"2), got burstiness={b!r} with arrivals={spec.arrivals!r}")


def _fraction(v: Any, name: str, k: str) -> None:
    check(v is None or (is_number(v) and 0 < v <= 1), k, f"{name} must be a fraction in (0, 1], got {v!r}")


def _common(spec: Any, k: str) -> None:
    check(spec.arrivals in ARRIVALS, k, f"arrivals must be one of {', '.join(ARRIVALS)}, got {spec.arrivals!r}")
    check(isinstance(spec.tokens, int) and not isinstance(spec.tokens, bool) and spec.tokens >= 2, k,
           f"tokens must be an integer >= 2, got {spec.tokens!r}")
    check(is_number(spec.budget_s) and spec.budget_s > 0, k,
           f"budget_s must be a positive number of seconds, got {spec.budget_s!r}")
    # A rate case's repeat= runs the whole case that many times (trials, compare/gates.run_trials); a capacity
    # search decides its own probes.
    check(spec.repeat == 1 or k == "rate", k, f"repeat={spec.repeat}: a capacity search decides its own probes; "
           "drop repeat (its probes' requests are its samples)")
    check(spec.min_tps is None, k, "min_tps does not apply to open-loop cases; gate on min_attainment, "
           "min_goodput or the slo")


@dataclass(frozen=True, kw_only=True)
class RateSpec(CaseSpec):
    """Requests arriving open-loop at ``rps`` (seeded Poisson or constant), latency from each scheduled arrival."""

    KIND: ClassVar[str] = "rate"
    rps: float = 1.0
    requests: int = 64
    tokens: int = 256
    arrivals: str = "poisson"
    burstiness: float | None = None  # arrivals="gamma": the gaps' gamma shape (vLLM's); their CV is 1/sqrt(burstiness)
    slo: Any = None  # {"ttft_s": s, "tpot_ms": ms, "e2e_s": s}
    min_attainment: float | None = None  # share of requests meeting the slo
    min_goodput: float | None = None  # requests per second meeting the slo
    budget_s: float = 600.0  # the arrivals must fit in this many seconds

    def validate(self) -> None:
        CaseSpec.validate(self)
        k = self.KIND
        check(is_number(self.rps) and self.rps > 0 and math.isfinite(self.rps), k,
               f"rps must be a positive number of requests per second, got {self.rps!r}")
        check(isinstance(self.requests, int) and not isinstance(self.requests, bool) and self.requests >= 2, k,
               f"requests must be an integer >= 2, got {self.requests!r}")
        _common(self, k)
        check_burstiness(self, k)
        check_slo(self.slo, k, required=self.min_attainment is not None or self.min_goodput is not None)
        _fraction(self.min_attainment, "min_attainment", k)
        check(self.min_goodput is None or (is_number(self.min_goodput) and self.min_goodput > 0), k,
               f"min_goodput must be a positive number of requests per second, got {self.min_goodput!r}")
        span = self.requests / self.rps
        check(span <= self.budget_s, k,
               f"requests={self.requests} at rps={self.rps:g} take about {span:.0f} s to arrive, more than "
               f"budget_s={self.budget_s:g}; lower requests or raise budget_s")


@dataclass(frozen=True, kw_only=True)
class CapacitySpec(CaseSpec):
    """The highest rate whose SLO attainment stays at or above ``target``: bracketing, then bisection on rate."""

    KIND: ClassVar[str] = "capacity"
    slo: Any = None
    target: float = 0.95  # attainment a rate must keep
    tokens: int = 256
    arrivals: str = "poisson"
    burstiness: float | None = None  # arrivals="gamma": the gaps' gamma shape (vLLM's), as in rate
    start_rps: float = 1.0  # first probe
    probe_s: float = 30.0  # arrivals per probe last this long (at least min_requests requests)
    min_requests: int = 32
    precision: float = 0.10  # stop when the bracket's top is within this fraction of its bottom
    budget_s: float = 900.0  # all probes together must fit in this
    min_rps: float | None = None  # floor on the rate found

    def validate(self) -> None:
        CaseSpec.validate(self)
        k = self.KIND
        check_slo(self.slo, k, required=True)
        _fraction(self.target, "target", k)
        _common(self, k)
        check_burstiness(self, k)
        for name in ("start_rps", "probe_s"):
            v = getattr(self, name)
            check(is_number(v) and v > 0 and math.isfinite(v), k, f"{name} must be a positive number, got {v!r}")
        check(isinstance(self.min_requests, int) and not isinstance(self.min_requests, bool)
               and self.min_requests >= 8, k, f"min_requests must be an integer >= 8, got {self.min_requests!r}")
        check(is_number(self.precision) and 0 < self.precision < 1, k,
               f"precision must be a fraction in (0, 1), got {self.precision!r}")
        check(self.min_rps is None or (is_number(self.min_rps) and self.min_rps > 0), k,
               f"min_rps must be a positive number of requests per second, got {self.min_rps!r}")
        check(self.budget_s >= 3 * self.probe_s, k,
               f"budget_s={self.budget_s:g} leaves room for fewer than 3 probes of probe_s={self.probe_s:g}; "
               "raise budget_s or lower probe_s")
        first = self.probe_seconds(self.start_rps)
        check(first <= self.budget_s, k,
               f"the first probe ({self.probe_requests(self.start_rps)} requests at start_rps={self.start_rps:g}) "
               f"takes about {first:.0f} s, more than budget_s={self.budget_s:g}; raise start_rps or budget_s, or "
               "lower min_requests")

    def probe_requests(self, rps: float) -> int:
        """Requests of one probe at ``rps``: ``probe_s`` of arrivals, at least ``min_requests``."""
        return max(self.min_requests, math.ceil(rps * self.probe_s))

    def probe_seconds(self, rps: float) -> float:
        """How long a probe at ``rps`` is expected to take: its arrivals, and the last responses draining."""
        return self.probe_requests(rps) / rps * (1 + DRAIN)


