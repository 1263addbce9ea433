"""``specperf trend``'s change points beside the runs' history gate verdicts (hand-made series, known answers)."""

from __future__ import annotations

from pytest_specperf.history import changepoints as cp
from pytest_specperf.history.trend import at_first_failure

SLOW = -0.12  # oriented log level of a slower deploy
MEANS = [0.0, 0.0, 0.0, SLOW, SLOW, 0.0, 0.0, 0.0]  # runs 3 and 4 slower, back at run 5
FAILED = [False, False, False, True, True, False, False, False]


def test_the_change_back_where_the_failures_end_is_kept() -> None:
    found = [cp.Change(3, 0.0, SLOW), cp.Change(5, SLOW, 0.0)]
    assert [(c.index, c.before, c.after) for c in at_first_failure(found, FAILED, MEANS)] == [
        (3, 0.0, SLOW), (5, SLOW, 0.0)]


def test_a_change_found_inside_the_failures_is_moved_to_the_first_failing_run() -> None:
    found = [cp.Change(4, 0.0, SLOW), cp.Change(5, SLOW, 0.0)]
    assert [(c.index, c.before, c.after) for c in at_first_failure(found, FAILED, MEANS)] == [
        (3, 0.0, SLOW), (5, SLOW, 0.0)]
