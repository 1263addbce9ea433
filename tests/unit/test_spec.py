"""Case specs: the one validation path for markers, YAML cases and direct calls."""

import pytest

from pytest_specperf.cases.closed_loop import CtxSweepSpec, SustainedSpec
from pytest_specperf.cases.registry import build_spec, marker_help
from pytest_specperf.cases.yaml_cases import load_cases
from pytest_specperf.errors import ConfigError


def test_defaults_and_values_land_in_the_spec():
    spec = build_spec("sustained", {"tokens": 700, "ctx": 4000, "content": "code", "min_tps": 12.5})
    assert isinstance(spec, SustainedSpec)
    assert (spec.tokens, spec.ctx, spec.content, spec.min_tps, spec.repeat) == (700, 4000, "code", 12.5, 1)


def test_misspelt_keyword_names_the_likely_one():
    with pytest.raises(ConfigError, match=r"sustained\(\): unknown keyword 'tokes'; did you mean 'tokens'\?"):
        build_spec("sustained", {"tokes": 100})


def test_unrelated_keyword_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid keywords: ctx, content"):
        build_spec("two_point", {"zzz": 1})


@pytest.mark.parametrize(
    ("kind", "kwargs", "needle"),
    [
        ("sustained", {"tokens": 4}, "tokens must be an integer >= 16"),
        ("sustained", {"content": "poetry"}, "content must be one of prose, code, reasoning, repetitive"),
        ("sustained", {"max_drift": 1.5}, "max_drift must be a fraction"),
        ("sustained", {"min_tps": -1}, "min_tps must be a positive number"),
        ("sustained", {"repeat": 0}, "repeat must be an integer >= 1"),
        ("two_point", {"temperature": 3}, r"temperature must be a number in \[0, 2\]"),
        ("sustained", {"temperature": "hot"}, r"temperature must be a number in \[0, 2\]"),
        ("two_point", {"short": 100, "long": 50}, "long must be an integer > short"),
        ("ctx_sweep", {"ctxs": []}, "ctxs must be a non-empty list"),
        ("sustained", {"ctx": "1000"}, "ctx must be a positive integer"),
        ("sustained", {"concurrency": 4, "requests": 3}, "requests=3 is below concurrency=4: .* raise requests"),
        ("load_sweep", {"concurrency": [1, 8], "requests": 4}, "requests=4 is below concurrency=8"),
        ("sustained", {"requests": 5, "repeat": 2}, "requests=5 sends that many requests .* drop repeat"),
        ("sustained", {"concurrency": 2, "requests": 2.5}, "requests must be an integer >= 1"),
    ],
)
def test_bad_values_are_named(kind, kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        build_spec(kind, kwargs)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"users": 10**6}, r"session\(\): users=1000000 is above 512, the most sessions one case runs at once .*; "
                       r"lower it to 512 or less"),
    ({"turns": 10**6}, r"session\(\): turns=1000000 is above 1000, the most turns one conversation has .*; "
                       r"lower it to 1000 or less"),
])
def test_sessions_are_bounded_before_anything_is_sent(kwargs, needle):
    # users had no bound (10**6 sessions grew to 2 GB before the first request); turns=10**6 blamed ctx
    with pytest.raises(ConfigError, match=needle) as exc:
        build_spec("session", kwargs)
    assert "\n" not in str(exc.value) and "ctx" not in str(exc.value)


def test_positional_arguments_are_refused():
    with pytest.raises(ConfigError, match="keyword arguments only"):
        build_spec("sustained", {}, (1500,))


def test_sweep_ctxs_become_a_tuple():
    spec = build_spec("ctx_sweep", {"ctxs": [64, 128]})
    assert isinstance(spec, CtxSweepSpec) and spec.ctxs == (64, 128)


def test_marker_help_shows_signatures():
    lines = marker_help()
    assert set(lines) == {"sustained", "two_point", "ctx_sweep", "load_sweep", "rate", "capacity", "session", "replay"}
    assert lines["sustained"].startswith("sustained(ctx=1000, content='prose'")
    assert "tokens=1500" in lines["sustained"]


def test_yaml_cases_validate_like_markers(tmp_path):
    f = tmp_path / "x.specperf.yaml"
    f.write_text("a:\n  sustained: {tokens: 300}\n  marks: [smoke]\nb:\n  two_point: {ctx: 64}\n")
    cases = load_cases(f)
    assert [(n, s.KIND, m) for n, s, _, m in cases] == [("a", "sustained", ["smoke"]), ("b", "two_point", [])]
    f.write_text("a:\n  sustained: {tokns: 300}\n")
    with pytest.raises(ConfigError, match=r"x.specperf.yaml: case 'a': sustained\(\): unknown keyword 'tokns'"):
        load_cases(f)
    f.write_text("a:\n  sustaned: {}\n")
    with pytest.raises(ConfigError, match="unknown key 'sustaned'"):
        load_cases(f)
    f.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_cases(f)


def test_a_sweeps_requests_go_to_every_level():
    spec = build_spec("load_sweep", {"concurrency": [1, 4], "requests": 12})
    assert [spec.level(c).requests for c in (1, 4)] == [12, 12]
