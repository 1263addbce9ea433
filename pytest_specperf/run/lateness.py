"""The client's own send lateness, and the bound past which a load result cannot judge the server.

Every load, rate and capacity request has a scheduled send time and the time it reached the
network (``concurrent``); the difference is the client's lateness: event-loop lag, a busy
machine, anything of the client's own. Results carry its p50 and p99 (``late_p50_s``,
``late_p99_s``), the bound they were held to (``late_bound_s``) and, when p99 exceeds it, a
``client_behind`` sentence. Such a result is inconclusive, whatever its floors say: the figures
describe a client that could not keep its schedule, not the server.

The bound (see docs/open-loop.md):

- open loop (rate, capacity probes): ``LATE_SHARE`` (10%) of the tightest SLO bound that lateness
  is counted into (``ttft_s``, ``ttft_content_s``, ``e2e_s``: all run from the scheduled arrival), so at most 1% of
  requests lose more than a tenth of their budget to the client. With neither bound (``tpot_ms``
  only, which lateness does not enter) what lateness can distort is the load offered: the median
  lateness is then held to 10% of the schedule's span (requests / rps), past which the requests
  went out over a span that differs by more than a tenth from the asked one (one late request
  does not reshape the load, so this bound is on the p50).
- concurrency (``sustained(concurrency=N)``, each level of a ``load_sweep``): the streams are
  measured from their own tokens (TTFT from their own send), so a lateness all of them share
  changes nothing; what is judged is the spread of the starts (p99 minus the earliest), against
  ``LOAD_SHARE`` (25%) of the median stream's duration: past that, the N streams no longer run
  together for most of their decode as the case intends.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from pytest_specperf.cases.result_parts import RateRequest
from pytest_specperf.cases.results import Probe

#: Share of the tightest schedule-counted SLO bound the client's p99 lateness may reach.
LATE_SHARE = 0.10
#: Share of the median stream's duration the client's p99 lateness may reach in a concurrency case.
LOAD_SHARE = 0.25
#: SLO bounds counted from the scheduled arrival (lateness adds to them one for one), in seconds.
SCHEDULE_COUNTED = ("ttft_s", "e2e_s", "ttft_content_s")


def figures(late_s: Iterable[float]) -> dict[str, float]:
    """``late_p50_s`` and ``late_p99_s`` of the requests' lateness (NaN when there is none)."""
    values = [v for v in late_s if v is not None and not math.isnan(v)]
    if not values:
        return {"late_p50_s": math.nan, "late_p99_s": math.nan}
    return {"late_p50_s": float(np.percentile(values, 50)), "late_p99_s": float(np.percentile(values, 99))}


def open_loop_bound(slo: Mapping[str, float] | None, span_s: float) -> tuple[float, str]:
    """(bound in s, what it is) for an open-loop run judged on ``slo`` whose schedule spans ``span_s``."""
    counted = {k: v for k, v in (slo or {}).items() if k in SCHEDULE_COUNTED}
    if counted:
        key = min(counted, key=lambda k: counted[k])
        return LATE_SHARE * counted[key], f"{LATE_SHARE:.0%} of slo {key} {counted[key]:g} s"
    return LATE_SHARE * span_s, f"{LATE_SHARE:.0%} of the schedule's {span_s:.3g} s, on the p50"


def load_bound(durations_s: Iterable[float]) -> tuple[float, str]:
    """(bound in s, what it is) for N streams at once whose durations (send -> end) are given."""
    med = float(np.median(list(durations_s)))
    return LOAD_SHARE * med, f"{LOAD_SHARE:.0%} of the median stream's {med:.3g} s"


def behind(late: Mapping[str, float], bound_s: float, basis: str, earliest_s: float | None = None) -> str:
    """The sentence for a client whose p99 lateness (past ``earliest_s``, for a spread) exceeds ``bound_s``, else ""."""
    p99 = late["late_p99_s"]
    # a bound on the load offered (no schedule-counted SLO) is held by the typical request, not the worst
    judged = late["late_p50_s"] if basis.endswith("on the p50") else p99 - (earliest_s or 0.0)
    if math.isnan(judged) or judged <= bound_s:
        return ""
    what = (f"send lateness p99 {1000 * p99:.1f} ms (p50 {1000 * late['late_p50_s']:.1f} ms)" if earliest_s is None
            else f"starts spread {1000 * judged:.1f} ms (send lateness p99 {1000 * p99:.1f} ms, earliest "
                 f"{1000 * earliest_s:.1f} ms)")
    return (f"the client fell behind its schedule: {what} > {1000 * bound_s:.1f} ms ({basis}); this run does not "
            "judge the server: inconclusive (rerun where the client machine is not busy)")


def attach(result: Any, late_s: Iterable[float], bound: tuple[float, str], *, spread: bool = False,
           starved_s: Iterable[float | None] = ()) -> None:
    """Set ``late_p50_s``, ``late_p99_s``, ``late_bound_s`` and ``client_behind`` on ``result``.

    ``spread``: judge how far the starts spread (p99 minus the earliest), for streams meant to run together.
    ``starved_s``: per request (as ``late_s``), how much of its lateness the host's scheduler caused: named in the
    sentence where it is most of the lateness, so the fix (a quieter client machine) is the one the figures show.
    """
    lates, waits = list(late_s), list(starved_s)
    values = [v for v in lates if v is not None and not math.isnan(v)]
    late = figures(values)
    result.late_p50_s, result.late_p99_s = late["late_p50_s"], late["late_p99_s"]
    result.late_bound_s = bound[0]
    result.client_behind = behind(late, *bound, min(values) if spread and values else None)
    host = [min(w, v) for v, w in zip(lates, waits, strict=True)
            if v is not None and w is not None and not math.isnan(v)] if waits else []
    if result.client_behind and host and (held := float(np.percentile(host, 99))) >= 0.5 * late["late_p99_s"]:
        result.client_behind += (f"; the host's scheduler caused most of it: the client waited p99 {1000 * held:.1f} "
                                 "ms for a CPU other processes had (its run-queue wait)")


def judge(result: Any, problems: list[str], policy: str) -> list[str]:
    """The problems to fail on once the client's lateness is weighed (``policy``: pass | warn | fail).

    When the client fell behind, no floor speaks for the server: the floors' problems are dropped
    (named in the sentence) and the inconclusive sentence follows the policy, as every
    inconclusive gate does.
    """
    text = getattr(result, "client_behind", "")
    if not text:
        return problems
    if problems:
        text += f"; the floors read: {'; '.join(problems)}"
    if policy == "fail":
        return [text]
    (result.warnings if policy == "warn" else result.notes).append(text)
    return []


def probe_fields(late_s: Iterable[float], slo: Mapping[str, float], span_s: float, *,
                 could_change: bool = True) -> dict[str, Any]:
    """One capacity probe's lateness figures, bound and ``client_behind`` sentence, as probe fields.

    ``could_change``: False when the probe reads the same with every request's lateness taken off its
    latencies (``met_on_time``); then a client behind excuses nothing and the sentence is kept as ``late_note``."""
    late = figures(late_s)
    bound, basis = open_loop_bound(slo, span_s)
    text = behind(late, bound, basis)
    if text and not could_change and counted(slo):
        return {**late, "late_bound_s": bound, "client_behind": "", "late_note": f"{text}; {SAME}"}
    return {**late, "late_bound_s": bound, "client_behind": text}


#: What a lateness that could not have changed the verdict adds to its sentence.
SAME = "on time it reads the same (the lateness taken off every request's latencies), so the verdict stands"


def counted(slo: Mapping[str, float] | None) -> bool:
    """True when the slo has a bound lateness adds to (timed from the scheduled arrival)."""
    return any(k in SCHEDULE_COUNTED for k in (slo or {}))


def met_on_time(rec: RateRequest, slo: Mapping[str, float]) -> bool:
    """Whether an answered request would meet ``slo`` had it gone out on time: each schedule-counted latency less
    the request's own lateness (the rest do not move). A refused or failed request meets nothing either way."""
    if rec.status != 200:
        return False
    late = max(0.0, float(rec.late_s or 0.0))
    for key, bound in slo.items():
        v = getattr(rec, key, None)  # an slo bound's name is the request's figure it bounds
        if v is None or math.isnan(v) or v - (late if key in SCHEDULE_COUNTED else 0.0) > bound:
            return False
    return True


def weigh(result: Any, fails: bool, fails_on_time: bool) -> None:
    """Blame the client only where it could explain the verdict: when the verdict is the same with every
    request's lateness taken off its latencies (``fails_on_time``), the ``client_behind`` sentence becomes a
    note and the floors judge the server (an impossible SLO fails, a pass stands). Only for a schedule-counted
    slo; a lateness that reshaped the load offered (tpot only) is left to ``judge``."""
    text = getattr(result, "client_behind", "")
    if text and counted(getattr(result, "slo", None)) and fails == fails_on_time:
        result.notes.append(f"{text.split('; this run does not judge')[0]}; {SAME}")
        result.client_behind = ""


def attach_probes(result: Any) -> None:
    """A capacity search's lateness: the median probe's p50, the worst probe's p99, and every probe behind."""
    probes: list[Probe] = result.probes
    if not probes:
        return
    result.late_p50_s = float(np.median([p.late_p50_s for p in probes]))
    worst = max(probes, key=lambda p: (p.late_p99_s or 0.0) - (p.late_bound_s or 0.0))
    result.late_p99_s, result.late_bound_s = worst.late_p99_s, worst.late_bound_s
    late = [f"at {p.rps:.3g} req/s {p.client_behind}" for p in probes if p.client_behind]
    # One probe the client could not offer moves the bracket, so the whole search is inconclusive.
    result.client_behind = "; ".join(late)
