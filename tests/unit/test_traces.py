"""Trace files into replay rows (prompts/traces.py) and the replay spec's window and speed (cases/replay.py):
the formats, the units read or given, and every input mistake a one-line error naming the file, the row and
the fix. Known answers come from the shipped files themselves (read here with the standard library)."""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime
from importlib import resources
from pathlib import Path

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts import traces
from pytest_specperf.prompts.traces import BLOCK_TOKENS, load_trace, reusable_share, reusable_tokens
from pytest_specperf.sim import tokenizer as sim_tokenizer

DATA = resources.files("pytest_specperf").joinpath("data", "traces")
MOONCAKE = "builtin:mooncake-conversation"
AZURE = "builtin:azure-conv-2023"


def _mooncake_raw() -> list[dict[str, object]]:
    text = DATA.joinpath("mooncake_conversation_head400.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_mooncake_reads_milliseconds_and_blocks() -> None:
    raw = _mooncake_raw()
    t = load_trace(MOONCAKE)
    assert (t.format, t.unit, len(t.rows)) == ("mooncake", "ms", 400)
    assert [r.at_s for r in t.rows] == [int(r["timestamp"]) / 1000 for r in raw]  # type: ignore[call-overload]
    assert t.span_s == pytest.approx(141.0)
    assert [r.input_length for r in t.rows] == [r["input_length"] for r in raw]
    assert all(len(r.hash_ids or ()) == math.ceil(r.input_length / BLOCK_TOKENS) for r in t.rows)


def test_reusable_share_is_the_traces_own() -> None:
    # The README's figure for the first 200 rows, counted here by hand over the raw ids: blocks seen before.
    raw = _mooncake_raw()[:200]
    seen: set[int] = set()
    repeat = total = 0
    for r in raw:
        for h in r["hash_ids"]:  # type: ignore[attr-defined]
            repeat += h in seen
            total += 1
            seen.add(h)
    rows = list(load_trace(MOONCAKE).rows[:200])
    assert reusable_share(rows) == pytest.approx(repeat / total)
    assert round(100 * repeat / total, 1) == 5.8
    # per row: the leading run of earlier blocks, in tokens, never the whole prompt
    per_row = reusable_tokens(rows)
    assert per_row[0] == 0 and per_row[1] == BLOCK_TOKENS  # row 2 opens with row 1's first block
    assert all(n < r.input_length for n, r in zip(per_row, rows, strict=True))


def test_azure_2023_and_2024_wall_times(tmp_path: Path) -> None:
    text = DATA.joinpath("azure_llm_conv_2023_head300.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    stamps = [datetime.fromisoformat(r["TIMESTAMP"]).timestamp() for r in rows]
    t = load_trace(AZURE)
    assert (t.format, t.unit, len(t.rows)) == ("azure", "datetime", 300)
    assert t.rows[-1].at_s == pytest.approx(stamps[-1] - stamps[0], abs=1e-5)
    assert t.rows[0].input_length == 374 and t.rows[0].output_length == 44
    # 2024's form: the same columns, the time with +00:00
    p = _write(tmp_path, "az24.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
               "2024-05-10 00:00:00.009930+00:00,100,10\n2024-05-10 00:00:01.509930+00:00,200,20\n")
    t24 = load_trace(p)
    assert t24.format == "azure" and [r.at_s for r in t24.rows] == pytest.approx([0.0, 1.5])


def test_burstgpt_skips_and_counts_failed_rows(tmp_path: Path) -> None:
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    lines += [f"{i * 0.5},ChatGPT,{100 + i},{0 if i % 4 == 3 else 20},{120 + i},Conversation log" for i in range(12)]
    t = load_trace(_write(tmp_path, "burst.csv", "\n".join(lines) + "\n"))
    assert (t.format, t.unit, t.skipped, len(t.rows)) == ("burstgpt", "s", 3, 9)
    assert all(r.output_length == 20 for r in t.rows)


def test_plain_csv_with_named_columns(tmp_path: Path) -> None:
    p = _write(tmp_path, "plain.csv", "ts,prompt,answer\n" + "".join(f"{i * 250},{50 + i},{5}\n" for i in range(12)))
    t = load_trace(p, columns={"timestamp": "ts", "input_length": "prompt", "output_length": "answer"},
                   timestamp_unit="ms")
    assert t.format == "csv" and t.span_s == pytest.approx(2.75) and t.rows[3].input_length == 53


@pytest.mark.parametrize(("unit", "named"), [("s", "ms"), ("us", "ms")])
def test_an_implausible_span_names_the_unit(unit: str, named: str) -> None:
    # The 400-row excerpt read in seconds lasts 39 hours; in microseconds 0.14 s: both say to give 'ms'.
    with pytest.raises(ConfigError) as e:
        load_trace(MOONCAKE, timestamp_unit=unit)
    msg = str(e.value)
    assert "\n" not in msg and "implausible" in msg and f"timestamp_unit='{named}'" in msg
    assert ("39.2 h" if unit == "s" else "0.141 s") in msg


def test_plain_numbers_without_a_unit_are_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, "p.jsonl", "".join(json.dumps({"timestamp": i, "input_length": 9, "output_length": 3}) + "\n"
                                           for i in range(3)))
    with pytest.raises(ConfigError, match="does not say its timestamps' unit; give timestamp_unit="):
        load_trace(p, format="jsonl")


@pytest.mark.parametrize(("body", "needle"), [
    ("timestamp,input_length\n0,5\n", "no column 'output_length'"),
    ("timestamp,input_length,output_length\n0,5,3\n2,5,3\n1,5,3\n", "row 4: timestamp 1 is earlier than the row "
                                                                     "before; sort the trace by its timestamp"),
    ("timestamp,input_length,output_length\n0,-5,3\n", "row 2: input_length '-5' must be a whole, non-negative"),
    ("timestamp,input_length,output_length\n0,5,0\n", "row 2: output_length is 0"),
    ("timestamp,input_length,output_length,hash_ids\n0,1100,3,\"[1, 2]\"\n",
     "row 2: 2 hash_ids cover 1024 tokens, fewer than input_length 1100 (3 blocks of 512)"),
])
def test_input_mistakes_are_one_line_errors_with_file_and_row(tmp_path: Path, body: str, needle: str) -> None:
    p = _write(tmp_path, "bad.csv", body)
    with pytest.raises(ConfigError) as e:
        load_trace(p, timestamp_unit="s")
    msg = str(e.value)
    assert "\n" not in msg and p in msg and needle in msg


def test_speed_and_window_shape_the_schedule() -> None:
    rows = load_trace(MOONCAKE).rows
    spec = build_spec("replay", {"trace": MOONCAKE, "speed": 2, "start_s": 10, "duration_s": 20})
    mine = [r for r in rows if 10 <= r.at_s < 30]
    assert [r.row for r in spec.rows()] == [r.row for r in mine]
    # 2 = twice as fast: the trace's gaps halved, from the window's first row
    assert spec.schedule() == pytest.approx([(r.at_s - mine[0].at_s) / 2 for r in mine])


def test_spec_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no row"):
        build_spec("replay", {"trace": MOONCAKE, "start_s": 500})
    with pytest.raises(ConfigError, match="raise speed or raise budget_s"):
        build_spec("replay", {"trace": MOONCAKE, "speed": 0.1})
    with pytest.raises(ConfigError, match="no such file"):
        build_spec("replay", {"trace": "nothere.jsonl"}, base=tmp_path)
    with pytest.raises(ConfigError, match="unknown bucket"):
        build_spec("replay", {"trace": MOONCAKE, "max_ttft_p90_s": {"huge": 1}})


def test_a_last_block_of_a_few_tokens_moves_the_cut_into_an_earlier_block_at_little_counting() -> None:
    # A row whose leading blocks alone count past its input_length (its last block a few tokens, its others longer
    # than BLOCK_TOKENS): the cut moves into an earlier block, still exactly input_length as the counter says, the
    # earlier blocks' text kept, and sized like any row (that block alone, one count of the whole to confirm),
    # not by a search counting the whole prompt at every step.
    def count(text: str) -> int:  # the simulator's tokenizer, as its /tokenize counts a completions prompt
        return len(sim_tokenizer.completion_prompt_ids(text))

    salt = 7
    pieces, _ = traces._calibrate("prose", count, salt)
    blocks = traces._Blocks("prose", pieces, salt)
    ids = tuple(range(11, 19))
    seven = count("".join(blocks.text(h) for h in ids[:7]))
    row = traces.TraceRow(row=1, at_s=0.0, input_length=seven - 3, output_length=8, hash_ids=ids)
    counted: list[int] = []

    def counting(text: str) -> int:
        counted.append(len(text))
        return count(text)

    [prompt] = traces.build_trace_prompts([row], counting, salt=salt, workers=1)
    assert count(prompt) == row.input_length
    six = "".join(blocks.text(h) for h in ids[:6])
    assert prompt.startswith(six) and not prompt.startswith(six + blocks.text(ids[6]))
    # past the three calibration counts: the prompt's length counted three times (seven kept blocks, then six, then
    # the whole to confirm), the rest one block's; the whole search counted the whole prompt at each of its steps
    assert sum(1 for n in counted[3:] if n > len(prompt) // 2) == 3, counted
