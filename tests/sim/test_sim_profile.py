"""Profiles: built-ins load, every key is validated, files and overrides work."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specperf.sim import Profile, ProfileError, builtin_profiles, load_profile
from pytest_specperf.sim.profile import merge_overrides, parse_assignment, profile_from_dict

BUILTINS = ["acceptance-collapse", "batching", "categories", "fragmenting", "healthy", "seed"]


def test_builtins_are_listed_and_load() -> None:
    assert builtin_profiles() == BUILTINS
    for name in BUILTINS:
        p = load_profile(name)
        assert p.name == name and p.description


def test_builtin_yaml_files_say_what_they_model() -> None:
    folder = Path(__file__).resolve().parents[2] / "pytest_specperf" / "sim" / "profiles"
    for name in BUILTINS:
        assert (folder / f"{name}.yaml").read_text().startswith(f"# {name}:")


def test_healthy_is_stationary_and_others_are_not() -> None:
    h = load_profile("healthy")
    assert h.step_ms_per_1k_generated == 0 and h.accept_shift is None and h.step_ms_per_1k_ctx < 1
    f = load_profile("fragmenting")
    assert f.step_ms_per_1k_generated > 0 and f.accept_shift is None
    c = load_profile("acceptance-collapse")
    assert c.step_ms_per_1k_generated == 0 and c.step_ms_per_1k_ctx == 0 and c.accept_shift is not None
    s = load_profile("seed")
    assert s.accept_mean("reasoning", 264) == 5.0 and s.accept_mean("reasoning", 1000) == 2.9


def test_unknown_profile_lists_builtins() -> None:
    with pytest.raises(ProfileError, match=r"unknown profile .helthy.*acceptance-collapse, batching, categories, frag"):
        load_profile("helthy")


@pytest.mark.parametrize(("override", "match"), [
    ({"step_msec": 3}, "unknown key 'step_msec'.*step_ms"),
    ({"step_ms": -1}, "'step_ms': must be > 0"),
    ({"step_ms": "fast"}, "'step_ms': expected a number"),
    ({"jitter": 0.9}, "'jitter': must be <= 0.5"),
    ({"dialect": "tgi"}, "'dialect': must be one of vllm, sglang, llamacpp"),
    ({"accept_len": {"poetry": 2}}, "'accept_len.poetry': unknown content kind"),
    ({"accept_len": {"prose": 9}}, "'accept_len.prose': must be <= 8"),
    ({"accept_len": {"prose": 0.5}}, "'accept_len.prose': must be >= 1"),
    ({"max_accept": 0}, "'max_accept': must be >= 1"),
    ({"accept_shift": {"after": 3}}, "'accept_shift.after': unknown key"),
    ({"accept_shift": {"after_tokens": 3}}, "needs both"),
    ({"eos_after_tokens": 1.5}, "'eos_after_tokens': expected an integer"),
    ({"metrics": "yes"}, "'metrics': expected true or false"),
    ({"faults": "stal=1@2"}, "'faults': fault 'stal=1@2'"),
    ({"accept_dist": "uniform"}, "'accept_dist': must be one of"),
    ({"speculation": "off"}, "'speculation': expected true or false"),
    ({"batch_slowdown": 0.1}, "unknown key 'batch_slowdown'"),
    ({"step_ms_per_token": -1}, "'step_ms_per_token': must be >= 0"),
    ({"draft_ms_per_token": "x"}, "'draft_ms_per_token': expected a number"),
    ({"step_ms_per_seq": -0.5}, "'step_ms_per_seq': must be >= 0"),
    ({"step_free_tokens": 0}, "'step_free_tokens': must be >= 1"),
    ({"max_batch": 2.5}, "'max_batch': expected an integer"),
])
def test_bad_values_are_one_line_errors_naming_the_key(override: dict, match: str) -> None:
    with pytest.raises(ProfileError, match=match) as info:
        load_profile("healthy", override)
    assert "\n" not in str(info.value)


def test_yaml_file_laid_over_defaults(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("# my server\nstep_ms: 12\naccept_len: {prose: 2, code: 3, reasoning: 2, repetitive: 7}\n")
    p = load_profile(path)
    assert (p.name, p.step_ms, p.accept_len["repetitive"], p.dialect) == ("mine", 12.0, 7.0, "vllm")
    assert load_profile(str(path)).step_ms == 12.0


def test_yaml_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("accept_len: {prose: 2}\n")
    with pytest.raises(ProfileError, match="missing content kind"):
        load_profile(bad)
    bad.write_text("steps_ms: 2\n")
    with pytest.raises(ProfileError, match="profile 'bad': unknown key 'steps_ms'"):
        load_profile(bad)
    bad.write_text("[1, 2]\n")
    with pytest.raises(ProfileError, match="expected a mapping"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "missing.yaml")


def test_overrides_merge_nested_mappings() -> None:
    p = load_profile("healthy", {"accept_len": {"prose": 4.5}, "dialect": "llamacpp"})
    assert p.accept_len == {**load_profile("healthy").accept_len, "prose": 4.5}
    assert p.dialect == "llamacpp"


def test_cli_assignments() -> None:
    over = merge_overrides([parse_assignment("accept_len.code=5"), parse_assignment("dialect=sglang"),
                            parse_assignment("eos_after_tokens=null")])
    assert over == {"accept_len": {"code": 5}, "dialect": "sglang", "eos_after_tokens": None}
    with pytest.raises(ProfileError, match="expected KEY=VALUE"):
        parse_assignment("dialect")


def test_json_roundtrip_and_profile_input() -> None:
    import json

    p = load_profile("seed", {"dialect": "sglang"})
    again = profile_from_dict(json.loads(p.to_json()), name="x")
    assert again == p
    assert load_profile(p) == p
    assert isinstance(p, Profile)
