"""One result type: ``specperf.result`` and a direct call return the same kind of object, read the same way."""

from __future__ import annotations

import pytest

from pytest_specperf.cases.result_view import ResultView

pytest_plugins = ["pytester"]

CASES = """
import pytest

@pytest.mark.sustained(tokens=64, ctx=64)
def test_both(specperf):
    marked = specperf.result
    direct = specperf.sustained(tokens=64, ctx=64)
    assert type(marked) is type(direct), (type(marked), type(direct))
    for r in (marked, direct):
        assert r.completion_tokens == 64 and r["completion_tokens"] == 64
        assert r.as_dict()["kind"] == "sustained" and "decode_tps" in r
"""


def test_marker_and_direct_call_return_one_type(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--specperf-sim-speed=20")
    result.assert_outcomes(passed=1)


def test_a_misspelt_field_names_the_fields() -> None:
    r = ResultView({"kind": "sustained", "decode_tps": 50.0})
    assert r["decode_tps"] == r.decode_tps == 50.0
    with pytest.raises(AttributeError, match="no result field 'decode_tp'; fields: kind, decode_tps"):
        _ = r.decode_tp
