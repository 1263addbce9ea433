"""A load case run once is one sample per run in the history: its median user and its aggregate, as the baseline
rule and docs/statistics.md take it ("load levels: trials are the samples"), not one sample per user (the users of
one trial share the engine's batched steps). Built on purpose: users whose TTFTs split in two groups, so the median
user (what the table shows) and a mean over users differ by far more than any noise."""

from __future__ import annotations

import numpy as np
from test_gate import _meta, _typed

from pytest_specperf.storage import records, schema
from pytest_specperf.storage.store import Store, Target

#: eight users: four answered at 0.1 s, four at 1.0 s; the median user's TTFT (the row's, as the runner sets it) is
#: 0.55 s, the geometric mean over users 0.32 s
TTFTS = [0.1] * 4 + [1.0] * 4
DECODES = [40.0, 42.0, 44.0, 46.0, 48.0, 50.0, 52.0, 54.0]


def _load(nodeid: str) -> dict:
    streams = [{"decode_tps": d, "ttft_s": t} for d, t in zip(DECODES, TTFTS, strict=True)]
    return {"kind": "sustained", "model": "m", "server": "sim", "verdict": "passed", "ctx": 100, "tokens": 200,
            "concurrency": 8, "decode_tps": float(np.median(DECODES)), "ttft_s": float(np.median(TTFTS)),
            "total_tps": 376.0, "streams": streams, "nodeid": nodeid}


def test_a_load_case_run_once_is_one_sample_per_run(target: Target) -> None:
    sweep = {"nodeid": "t::sweep", "kind": "load_sweep", "model": "m", "server": "sim", "verdict": "passed",
             "ctx": 100, "tokens": 200, "concurrency": [8],
             "levels": [{**_load("t::sweep"), "kind": "sustained"}]}
    with schema.open_store(Store(target)) as store:
        records.record_run(store, [_typed(_load("t::load")), _typed(sweep)], _meta(0))
        for key in ("t::load", "t::sweep@users=8"):
            trials = records.case_history(store, key)[0].trials
            assert trials["ttft_s"] == [0.55], key
            assert trials["decode_tps"] == [47.0], key
            assert trials["total_tps"] == [376.0], key
