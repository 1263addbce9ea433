"""Example perf cases: copy this file next to your deploy and set the floors to what your users need.

Run against the embedded simulator:      pytest perf_cases/
Run against a live server:               pytest perf_cases/ --endpoint=http://host:8000
Reproduce the story the plugin exists for: pytest perf_cases/ --specperf-sim=seed
"""

import pytest


# The case short benchmarks miss: a long generation on reasoning text, at a long context.
# Acceptance on reasoning text and per-step cost can both degrade as the generation goes on.
@pytest.mark.sustained(tokens=1500, ctx=5000, content="reasoning", min_tps=60, max_drift=0.15)
def test_long_reasoning_holds(specperf):
    r = specperf.result  # measured once for this test, from its marker
    assert r.completion_tokens == r.tokens  # the whole answer, counted exactly (sized down on a small engine)
    if r.early_tps is not None:  # None where its windows were too short to time here (a note on the row says why)
        assert r.late_tps >= 0.8 * r.early_tps  # the end of a long answer reads as fast as its start


# The classic two-point decode rate at the same context: it passes even where the case above fails.
@pytest.mark.two_point(ctx=5000, min_tps=60, repeat=3)
def test_burst_decode(specperf):
    r = specperf.result
    # Bursts half again apart say the server is too noisy at this size to trust one of them: raise long=.
    assert max(r.samples_tps) <= 1.5 * min(r.samples_tps)


# How decode scales with context length (attention cost per step grows with the KV cache).
@pytest.mark.ctx_sweep(ctxs=[64, 1024, 3072, 5120], tokens=256, min_tps=50)
def test_context_scaling(specperf):
    points = specperf.result.points
    # Attention makes long contexts slower, but a cliff (below a fifth of the short-context rate) is a bug.
    assert points[-1]["decode_tps"] >= 0.2 * points[0]["decode_tps"]


# The same measurements, called directly: two of them compared with a tolerance in one test.
def test_prose_keeps_up_with_code(specperf):
    code = specperf.sustained(tokens=300, ctx=1000, content="code")
    prose = specperf.sustained(tokens=300, ctx=1000, content="prose")
    # Drafts are accepted less often on prose than on code, so prose decodes slower; under half the code
    # rate means the drafter fails on ordinary text.
    assert prose.decode_tps >= 0.5 * code.decode_tps, f"prose {prose.decode_tps:.1f} vs code {code.decode_tps:.1f}"
