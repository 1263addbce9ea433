"""Who sent a case: each worker's share on the result (``workers``), and a worker over its capacity.

A worker is over its capacity when its CPU share reaches ``BUSY_SHARE`` (its event loop was busy throughout, so
its reads waited on itself) or when its own requests' lateness passes the bound the case's lateness is held to
(``lateness``: the rate rule for open loop, the start spread for N users). Either makes the verdict inconclusive
through ``client_behind``, the sentence every load kind already weighs (``lateness.judge``), naming the worker.
"""

from __future__ import annotations

from typing import Any

from pytest_specperf.run import lateness
from pytest_specperf.scale.senders import Sent

#: CPU seconds per wall second at which one worker process counts as saturated (one core's event loop).
BUSY_SHARE = 0.9


def attach(result: Any, sent: Sent, bound: tuple[float, str], *, spread: bool = False) -> None:
    """``result.workers`` from ``sent``, and each worker over its capacity added to ``result.client_behind``."""
    if sent.workers is None:
        return
    result.workers = sent.workers
    over = []
    for w, share in zip(sent.workers, sent.shares, strict=True):
        late_s = [sent.outcomes[i].late_s for i in share]
        late = lateness.figures(late_s)
        earliest = min(late_s) if spread and late_s else None
        why = []
        if w.cpu_share >= BUSY_SHARE:
            why.append(f"CPU share {w.cpu_share:.2f} >= {BUSY_SHARE:g}")
        if lateness.behind(late, *bound, earliest):
            judged = late["late_p99_s"] - (earliest or 0.0)
            if bound[1].endswith("on the p50"):
                judged = late["late_p50_s"]
            why.append(f"send lateness {1000 * judged:.1f} ms > {1000 * bound[0]:.1f} ms ({bound[1]})")
        if why:
            over.append(f"worker pid {w.pid} on {w.host}: {', '.join(why)}")
    if over:
        text = (f"a worker was over its capacity ({'; '.join(over)}); this run does not judge the server: "
                "inconclusive (spread the streams over more --specperf-workers or --specperf-hosts)")
        result.client_behind = "; ".join(x for x in (result.client_behind, text) if x)
