"""The one writer of a case's failed verdict (``compare.verdicts.fail``): every gate joins its reasons one way, the
gate a case asked for leads, and a case that could not be measured keeps its verdict."""

from __future__ import annotations

from support.result_json import full

from pytest_specperf.cases.results import ErrorRecord, Result
from pytest_specperf.cases.saved_results import load_result
from pytest_specperf.compare import verdicts


def _case(verdict: str, reason: str) -> Result:
    return load_result(full({"nodeid": "t::c", "kind": "sustained", "verdict": verdict, "reason": reason}))


def test_reasons_follow_the_prior_one_or_lead_it() -> None:
    after = _case("failed", "decode below min_tps")
    verdicts.fail(after, ["decode_tps -12% vs baseline"])
    assert (after.verdict, after.reason) == ("failed", "decode below min_tps; decode_tps -12% vs baseline")
    first = _case("failed", "decode below min_tps")
    verdicts.fail(first, ["B slower for users from 8 users", "at 16 users: below"], first=True)
    assert first.reason == "B slower for users from 8 users; at 16 users: below; decode below min_tps"
    fresh = _case("passed", "")
    verdicts.fail(fresh, ["ttft_s +40%"])
    assert (fresh.verdict, fresh.reason) == ("failed", "ttft_s +40%")


def test_no_reason_changes_nothing_and_an_error_keeps_its_verdict() -> None:
    kept = _case("passed", "")
    verdicts.fail(kept, [])
    assert (kept.verdict, kept.reason) == ("passed", "")
    error = ErrorRecord(nodeid="t::e", kind="sustained", reason="server down")
    verdicts.fail(error, ["decode_tps -50%"])
    assert (error.verdict, error.reason) == ("error", "server down")
