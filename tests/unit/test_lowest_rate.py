"""An open-loop case's reference (its figures at one request at a time) is a record: the JSON it was written as
loads and writes back unchanged, the empty one included, and the cause of a miss reads it by field."""

from __future__ import annotations

import json

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import LowestRate
from pytest_specperf.cases.saved_results import load_part
from pytest_specperf.run.rate import moved

FULL = {"tokens_per_chunk": 2.5, "step_ms": 20, "tpot_ms": 8.0, "requests": 2, "response_ids": ["a", "b"]}


def test_a_reference_writes_back_the_json_it_was_read_from() -> None:
    for data in (FULL, {}):  # {}: none of its requests was answered
        ref = load_part(data, LowestRate)
        assert json.dumps(to_dict(ref)) == json.dumps(data)
    assert load_part({}, LowestRate) == LowestRate()


def test_the_cause_of_a_miss_reads_the_reference() -> None:
    ref = load_part(FULL, LowestRate)
    assert moved(ref, 1.5, 30.0) == "vs the lowest rate accepted tokens/step fell 2.50 -> 1.50 and step time rose " \
                                    "20.0 -> 30.0 ms"
    assert moved(ref, 2.5, 20.0).startswith("vs the lowest rate neither moved")
    assert moved(LowestRate(), 1.5, 30.0) == moved(None, 1.5, 30.0) == ""  # nothing answered: no cause to name
