import pytest


@pytest.mark.two_point(ctx=200, repeat=3, long=1032)
def test_tp(specperf):
    pass

@pytest.mark.ctx_sweep(ctxs=(128, 512), tokens=64)
def test_sweep(specperf):
    pass

@pytest.mark.sustained(tokens=200, ctx=200, repeat=3)
def test_sus(specperf):
    pass

@pytest.mark.load_sweep(concurrency=(1, 2), tokens=100, ctx=200, repeat=2)
def test_load(specperf):
    pass

@pytest.mark.rate(rps=4, requests=8, tokens=40, ctx=100, slo={"ttft_s": 5.0})
def test_rate(specperf):
    pass

@pytest.mark.session(users=2, turns=2, tokens=30, ctx=100)
def test_session(specperf):
    pass

@pytest.mark.sustained(tokens=200, ctx=10000000)
def test_too_long(specperf):
    pass
