"""Stash keys and the warning class every part of the pytest layer shares, defined together before use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.result_view import ResultView
from pytest_specperf.cases.results import Recorded, is_error
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.run.target import EndpointSession, SharedStart
from pytest_specperf.settings import Settings
from pytest_specperf.storage import saved_runs as storage

if TYPE_CHECKING:
    # The history (its judging stack: 0.3 s of imports) loads only in a run that uses it (hooks.pytest_configure).
    from pytest_specperf.history.session import HistorySession

SETTINGS = pytest.StashKey[Settings]()
SESSION = pytest.StashKey[EndpointSession]()
AB_A = pytest.StashKey[EndpointSession]()  # --specperf-ab: SESSION is B (the candidate), this is A
ARMS = pytest.StashKey[dict[str, EndpointSession]]()  # --specperf-arms: name -> session; SESSION is the baseline's
BASELINE = pytest.StashKey[list[Recorded]]()
BASELINE_RUN = pytest.StashKey[storage.Run]()
BASELINE_DIFFS = pytest.StashKey[list[str]]()  # how the baseline was measured unlike this run
# --specperf-history (gates and records) or --specperf-save (records)
HISTORY: pytest.StashKey[HistorySession] = pytest.StashKey()
HISTORY_WARNED = pytest.StashKey[bool]()  # this process has shown its history error once
SHARED = pytest.StashKey[SharedStart]()  # xdist controller: starts the endpoint when a worker first needs it



class SpecperfWarning(pytest.PytestWarning):
    """A comparison too noisy to decide, a baseline that could not be read, and the like."""


SPEC = pytest.StashKey[CaseSpec]()
RESULTS = pytest.StashKey[list[Recorded]]()
PROP = "specperf"  # user_properties key carrying a result as plain data (to_dict): what xdist can send


def carried(report: pytest.TestReport) -> list[dict[str, Any]]:
    """The results a report carries, as the plain data they travel as."""
    return [v for k, v in report.user_properties if k == PROP and isinstance(v, dict)]


def results_of(report: pytest.TestReport) -> list[Recorded]:
    """The results a report carries, as records (``saved_results.load_record``, the edge)."""
    return [load_record(v) for v in carried(report)]


__all__ = ["Recorded", "is_error"]  # the pytest layer's names for the record a case leaves, and its error test


RESULT_OBJ = pytest.StashKey[ResultView]()
SENT = pytest.StashKey[int]()
DIRECT_ERROR = pytest.StashKey[bool]()
