"""Prompt-file keywords on case specs: where they apply, paths, defaults and the one-line usage errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.result_parts import CategoryFigures
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.files import load_prompts
from pytest_specperf.run.categories import draw, floor_problems

MINI = "builtin:specbench-mini"


def _error(kind: str, kwargs: dict, **kw: object) -> str:
    with pytest.raises(ConfigError) as exc:
        build_spec(kind, kwargs, **kw)  # type: ignore[arg-type]
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("kind", ["two_point", "ctx_sweep"])
def test_kinds_that_time_exact_lengths_refuse_a_prompt_file(kind: str) -> None:
    assert _error(kind, {"prompts": MINI}).startswith(f"{kind}(): prompts= does not apply to {kind}")


@pytest.mark.parametrize("key", ["ctx", "content"])
def test_ctx_or_content_beside_prompts_is_a_usage_error(key: str) -> None:
    value = 500 if key == "ctx" else "code"
    assert f"{key}= with prompts=" in _error("sustained", {"prompts": MINI, key: value})


def test_a_burst_gap_needs_a_constructed_length() -> None:
    assert "drop max_burst_gap or prompts" in _error("sustained", {"prompts": MINI, "max_burst_gap": 0.3})


def test_prompt_keywords_need_a_prompt_file() -> None:
    assert "sample needs prompts=" in _error("rate", {"sample": 3})


def test_a_relative_path_is_read_from_the_case_files_folder(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "Question: why?", "category": "qa"}\n'
                                      '{"prompt": "Question: how?", "category": "qa"}\n')
    spec = build_spec("sustained", {"prompts": "p.jsonl", "tokens": 32}, base=tmp_path)
    assert spec.prompts == str(tmp_path / "p.jsonl") and spec.repeat == 2  # each prompt once by default
    assert build_spec("sustained", {"prompts": "p.jsonl", "repeat": 5}, base=tmp_path).repeat == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": \n')
    assert "bad.jsonl' line 2: not valid JSON" in _error("rate", {"prompts": "bad.jsonl"}, base=tmp_path)


def test_the_runs_default_applies_only_where_a_case_asks_for_no_prompts() -> None:
    assert build_spec("sustained", {}, default_prompts=MINI).prompts == MINI
    assert build_spec("sustained", {"ctx": 200}, default_prompts=MINI).prompts is None
    assert build_spec("two_point", {}, default_prompts=MINI).prompts is None


def test_per_category_floors_name_only_categories_of_the_file() -> None:
    text = _error("sustained", {"prompts": MINI, "min_tps": {"maths": 10}})
    assert "min_tps names category 'maths'" in text and "math_reasoning" in text
    text = _error("sustained", {"prompts": MINI, "categories": ["qa"], "min_accept_len": {"coding": 2}})
    assert "(after sample/categories)" in text
    assert "must be a number >= 1" in _error("sustained", {"prompts": MINI, "min_accept_len": {"qa": 0.5}})
    spec = build_spec("sustained", {"prompts": MINI, "min_tps": {"qa": 10, "*": 20}, "min_accept_len": 2})
    assert spec.min_tps == {"qa": 10, "*": 20}
    assert "min_tps must be a positive number" in _error("sustained", {"min_tps": {"qa": 10}})  # no file: no mapping


def test_draw_sends_every_prompt_equally_often_in_a_seeded_order() -> None:
    recs = list(load_prompts(MINI).records)
    a, b = draw(recs, 90, seed=1), draw(recs, 90, seed=2)
    assert Counter(r.id for r in a) == Counter({r.id: 3 for r in recs})
    assert a == draw(recs, 90, seed=1) and a != b


def test_a_category_floor_fails_its_category_alone_and_star_covers_the_rest() -> None:
    spec = build_spec("sustained", {"prompts": MINI, "min_tps": {"qa": 100, "*": 50}, "min_accept_len": {"rag": 4}})
    cats = {"qa": CategoryFigures(n=4, n_prompts=1, decode_tps_p50=90.0, decode_tps_p10=80.0, accept_len=3.0,
                                  accept_source="x"),
            "rag": CategoryFigures(n=3, n_prompts=3, decode_tps_p50=60.0, decode_tps_p10=55.0, accept_len=3.5,
                                   accept_source="x"),
            "coding": CategoryFigures(n=4, n_prompts=4, decode_tps_p50=40.0, decode_tps_p10=30.0, accept_len=None,
                                      accept_source=None)}
    problems = floor_problems(cats, spec)
    assert [p.split(":")[0] for p in problems] == ["qa", "rag", "coding"]
    # the count as the category's row says it: requests, and distinct prompts in the singular where one
    assert problems[0] == "qa: decode 90.0 tok/s < min_tps 100 (n=4 (1 prompt), median 90.0)"
    assert "(n=3 (3 prompts)" in problems[1]
    assert problems[1].startswith("rag: acceptance 3.50 tokens/step < min_accept_len 4")
    assert cats["coding"].min_tps == 50 and cats["coding"].min_accept_len is None
    assert floor_problems(cats, spec, per_user=True)[0].startswith("qa: p10 decode 80.0 tok/s")


def test_a_whole_large_file_says_how_many_trials_it_runs(tmp_path: Path) -> None:
    from pytest_specperf.cases.prompt_cases import MANY_TRIALS, many_trials

    big = tmp_path / "big.txt"
    big.write_text("".join(f"prompt {i}\n" for i in range(MANY_TRIALS + 1)), encoding="utf-8")
    note = many_trials(build_spec("sustained", {"prompts": str(big), "tokens": 16}))
    assert note is not None and f"has {MANY_TRIALS + 1} prompts and no sample=, so this case runs " \
        f"{MANY_TRIALS + 1} trials" in note
    assert "give sample=N" in note and "closed-loop mode, sustained(concurrency=N, requests=K)" in note
    assert many_trials(build_spec("sustained", {"prompts": str(big), "tokens": 16, "sample": 5})) is None
    small = tmp_path / "small.txt"
    small.write_text("".join(f"prompt {i}\n" for i in range(MANY_TRIALS)), encoding="utf-8")
    assert many_trials(build_spec("sustained", {"prompts": str(small), "tokens": 16})) is None
    assert many_trials(build_spec("sustained", {"tokens": 16})) is None


@pytest.mark.parametrize(("kind", "load"), [("load_sweep", {"concurrency": [1, 2]}), ("sustained", {"concurrency": 2})])
def test_a_whole_file_too_large_for_one_load_case_is_refused_before_anything_is_sent(
        tmp_path: Path, kind: str, load: dict) -> None:
    """Under load without requests= every prompt of the file is sent at each level: past MAX_REQUESTS, refused."""
    from pytest_specperf.cases.closed_loop import MAX_REQUESTS

    big = tmp_path / "big.txt"
    big.write_text("".join(f"prompt {i}\n" for i in range(MAX_REQUESTS + 1)), encoding="utf-8")
    with pytest.raises(ConfigError, match=f"has {MAX_REQUESTS + 1} prompts and no requests=.*give sample=N"):
        build_spec(kind, {"prompts": str(big), "tokens": 16, **load})
    for fits in ({"sample": 20}, {"requests": 40}):
        assert build_spec(kind, {"prompts": str(big), "tokens": 16, **load, **fits}).prompts == str(big)
    at_most = tmp_path / "at_most.txt"
    at_most.write_text("".join(f"prompt {i}\n" for i in range(MAX_REQUESTS)), encoding="utf-8")
    assert build_spec(kind, {"prompts": str(at_most), "tokens": 16, **load}).prompts == str(at_most)


def test_a_floor_of_a_category_no_request_drew_is_said_not_judged() -> None:
    from pytest_specperf.run.categories import unsent_floors

    spec = build_spec("sustained", {"prompts": MINI, "concurrency": 4, "tokens": 64,
                                    "categories": ["math_reasoning", "summarization", "translation"],
                                    "min_accept_len": {"math_reasoning": 4, "summarization": 2, "*": 1.5}})
    # four users drew none of math_reasoning's prompts
    sent = {"summarization": CategoryFigures(n=2), "translation": CategoryFigures(n=2)}
    (note,) = unsent_floors(sent, spec)
    assert note.startswith("min_accept_len 4 for math_reasoning not judged: none of its prompts was sent "
                           "(the case sent 4 requests)")
    assert unsent_floors({**sent, "math_reasoning": CategoryFigures(n=1)}, spec) == []
