"""Prompt files: each format read from a tiny file, each bad file named with its line and fix, sampling and filters."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.files import FORMATS, UNCATEGORIZED, builtin_sets, load_prompts


def _jsonl(path: Path, *objs: Any) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def test_specbench_sends_the_first_turn_and_keeps_the_others(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "question.jsonl",
               {"question_id": 81, "category": "writing", "turns": ["Write a haiku.", "Now make it rhyme."]},
               {"question_id": 82, "category": "math", "turns": ["What is 2 + 2?"], "reference": ["4"]})
    s = load_prompts(f)
    assert s.format == "specbench" and s.categories() == ("writing", "math") and len(s) == 2
    first = s.records[0]
    assert (first.id, first.category) == ("81", "writing")
    assert first.messages() == [{"role": "user", "content": "Write a haiku."}]
    assert first.text == "Write a haiku."
    assert first.user_turns == ("Write a haiku.", "Now make it rhyme.")
    assert first.where.endswith("line 1") and s.records[1].where.endswith("line 2")


def test_sharegpt_sends_the_system_and_first_human_turn(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "sg.jsonl",
               {"id": "a1", "conversations": [{"from": "system", "value": "Be brief."},
                                              {"from": "human", "value": "Name a planet."},
                                              {"from": "gpt", "value": "Mars."},
                                              {"from": "human", "value": "Another?"}]},
               {"conversations": [{"from": "gpt", "value": "Hello, how can I help?"},
                                  {"from": "human", "value": "Tell me a joke."}]})
    s = load_prompts(f)
    assert s.format == "sharegpt" and s.categories() == (UNCATEGORIZED,)
    a, b = s.records
    assert a.id == "a1" and a.messages() == [{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": "Name a planet."}]
    assert a.text == "Name a planet." and a.user_turns == ("Name a planet.", "Another?")
    # a leading model turn answers nothing the file holds: the request starts at the first human turn
    assert b.id == "2" and b.messages() == [{"role": "user", "content": "Tell me a joke."}]


def test_openai_chat_sends_the_conversation_up_to_its_last_user_message(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "chat.jsonl",
               {"category": "support", "messages": [
                   {"role": "system", "content": "You are a help desk."},
                   {"role": "user", "content": "My printer is offline."},
                   {"role": "assistant", "content": "Is it switched on?"},
                   {"role": "user", "content": [{"type": "text", "text": "Yes, "}, {"type": "text", "text": "it is."}]},
                   {"role": "assistant", "content": "Then check the cable."}]})
    rec = load_prompts(f).records[0]
    assert rec.category == "support" and [m["role"] for m in rec.messages()] == ["system", "user", "assistant", "user"]
    assert rec.messages()[-1]["content"] == "Yes, it is." and rec.text == "Yes, it is."
    assert len(rec.turns) == 5  # the reference answer is kept for later, not sent


def test_plain_prompt_or_text_as_lines_or_one_array(tmp_path: Path) -> None:
    lines = _jsonl(tmp_path / "p.jsonl", {"prompt": "Once upon a time", "category": "story"}, {"text": "Dear team,"})
    array = tmp_path / "p.json"
    array.write_text(json.dumps([{"prompt": "Once upon a time", "category": "story"}, {"text": "Dear team,"}],
                                indent=2), encoding="utf-8")
    for f in (lines, array):
        s = load_prompts(f)
        assert s.format == "plain" and [r.text for r in s.records] == ["Once upon a time", "Dear team,"]
        assert [r.category for r in s.records] == ["story", UNCATEGORIZED]
    assert load_prompts(array).records[1].where.endswith("item 2")


def test_a_named_format_is_checked(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "p.jsonl", {"prompt": "Hi"})
    assert load_prompts(f, fmt="plain").format == "plain"
    with pytest.raises(ConfigError, match=r"line 1: prompts_format='openai' but the record has no 'messages'"):
        load_prompts(f, fmt="openai")
    with pytest.raises(ConfigError, match=r"prompts_format='chat': use one of specbench, sharegpt, openai, plain"):
        load_prompts(f, fmt="chat")
    assert FORMATS == ("specbench", "sharegpt", "openai", "plain")


def test_paths_are_relative_to_the_base_folder(tmp_path: Path) -> None:
    (tmp_path / "cases" / "data").mkdir(parents=True)
    _jsonl(tmp_path / "cases" / "data" / "p.jsonl", {"prompt": "Hi"})
    assert load_prompts("data/p.jsonl", base=tmp_path / "cases").path == str(tmp_path / "cases" / "data" / "p.jsonl")
    assert len(load_prompts(tmp_path / "cases" / "data" / "p.jsonl", base="/elsewhere")) == 1  # absolute stays
    with pytest.raises(ConfigError, match="does not exist; give a path relative to the case file"):
        load_prompts("data/p.jsonl", base=tmp_path)


BAD = [
    ("", "holds no prompts; add one JSON object a line"),
    ('{"prompt": "a"}\n{"prompt": \n', "line 2: not valid JSON"),
    ('[{"prompt": "a"},\n', "line 2: not valid JSON"),
    ('{"prompt": "a"}\n\n{"question": "b"}\n', "line 3: no prompt field; give 'turns' (Spec-Bench)"),
    ('{"prompt": "a"}\n{"turns": ["b"]}\n', "line 2: a specbench record in a plain file (first record at"),
    ('["a"]', "item 1: expected a JSON object, got str"),
    ('{"turns": []}', "line 1: 'turns' must be a non-empty list of user messages"),
    ('{"turns": ["ok", ""]}', "line 1: 'turns[]' must be a non-empty string"),
    ('{"prompt": "  "}', "line 1: 'prompt' must be a non-empty string"),
    ('{"conversations": [{"from": "gpt", "value": "hi"}]}', "line 1: the conversation has no 'human' turn to send"),
    ('{"conversations": [{"role": "user", "content": "hi"}]}', "line 1: each conversation entry needs 'from'"),
    ('{"messages": [{"role": "assistant", "content": "hi"}]}', "line 1: 'messages' has no user message to answer"),
    ('{"messages": [{"role": "robot", "content": "hi"}]}', "line 1: each message needs 'role'"),
    ('{"prompt": "a", "category": 3}', "line 1: 'category' must be a non-empty string, got 3"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_file_is_one_line_naming_file_line_and_fix(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_prompts(f)
    assert message in str(err.value) and str(f) in str(err.value) and "\n" not in str(err.value)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prompts file '.*nope.jsonl' does not exist"):
        load_prompts(tmp_path / "nope.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_prompts(tmp_path / "bin.jsonl")
    with pytest.raises(ConfigError, match="give a prompt file path or builtin:NAME"):
        load_prompts("")


def test_categories_filter_and_name_the_known_ones(tmp_path: Path) -> None:
    f = _jsonl(tmp_path / "q.jsonl", *({"turns": [f"q{i}"], "category": c} for i, c in enumerate("abcabc")))
    assert [r.text for r in load_prompts(f, categories=["c", "a"]).records] == ["q0", "q2", "q3", "q5"]
    with pytest.raises(ConfigError, match=r"categories: 'd' is not in prompts file .*; its categories are a, b, c"):
        load_prompts(f, categories=["d"])
    with pytest.raises(ConfigError, match="give a non-empty list of category names"):
        load_prompts(f, categories="a")


def test_sample_is_reproducible_from_the_seed_and_kept_in_file_order() -> None:
    one = [r.id for r in load_prompts("builtin:specbench-mini", sample=10, seed=3).records]
    assert one == [r.id for r in load_prompts("builtin:specbench-mini", sample=10, seed=3).records]
    assert one == sorted(one, key=int) and len(set(one)) == 10
    others = {tuple(r.id for r in load_prompts("builtin:specbench-mini", sample=10, seed=s).records)
              for s in range(4, 9)}
    assert len(others | {tuple(one)}) > 1  # the seed matters
    # a known pick: a change in how samples are drawn would change every saved run's prompts
    assert one == ["3", "5", "11", "15", "17", "21", "23", "25", "27", "29"]


@pytest.mark.parametrize("n", [1, 3, 5, 8, 10, 17, 30])
def test_sample_is_stratified_by_category(tmp_path: Path, n: int) -> None:
    # five categories of unequal size (20, 10, 5, 3, 2): every category's share as in the file, one each first
    sizes = {"big": 20, "mid": 10, "small": 5, "tiny": 3, "two": 2}
    rows = [{"turns": [f"{c} {i}"], "category": c} for c, k in sizes.items() for i in range(k)]
    f = _jsonl(tmp_path / "q.jsonl", *rows)
    got = Counter(r.category for r in load_prompts(f, sample=n, seed=7).records)
    assert sum(got.values()) == n
    if n >= len(sizes):
        assert set(got) == set(sizes)  # sample=5 over five categories runs all five
        for c, k in sizes.items():  # each within one of its proportional share of what is left after one each
            share = 1 + (n - len(sizes)) * (k - 1) / (sum(sizes.values()) - len(sizes))
            assert abs(got[c] - share) < 1, (c, got)
    else:
        assert set(got) == set(list(sizes)[:n])  # too few picks for all: the largest categories first
        assert max(got.values()) == 1


def test_a_plain_text_file_is_one_prompt_a_line(tmp_path: Path) -> None:
    text = 'Write a haiku about rain.\n\n{not json} but a prompt\nTranslate "bonjour".\n'
    (tmp_path / "prompts.txt").write_text(text, encoding="utf-8")
    (tmp_path / "prompts.lst").write_text(text, encoding="utf-8")
    for s in (load_prompts(tmp_path / "prompts.txt"), load_prompts(tmp_path / "prompts.lst", fmt="plain")):
        assert s.format == "plain" and s.categories() == (UNCATEGORIZED,)
        assert [(r.id, r.text) for r in s.records] == [("1", "Write a haiku about rain."),
                                                       ("3", "{not json} but a prompt"),
                                                       ("4", 'Translate "bonjour".')]
        assert s.records[1].where.endswith("line 3")
    with pytest.raises(ConfigError, match=r"line 1: not valid JSON .*; for a plain-text file, one prompt a line, "
                                          r"give prompts_format='plain'"):
        load_prompts(tmp_path / "prompts.lst")
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="holds no prompts; write one prompt a line"):
        load_prompts(tmp_path / "blank.txt")
    f = _jsonl(tmp_path / "real.jsonl", {"prompt": "a"}, {"prompt": "b"})  # JSON lines stay JSON lines
    assert [r.text for r in load_prompts(f, fmt="plain").records] == ["a", "b"]


def test_sample_after_the_category_filter(tmp_path: Path) -> None:
    picked = load_prompts("builtin:specbench-mini", categories=["qa", "rag"], sample=3, seed=1)
    assert len(picked) == 3 and set(picked.categories()) <= {"qa", "rag"}
    with pytest.raises(ConfigError, match=r"sample=8 but prompts file 'builtin:specbench-mini' has 7 prompts in those"):
        load_prompts("builtin:specbench-mini", categories=["qa", "rag"], sample=8)
    for bad in (0, True, 2.5):
        with pytest.raises(ConfigError, match="give a whole number of prompts >= 1"):
            load_prompts("builtin:specbench-mini", sample=bad)  # type: ignore[arg-type]


def test_the_shipped_set() -> None:
    s = load_prompts("builtin:specbench-mini")
    assert builtin_sets() == ["specbench-mini"] and s.format == "specbench"
    assert set(s.categories()) == {"multi_turn", "translation", "summarization", "qa", "math_reasoning", "rag",
                                   "coding", "tool_call"}
    for cat in s.categories():
        assert 3 <= sum(r.category == cat for r in s.records) <= 5, cat
    assert len({r.id for r in s.records}) == len(s)
    assert all(len(r.user_turns) >= 2 for r in s.records if r.category == "multi_turn")
    assert all(r.text.startswith("Passage:") for r in s.records if r.category == "rag")
    with pytest.raises(ConfigError, match=r"prompts='builtin:specbench-mni': no such shipped set; use one of "
                                          r"builtin:specbench-mini \(did you mean 'specbench-mini'\?\)"):
        load_prompts("builtin:specbench-mni")
