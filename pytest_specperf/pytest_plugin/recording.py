"""Measuring a test's perf case and recording its result: used by the hooks and the fixture alike."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.base import AUTO_MAX_REPEAT, CaseSpec
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_view import ResultView
from pytest_specperf.cases.results import ErrorRecord, Result
from pytest_specperf.compare import crossover, sequential
from pytest_specperf.compare import gates as gating
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.measure import interleaved, repeats
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
from pytest_specperf.run.registry import kind_for
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
        config.stash[BASELINE_DIFFS] = storage.fingerprint_diff(run, _session_meta(session)) if run else []
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

def error_record(item: pytest.Item, spec: CaseSpec, reason: str) -> ErrorRecord:
    # The ctx the case asked for: a session's first message (not its last turn's whole history); any other kind
    # its largest prompt as the kind says (a sweep's longest ctx, a prompt file's longest prompt), since every
    # spec inherits a default ctx that a sweep or a prompt file never uses.
    ctx = spec.ctx if spec.KIND == "session" else kind_for(spec).context_needed(spec)[0]
    # concurrency and users: an errored load case or session still says how many users it was for
    concurrency = getattr(spec, "concurrency", None)
    return ErrorRecord(nodeid=item.nodeid, kind=spec.KIND, ctx=ctx, content=spec.content, reason=reason,
                       tokens=getattr(spec, "tokens", None), short=getattr(spec, "short", None),
                       long=getattr(spec, "long", None),
                       concurrency=list(concurrency) if isinstance(concurrency, tuple) else concurrency,
                       users=getattr(spec, "users", None), turns=getattr(spec, "turns", None))


def _until(config: pytest.Config, nodeid: str, spec: CaseSpec, gate: gating.Gate) -> sequential.Until | None:
    """What repeat="auto" waits for besides drift: the comparison with the baseline, or a saved run's size."""
    if BASELINE in config.stash:
        baseline: list[Recorded] = config.stash[BASELINE]
        return repeats.until_baseline(gate, nodeid, baseline, spec.max_regression)
    if config.stash[SETTINGS].save is not None:
        return gating.until_saved(gate, spec.max_repeat or AUTO_MAX_REPEAT, spec.max_regression)
    return None


def _run_arms(item: pytest.Item, spec: CaseSpec, gate: gating.Gate) -> tuple[Result, list[str]]:
    """Every arm of --specperf-arms, interleaved; the deployed arm judged against the best per level."""
    config = item.config
    sessions, settings = config.stash[ARMS], config.stash[SETTINGS]
    names = list(sessions)
    deployed = getattr(spec, "deployed", None)
    if deployed is not None and deployed not in sessions:
        raise ConfigError(f"deployed={deployed!r} is not an arm of --specperf-arms; name one of {', '.join(names)}")
    auto = spec.repeat == "auto"
    one = dataclasses.replace(spec, repeat=1, max_repeat=None) if auto else spec  # a trial per round

    def measure(name: str, levels: list[int] | None) -> Result:
        case = one if levels is None or not hasattr(one, "level") else dataclasses.replace(
            one, concurrency=tuple(levels))  # type: ignore[call-arg]  # hasattr(one, "level"): a LoadSweepSpec, which has it
        return sessions[name].runner.run(case, item.nodeid)

    trials = (spec.max_repeat or AUTO_MAX_REPEAT) if auto else settings.ab_trials
    return interleaved.run_arms(measure, names, trials, gate, baseline=settings.arms_baseline or names[0],
                           deployed=deployed, max_loss=getattr(spec, "max_loss_vs_best", None),
                           tokens=dict(settings.arms_tokens or ()) or None, auto=auto)


def arms_unjudged(record: Result, spec: CaseSpec) -> None:
    """Outside arms mode, note that ``max_loss_vs_best`` was not judged, and why."""
    if getattr(spec, "max_loss_vs_best", None) is not None:
        record.notes.append(
            f"max_loss_vs_best {spec.max_loss_vs_best:g} not judged: it compares arms, which needs "  # type: ignore[attr-defined]
            "--specperf-arms=NAME=URL,...")


def measure_marked(item: pytest.Item) -> None:
    """Measure the item's marker case once; a run that cannot measure becomes a one-line setup error."""
    spec = item.stash.get(SPEC, None)
    if spec is None:
        return None
    config = item.config
    session = config.stash[SESSION]
    settings = config.stash[SETTINGS]
    gate = gating.Gate(settings.max_regression, settings.inconclusive)
    notes: list[str] = []
    try:
        auto = spec.repeat == "auto"
        if ARMS in config.stash:
            record, notes = _run_arms(item, spec, gate)
        elif auto and spec.KIND == "load_sweep" and AB_A in config.stash:
            raise ConfigError("repeat='auto' on a load sweep adds trials per level across arms; run the A/B pair "
                              "as --specperf-arms=A=URL_A,B=URL_B, or give the sweep no repeat")
        elif AB_A in config.stash and auto:
            a, one = config.stash[AB_A], dataclasses.replace(spec, repeat=1, max_repeat=None)  # a trial per round
            record, notes = interleaved.run_ab_auto(lambda: a.runner.run(one, item.nodeid),
                                               lambda: session.runner.run(one, item.nodeid),
                                               spec.max_repeat or AUTO_MAX_REPEAT, gate, spec.max_regression)
        elif AB_A in config.stash:
            a = config.stash[AB_A]
            record, notes = interleaved.run_ab(lambda: a.runner.run(spec, item.nodeid),
                                          lambda: session.runner.run(spec, item.nodeid),
                                          settings.ab_trials, gate, spec.max_regression)
        else:
            if repeats.whole_case(spec):  # a case that sends at once: repeat runs it as whole trials
                record = repeats.run_trials(lambda s: session.runner.run(s, item.nodeid), spec, gate,
                                           baseline=config.stash.get(BASELINE, None), nodeid=item.nodeid,
                                           save=settings.save is not None)
            else:
                until = _until(config, item.nodeid, spec, gate) if auto else None
                record = session.runner.run(spec, item.nodeid, until=until)
            record.nodeid = item.nodeid
            crossover.unjudged(record)
            arms_unjudged(record, spec)
            if auto and BASELINE not in config.stash and settings.save is not None and not repeats.whole_case(spec):
                notes = gating.saved_notes(gate, record, spec.max_repeat or AUTO_MAX_REPEAT, spec.max_regression)
            if BASELINE in config.stash:
                baseline: list[Recorded] = config.stash[BASELINE]
                notes = gating.against_baseline(gate, record, baseline, spec.max_regression,
                                                baseline_differences(config, session), settings.compare_strict,
                                                auto=auto)
            notes = [*notes, *_against_history(config, record, spec.max_regression or settings.max_regression)]
    except (MeasurementError, ConfigError) as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:  # failed outside the except block, so no "during handling of the above exception" chain
        keep_result(item, error_record(item, spec, reason))
        tail = session.log_tail()
        pytest.fail(f"could not measure: {reason}" + (f"\nengine log tail:\n{tail}" if tail else ""), pytrace=False)
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
