"""Replay trials built row by row with a known per-row change: the truth the row-matching tests read
(tests/unit/test_replay_rows.py, tests/db/test_replay_history.py)."""

from __future__ import annotations

import math

import numpy as np

from pytest_specperf.cases.results import ReplayResult
from pytest_specperf.cases.saved_results import load_record

#: prompt tokens of the trace's rows: a long-tailed mix, the same rows on both sides
PROMPTS = [200 * 1.1 ** i for i in range(40)]  # 200 to 8,100 tokens


def trial(rng: np.random.Generator, slower: float = 1.0, longest: float | None = None,
          nodeid: str = "t") -> ReplayResult:
    """One replay trial: each row's TTFT is its prefill and its TPOT grows with its context (longer prompts are
    slower on both), ``slower`` times the baseline's, with 1 % of noise per row; rows over ``longest`` prompt tokens
    are not sent (a server with a shorter context)."""
    reqs = []
    for i, n in enumerate(PROMPTS):
        if longest is not None and n > longest:
            continue
        ttft = (0.02 + n / 10_000) * slower * math.exp(rng.normal(0, 0.01))
        tpot = 20.0 * (1 + n / 8_000) * slower * math.exp(rng.normal(0, 0.01))
        reqs.append({"at_s": i * 0.1, "sent_s": i * 0.1, "late_s": 0.0, "status": 200, "row": i + 1, "ttft_s": ttft,
                     "tpot_ms": tpot, "e2e_s": ttft + 0.032 * tpot, "decode_tps": 1000 / tpot, "met": True})
    pct = {k: float(np.percentile([r[k] for r in reqs], 90)) for k in ("ttft_s", "tpot_ms", "e2e_s")}
    r = load_record({"kind": "replay", "nodeid": nodeid, "endpoint": "", "model": "sim", "server": "sim", "ctx": 0,
                     "prompt_tokens": None, "slo": {"e2e_s": 5.0}, "requests": len(reqs), "per_request": reqs,
                     "trace": "builtin:mooncake-conversation", "speed": 1.0,
                     "ttft_s": float(np.median([r["ttft_s"] for r in reqs])), "ttft_p90_s": pct["ttft_s"],
                     "tpot_p90_ms": pct["tpot_ms"], "e2e_p90_s": pct["e2e_s"], "attainment": 1.0,
                     "goodput_rps": len(reqs) / 10.0, "decode_tps": float(np.median([r["decode_tps"] for r in reqs]))})
    assert isinstance(r, ReplayResult)
    return r
