"""The seed's story on a real engine: ngram drafts pay on repetitive text and much less on prose or reasoning.

Per content kind, vLLM's own per-request ``metrics.speculative_decoding`` is the acceptance figure checked;
the plugin's verdict (drift gate, attribution) runs on the same cases and must not fail a steady server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_specperf.client import Client
from pytest_specperf.engines.vllm import STARTUP_TIMEOUT_S, VllmServer
from pytest_specperf.results import SustainedResult
from pytest_specperf.runner import Runner
from pytest_specperf.spec import MIN_DRIFT_TOKENS, SustainedSpec

# The suite's 300 s per test would count the shared server's start-up against the first test that uses it.
VLLM_TIMEOUT_S = STARTUP_TIMEOUT_S + 300
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(VLLM_TIMEOUT_S)]

KINDS = ("repetitive", "prose", "reasoning")
TOKENS = MIN_DRIFT_TOKENS + 32  # the fewest the drift gate judges, and a margin


@pytest.fixture(scope="module")
def by_kind(vllm_ngram: VllmServer) -> Iterator[dict[str, SustainedResult]]:
    with Client(vllm_ngram.url, timeout=300) as c:
        c.detect()
        runner = Runner(c, inconclusive="pass")
        yield {k: runner.sustained(SustainedSpec(tokens=TOKENS, ctx=128, content=k), f"content-{k}") for k in KINDS}


def test_acceptance_is_highest_on_repetitive_text(by_kind: dict[str, SustainedResult]) -> None:
    lengths = {k: (r.acceptance or {}).get("mean_len") for k, r in by_kind.items()}
    print("vLLM ngram mean accepted length by content:", lengths)
    assert all(v is not None for v in lengths.values()), lengths
    assert lengths["repetitive"] > lengths["prose"] and lengths["repetitive"] > lengths["reasoning"], lengths


@pytest.mark.parametrize("kind", KINDS)
def test_drift_gate_and_attribution_do_not_fail_a_steady_server(by_kind: dict[str, SustainedResult],
                                                                 kind: str) -> None:
    r = by_kind[kind]
    assert r.verdict == "passed", (r.reason, r.drift, r.drift_gate)
    assert r.drift_verdict in ("passed", "inconclusive"), r.drift_gate  # the gate ran and did not fail it
    assert r.attribution is not None  # one chunk per engine step: the slowdown split ran too
