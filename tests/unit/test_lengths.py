"""Lengths drawn from a distribution (``tokens=``/``ctx=`` strings): the forms parse into typed specs, bad strings are
one-line errors naming the forms, and seeded draws match each form's known answer (a mixture's share per component,
a cut normal's bounds, a lognormal's median, a trace's own lengths), the same for the same node id."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_specperf.cases import lengths
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.traces import load_trace

MOONCAKE = "builtin:mooncake-conversation"


def _dist(kind: str, **kw: object) -> lengths.Lengths:
    spec = build_spec(kind, kw)
    d = spec.tokens_dist if "tokens" in kw else spec.ctx_dist
    assert d is not None
    return d


def test_each_form_parses_into_its_typed_spec_and_the_keyword_holds_the_longest_draw() -> None:
    spec = build_spec("rate", {"tokens": "uniform(20, 60)", "ctx": "normal(2000, 500, min=200, max=8000)"})
    assert spec.tokens_dist is not None and spec.tokens_dist.dist == lengths.Uniform(20, 60) and spec.tokens == 60
    assert spec.ctx_dist is not None and spec.ctx_dist.dist == lengths.Normal(2000.0, 500.0, 200, 8000)
    assert spec.ctx == 8000
    ln = _dist("capacity", ctx="lognormal(1000, 0.5)", slo={"ttft_s": 1}).dist
    assert ln == lengths.LogNormal(1000.0, 0.5, 1, math.floor(1000 * math.exp(4 * 0.5)))
    mix = _dist("load_sweep", tokens="mix(0.7 * uniform(100, 400), 0.3 * normal(2000, 300, min=500))").dist
    assert isinstance(mix, lengths.Mixture) and mix.weights == pytest.approx((0.7, 0.3))
    assert (mix.low, mix.high) == (100, 3200)  # a normal without max= is cut 4 sigma above mu
    assert _dist("rate", tokens="mix(3 * uniform(2, 9), 1 * uniform(10, 20))").dist.weights == (0.75, 0.25)


def test_bad_strings_are_one_line_errors_naming_the_forms() -> None:
    for text, what in [("unifrom(1, 2)", "unknown form 'unifrom'"), ("uniform(1)", "takes 2 values, got 1"),
                       ("normal(100, -1)", "sigma a positive number"),
                       ("uniform(5, 2)", "a <= b"), ("normal(100, 10, mni=5)", "no keyword 'mni'"),
                       ("mix(uniform(2, 9), 0.5 * uniform(3, 4))", "a positive weight times it"),
                       ("uniform(2,", "syntax error"), ("lognormal(0, 1)", "median a positive number")]:
        with pytest.raises(ConfigError) as err:
            build_spec("rate", {"tokens": text})
        msg = str(err.value)
        assert "\n" not in msg and what in msg and msg.startswith(f"rate(): tokens={text!r}") and "trace(PATH)" in msg
    with pytest.raises(ConfigError, match="tokens must be an integer >= 2, got '300'"):  # the kind's own check
        build_spec("rate", {"tokens": "300"})
    with pytest.raises(ConfigError, match="applies to sustained"):
        build_spec("two_point", {"ctx": "uniform(1, 5)"})
    with pytest.raises(ConfigError, match="needs several requests"):
        build_spec("sustained", {"tokens": "uniform(100, 200)"})
    with pytest.raises(ConfigError, match="min=264 or drop max_drift"):
        build_spec("sustained", {"tokens": "uniform(100, 300)", "concurrency": 2, "max_drift": 0.1})
    with pytest.raises(ConfigError, match=r"whole numbers 16 <= a <= b"):  # sustained's own least tokens
        build_spec("load_sweep", {"tokens": "uniform(8, 30)"})
    with pytest.raises(ConfigError, match="no such file"):
        build_spec("rate", {"ctx": "trace(no/such.jsonl)"})
    with pytest.raises(ConfigError, match="unknown keyword 'tokens_dist'"):
        build_spec("rate", {"tokens_dist": "uniform(2, 3)"})


def test_a_mixtures_share_per_component_is_its_weight_within_two_points() -> None:
    d = _dist("rate", tokens="mix(0.7 * uniform(100, 400), 0.2 * normal(2000, 300, min=500), 0.1 * uniform(5, 9))")
    for case in range(20):  # 20 node ids of 5,000 draws: each share within 2 points of its weight
        values, parts = d.draw_parts(5000, f"tests/test_mix.py::test_{case}")
        shares = np.bincount(parts, minlength=3) / len(parts)
        assert np.abs(shares - np.array([0.7, 0.2, 0.1])).max() <= 0.02, (case, shares)
        v, k = np.array(values), np.array(parts)
        # every draw lies in the component it was drawn from
        assert v[k == 0].min() >= 100 and v[k == 0].max() <= 400 and v[k == 2].min() >= 5 and v[k == 2].max() <= 9
        assert v[k == 1].min() >= 500 and v[k == 1].max() <= 3200
        assert abs(float(np.mean(v[k == 1])) - 2000) < 30  # the normal's mean (sigma 300 / sqrt(1000) ~ 9.5)


def test_cut_forms_keep_their_bounds_and_centre() -> None:
    n = _dist("rate", ctx="normal(2000, 500, min=1500, max=2600)").draw(20_000, "n")
    assert min(n) >= 1500 and max(n) <= 2600
    # a normal cut by redrawing has no pile at its bounds: the bound's share is the density's, about 1/500 of a unit
    assert n.count(1500) / len(n) < 0.003 and n.count(2600) / len(n) < 0.003
    ln = _dist("rate", tokens="lognormal(300, 0.6, min=20)").draw(20_000, "ln")
    assert float(np.median(ln)) == pytest.approx(300, rel=0.03) and min(ln) >= 20
    u = _dist("rate", tokens="uniform(10, 13)").draw(8000, "u")
    assert set(u) == {10, 11, 12, 13} and all(abs(u.count(v) / 8000 - 0.25) < 0.02 for v in (10, 11, 12, 13))


def test_trace_lengths_are_the_traces_own() -> None:
    rows = load_trace(MOONCAKE).rows
    spec = build_spec("rate", {"tokens": f"trace({MOONCAKE})", "ctx": f"trace({MOONCAKE})"})
    assert spec.tokens_dist is not None and spec.ctx_dist is not None
    toks, ctxs = spec.tokens_dist.draw(500, "t"), spec.ctx_dist.draw(500, "t")
    pairs = {(max(2, r.output_length), r.input_length) for r in rows}
    assert all(pair in pairs for pair in zip(toks, ctxs, strict=True))  # both lengths of one row
    assert spec.ctx == max(r.input_length for r in rows)
    short = _dist("rate", ctx=f"trace({MOONCAKE}, max=8000)")
    assert short.high <= 8000 and set(short.draw(300, "s")) <= {r.input_length for r in rows if r.input_length <= 8000}


def test_the_same_node_id_draws_the_same_lengths() -> None:
    d = _dist("rate", tokens="mix(0.5 * uniform(100, 400), 0.5 * lognormal(900, 0.4))")
    assert d.draw(64, "perf/test_a.py::test_x") == d.draw(64, "perf/test_a.py::test_x")
    assert d.draw(64, "perf/test_a.py::test_x") != d.draw(64, "perf/test_a.py::test_y")
    spec = build_spec("rate", {"tokens": "uniform(2, 9000)", "ctx": "uniform(2, 9000)"})
    assert spec.tokens_dist is not None and spec.ctx_dist is not None
    assert spec.tokens_dist.draw(32, "a") != spec.ctx_dist.draw(32, "a")  # the keywords draw independently
    # a spec sized down for a small engine draws nothing above its lowered length
    assert max(lengths.per_request(spec.tokens_dist, 500, 200, "a")) == 500
