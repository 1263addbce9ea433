"""A real llama-server with several slots (continuous batching) under the concurrent client.

Each request's own ``timings`` (llama.cpp's decode time for that request alone) is the known answer
for the plugin's per-user decode. The machine is shared, so levels run in the order 1, 2, 4, 4, 2, 1
and each level is judged on the median of its two passes: a slow spell hits both ends alike.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pytest_specperf import loadcase, measure
from pytest_specperf.client import Client
from pytest_specperf.concurrent import StreamRequest, run_streams, traces
from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.prompts import build_prompt
from pytest_specperf.runner import BURST_S

SLOTS = 4
TOKENS = 64
CTX = 64


@pytest.fixture(scope="module")
def slots_client(llama_engine) -> Iterator[Client]:
    binary, model = llama_engine
    # --parallel splits the context between slots: 4 x 512 holds ctx + tokens with room to spare.
    with LlamaServer(model, preset="ngram", binary=binary, ctx_size=2048,
                     extra_args=["--parallel", str(SLOTS)]) as server:
        client = Client(server.url, timeout=300)
        client.detect()
        client.complete("warm up", 8)
        yield client
        client.close()


def test_batching_directions_and_per_request_truth(slots_client: Client) -> None:
    prompts = [build_prompt("prose", CTX, slots_client.count_tokens, variant=v).text for v in range(8)]
    per_user: dict[int, list[float]] = {1: [], 2: [], 4: []}
    total: dict[int, list[float]] = {1: [], 2: [], 4: []}
    drafted: list[int] = []
    for n, users in enumerate((1, 2, 4, 4, 2, 1)):
        offset = 4 * (n >= 3)  # the second pass uses other prompts: no prefix cache from the first
        reqs = [StreamRequest(prompt=prompts[offset + i], max_tokens=TOKENS, seed=i) for i in range(users)]
        found = traces(run_streams(slots_client, reqs))
        rates = []
        for trace in found:
            s, _ = measure.stream_result(trace, coalesce_s=BURST_S)
            tm = trace.timings
            assert tm is not None and trace.completion_tokens == TOKENS
            # llama.cpp times the request's own decode: the first token is the prefill's, the rest decode.
            server_tps = (tm["predicted_n"] - 1) / tm["predicted_ms"] * 1000
            assert s.decode_tps == pytest.approx(server_tps, rel=0.03), (users, s.decode_tps, server_tps)
            rates.append(s.decode_tps)
            if users > 1:
                drafted.append(int(tm.get("draft_n", 0)))
        per_user[users].append(float(np.median(rates)))
        agg, _ = loadcase.aggregate_tps(found)
        assert agg is not None
        total[users].append(agg)
    d = {c: float(np.median(v)) for c, v in per_user.items()}
    t = {c: float(np.median(v)) for c, v in total.items()}
    assert t[1] < t[2] < t[4], f"aggregate tok/s should rise with users: {t}"
    assert d[1] > d[2] > d[4], f"per-user decode should fall with users: {d}"
    # llama.cpp keeps speculating with several slots busy: requests drafted.
    assert sum(x > 0 for x in drafted) >= len(drafted) // 2, drafted
