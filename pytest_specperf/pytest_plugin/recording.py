"""Measuring a test's perf case and recording its result: used by the hooks and the fixture alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_view import ResultView
from pytest_specperf.cases.results import Result
from pytest_specperf.compare import gates as gating
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.measure import modes
from pytest_specperf.pytest_plugin.keys import (
    AB_A,
    ARMS,
    BASELINE,
    BASELINE_DIFFS,
    BASELINE_RUN,
    HISTORY,
    HISTORY_WARNED,
    RESULT_OBJ,
    RESULTS,
    SESSION,
    SETTINGS,
    SPEC,
    Recorded,
    SpecperfWarning,
)
from pytest_specperf.report.table import one_trial_undecided
from pytest_specperf.run import registry
from pytest_specperf.run.target import EndpointSession
from pytest_specperf.settings import Settings
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.urls import redact_text


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")

def storage_folder(config: pytest.Config, settings: Settings) -> Path:
    """Saved runs live relative to the rootdir, not the cwd, so every invocation finds the same ones."""
    return config.rootpath / settings.storage

def baseline_differences(config: pytest.Config, session: EndpointSession) -> list[str]:
    """How the saved baseline was measured unlike this run (once per run, after the endpoint is known)."""
    if BASELINE_DIFFS not in config.stash:
        run = config.stash.get(BASELINE_RUN, None)
        meta = _session_meta(session) if run else {}
        config.stash[BASELINE_DIFFS] = storage.fingerprint_diff(run, meta) if run else []
    return config.stash[BASELINE_DIFFS]

def _session_meta(session: EndpointSession) -> dict[str, Any]:
    """This run's identity before any result exists: what the endpoint says about itself."""
    info = session.client.info
    return storage.run_meta(endpoint=session.client.url, model=session.client.model,
                            server=info.kind if info else None,
                            server_version=info.details.get("version") if info else None)

def keep_result(item: pytest.Item, result: Recorded) -> None:
    if isinstance(result, Result) and result.verdict in ("passed", "failed"):
        hooks_verdict(item.config, result)
    item.stash.setdefault(RESULTS, []).append(result)

def hooks_verdict(config: pytest.Config, result: Result) -> None:
    """Let the project's ``pytest_specperf_verdict`` hooks veto or annotate a judged case.

    The hooks get the result as the documented dict (a copy: they change it by what they return)."""
    for change in config.hook.pytest_specperf_verdict(config=config, result=to_dict(result)):
        if not isinstance(change, dict):
            continue
        why = str(change.get("reason") or "no reason given")
        verdict = change.get("verdict")
        if verdict in ("passed", "failed") and verdict != result.verdict:
            was = result.verdict + (f": {result.reason}" if result.reason else "")
            result.verdict = verdict
            result.reason = f"{verdict} by pytest_specperf_verdict ({why}); the plugin said {was}"
        if change.get("note"):
            result.notes.append(str(change["note"]))

def _plan(item: pytest.Item, spec: CaseSpec, gate: gating.Gate) -> modes.Plan:
    """What measuring ``item``'s case needs, from the run's options: each endpoint's runner, the stored run."""
    config, nodeid = item.config, item.nodeid
    session, settings = config.stash[SESSION], config.stash[SETTINGS]

    def on(s: EndpointSession) -> modes.Measure:
        return lambda case, until: s.runner.run(case, nodeid, until=until)

    a = config.stash.get(AB_A, None)
    arms = config.stash.get(ARMS, None)
    baseline = config.stash.get(BASELINE, None)
    return modes.Plan(
        nodeid=nodeid, spec=spec, gate=gate, here=on(session), a=on(a) if a is not None else None,
        arms={n: on(s) for n, s in arms.items()} if arms is not None else None,
        arms_baseline=settings.arms_baseline, arms_tokens=dict(settings.arms_tokens or ()) or None,
        ab_trials=settings.ab_trials, baseline=baseline,
        differences=baseline_differences(config, session) if baseline is not None else [],
        strict=settings.compare_strict, save=settings.save is not None)


def measure_marked(item: pytest.Item) -> None:
    """Measure the item's marker case once (``measure.modes``: the mode the run's options pick), judge it against
    its history where it is judged against stored runs; a run that cannot measure becomes a one-line setup
    error."""
    spec = item.stash.get(SPEC, None)
    if spec is None:
        return None
    config = item.config
    settings = config.stash[SETTINGS]
    try:
        plan = _plan(item, spec, gating.Gate(settings.max_regression, settings.inconclusive))
        mode = modes.MODES[modes.mode_of(plan)](plan)
        record, notes = mode.run()
        if mode.stored:
            notes = [*notes, *_against_history(config, record, spec.max_regression or settings.max_regression)]
    except (MeasurementError, ConfigError) as exc:
        reason = str(exc)
    else:
        reason = ""
    if not reason:
        # a one-trial comparison that cannot decide is said once per run, under the table (table.one_trial_note)
        # (the named baseline's and, kept apart from them, a short history's against its latest run)
        quiet = {c.reason for c in [*(record.comparisons or []), *(record.history_comparisons or [])]
                 if one_trial_undecided(c)}
        for note in [*notes, *record.warnings]:
            if note not in quiet:
                item.warn(SpecperfWarning(note))
        keep_result(item, record)
        item.stash[RESULT_OBJ] = ResultView.of(record)
        return None
    # failed outside the except block, so no "during handling of the above exception" chain
    item.stash.setdefault(RESULTS, []).append(registry.error_record(item.nodeid, spec, reason))
    tail = config.stash[SESSION].log_tail()
    pytest.fail(f"could not measure: {reason}" + (f"\nengine log tail:\n{tail}" if tail else ""), pytrace=False)

def _against_history(config: pytest.Config, record: Result, max_regression: float) -> list[str]:
    """--specperf-history: judge the case against its history; an unusable history is one warning per process."""
    history = config.stash.get(HISTORY, None)
    if history is None or not history.gating:
        return []
    notes = history.judge(record, max_regression=max_regression, inconclusive=config.stash[SETTINGS].inconclusive)
    if history.error is not None and not config.stash.get(HISTORY_WARNED, False):
        config.stash[HISTORY_WARNED] = True
        notes.append(f"--specperf-history: {redact_text(history.error)}; cases are judged without their history")
    return notes


def failed_reason(item: pytest.Item) -> str:
    return "; ".join(r.reason for r in item.stash.get(RESULTS, []) if isinstance(r, Result) and r.verdict == "failed")
