"""Writing a run into the history and reading a case's past back: the only SQL outside the schema.

Never imports pytest. A run is written in one transaction (its row, one row per case and sub-case, one per
trial value of each gated metric), so a run is in the history whole or not at all, and concurrent writers
(parallel CI jobs) each add their own run. Each case row carries its set-up's fingerprint (model, server kind
and what the case asks: kind, ctx, tokens, concurrency, ...): a case's history is read per fingerprint, so runs
of another model, server or configuration are kept apart, and named.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_specperf.cases import figures
from pytest_specperf.cases.figures import TRIAL_METRICS, Case, trial_figures
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.result_parts import RowFigures, SweepPoint, case_key, unit_key
from pytest_specperf.cases.results import (
    ErrorRecord,
    LoadLevel,
    LoadSweepResult,
    RateResult,
    Recorded,
    Result,
    SessionResult,
    SustainedResult,
)
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.storage.store import Store

#: what makes two runs of a case measure the same thing: the server and model, and what the case asks.
#: The server's version is not here on purpose: a new version is the deploy the history gates.
#: ``cases.held``: the unit failed its history gate and is left out of later predictions; or it failed it and its
#: change was accepted since (judged against again). 0: it did not fail its history gate.
HELD, RELEASED = 1, 2

SETUP_KEYS = ("model", "server", "kind", "ctx", "tokens", "content", "temperature", "concurrency", "users", "short",
              "long", "rate", "rates", "prompts", "max_tokens",
              # how lengths were drawn (two distributions with the same medians differ) and which trace window
              # a replay sent, at what speed
              "drawn", "trace", "speed", "start_s", "window_s")


@dataclass
class CaseRun:
    """One run of one case (or sub-case) as the history holds it."""

    run_id: int
    created: str
    name: str
    commit_id: str | None
    commit_time: str | None
    server_version: str | None
    fingerprint: str
    setup: dict[str, Any]
    verdict: str | None
    partial: str
    trials: dict[str, list[float]] = field(default_factory=dict)
    held: bool = False  # failed its history gate, change not accepted: left out of the prediction
    failed_gate: bool = False  # failed its history gate (held, or released when its change was accepted)
    accepted: str | None = None  # when its change was accepted: the case's history starts anew here
    nodeid: str = ""  # its case's node id (the key's part before ``@ctx=``/``@users=``; a node id may hold an @)
    rows: list[list[RowFigures]] | None = None  # a replay's, each trial's answered rows (``case_history(rows_of=)``)

    @property
    def commit(self) -> str:
        """The short commit id, or '-'."""
        return (self.commit_id or "-")[:12]


def setup_of(form: dict[str, Any], run_meta: dict[str, Any]) -> dict[str, Any]:
    """The set-up a unit's fingerprint is made of, from its stored form (``Unit.form``; missing keys left out)."""
    out = {k: form[k] for k in SETUP_KEYS if form.get(k) is not None}  # not result data: the row's stored form
    for k in ("model", "server"):
        out.setdefault(k, run_meta.get(k))
    return out


def fingerprint(setup: dict[str, Any]) -> str:
    """A short stable hash of a set-up."""
    return hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _form(result: Result, nodeid: str, case: Case) -> dict[str, Any]:
    """A unit's JSON form as the history stores its set-up (``setup_of``): a load level as a sustained case at its
    users, a sweep point as a two-point case, each with its case's model, server and drawn lengths."""
    if isinstance(case, LoadLevel):
        form = {**to_dict(case), "kind": "sustained", "nodeid": nodeid, "users": case.concurrency}
    elif isinstance(case, SweepPoint):
        form = {**to_dict(case), "kind": "two_point", "nodeid": nodeid}
    else:
        form = to_dict(case)
    return {"drawn": result.drawn, **form, "model": result.model, "server": result.server}


#: where a comparison finds a unit: (nodeid, sweep ctx, users), as ``compare.samples.Key`` keys a side's units
At = tuple[str, int | None, int | None]


@dataclass(frozen=True)
class Unit:
    """One comparable unit of a result as the history keeps it: its key, its case's node id, where comparisons find
    it (``at``: a session's users there too, which its key leaves out), its record (what the gate reads) and its
    stored JSON form (what the set-up fingerprint is made of)."""

    key: str
    nodeid: str
    at: At
    case: Case
    form: dict[str, Any]

    @property
    def verdict(self) -> str | None:
        """The unit's own verdict (a case's, a load level's); None for a sweep point, which has none."""
        return self.case.verdict if isinstance(self.case, Result | LoadLevel) else None


def units(results: Iterable[Recorded]) -> list[Unit]:
    """Each comparable unit of the results (a case, a sweep point, a load level); errored cases are left out (they
    measured nothing)."""
    out = []
    for r in results:
        if isinstance(r, ErrorRecord) or r.verdict == "error":
            continue
        for nodeid, ctx, case in figures.sub_cases(r):
            users = figures.users_of(case)
            form = _form(r, nodeid, case)
            # only a load sweep's levels are told apart by their users: a session is one unit
            key = case_key(nodeid, ctx, users if isinstance(r, LoadSweepResult) else None)
            out.append(Unit(key, nodeid, (nodeid, ctx, users), case, form))
    return out


@dataclass(frozen=True)
class UnitPast:
    """One unit of a result with its past as the history gate reads it: the unit's set-up and gated trials now, and
    the earlier runs of the case split by set-up (``judged_runs``): those it is judged against, those held out
    after failing the gate, and those of another set-up."""

    unit: Unit
    setup: dict[str, Any]
    trials: dict[str, list[float]]
    same: list[CaseRun]
    held: list[CaseRun]
    others: list[CaseRun]
    shared_rows: str = ""  # a replay's: which latencies were taken over the trace rows every run answered


def pasts(store: Store, now: Iterable[Unit], run_meta: dict[str, Any]) -> list[UnitPast]:
    """Each unit of a result (``units``) with its past in the history (``UnitPast``): what the history gate decides
    on, read in one pass."""
    out = []
    for u in now:
        # what the unit is now (its set-up, fingerprint and gated trials), then what the store holds of its past
        setup = setup_of(u.form, run_meta)
        fp, trials, rows = fingerprint(setup), gated_trials(u.case), figures.trial_rows(u.case)
        past = case_history(store, u.key, rows_of=fp if rows is not None else None)
        same, held = judged_runs([h for h in past if h.fingerprint == fp])
        # a replay's latencies, now and in each earlier run, over the trace rows all of them answered
        shared = figures.shared_trials(rows, [h.rows for h in same], trials) if rows is not None and same else None
        if shared is not None:
            trials = {**trials, **shared.now}
            same = [dataclasses.replace(h, trials={**h.trials, **t}) for h, t in zip(same, shared.before, strict=True)]
        out.append(UnitPast(u, setup, trials, same, held, [h for h in past if h.fingerprint != fp],
                            shared.note if shared is not None else ""))
    return out



@dataclass(frozen=True)
class Earlier:
    """An earlier run's result of a case as the history gate reads it after deciding: the whole record (what a
    short history's baseline rule judges against) and its units (``units``: what a change's cause is read from)."""

    record: Recorded
    units: list[Unit]


def earlier(store: Store, runs: Iterable[CaseRun]) -> dict[int, Earlier]:
    """The result each of ``runs`` (earlier runs of one case, as ``pasts`` gives them) holds of its case, by run id;
    a run whose result is missing is left out."""
    found = {h.run_id: record_of(store, h.run_id, h.nodeid) for h in sorted(runs, key=lambda h: h.run_id)}
    return {i: Earlier(r, units([r])) for i, r in found.items() if r is not None}


def gated_trials(case: Case) -> dict[str, list[float]]:
    """Per-trial values of each metric the gate judges this case on: a case measured as whole trials (``repeat=``
    of a rate case, a session, a load case: its ``trials``) has each trial's value; a load case or level run once,
    its one trial's (the median user, the aggregate: its streams share the engine's batched steps, so they are one
    sample, not one each); any other ``figures.trials``'s (a single-user sustained case: its streams')."""
    out = {}
    whole = case.trials if isinstance(case, SustainedResult | LoadLevel | RateResult | SessionResult) else None
    load = isinstance(case, LoadLevel) or (isinstance(case, SustainedResult) and case.concurrency > 1)
    for metric in figures.metrics_for(case):
        if metric not in figures.DIRECTIONS:
            continue
        if whole:
            values = [v for t in whole for v in [figures.figure(t, metric)] if v is not None]
        elif load and metric in TRIAL_METRICS:
            values = [v for f in trial_figures(case) for v in [f[metric]] if v is not None]
        else:
            values = figures.trials(case, metric)
        if values:
            out[metric] = values
    return out


def held_keys(results: Iterable[Recorded]) -> set[str]:
    """The units that failed their history gate: a regressed history entry, or (a unit without one, judged by the
    baseline rule while its history is short) a regressed comparison (``history_comparisons`` where the run also
    named a baseline, whose own regressed ``comparisons`` hold their units too). An A/B result's comparisons are
    B's against A, not against the history: they hold nothing."""
    out: set[str] = set()
    for r in results:
        if isinstance(r, ErrorRecord):
            continue
        entries = r.history or []
        judged = {e.key for e in entries}
        out |= {e.key for e in entries if e.verdict == "regressed"}
        if r.ab is not None:
            continue
        # a comparison's key names a session's users; the unit (as ``units`` keys it) does not
        keyed = [unit_key(r.kind, c.nodeid, c.ctx, c.users) for c in r.comparisons or [] if c.verdict == "regressed"]
        keyed += [unit_key(r.kind, c.nodeid, c.ctx, c.users) for c in r.history_comparisons or []
                  if c.verdict == "regressed"]  # a short history's, kept apart from a named baseline's
        out |= {key for key in keyed if key not in judged}
    return out


def _run_row(meta: dict[str, Any], source: str | None) -> tuple[Any, ...]:
    """The runs table's row of a run's metadata (as ``storage.run_meta`` builds it), which is not result data."""
    commit = c if isinstance(c := meta.get("commit"), dict) else {}  # not result data
    machine = m if isinstance(m := meta.get("machine"), dict) else {}  # not result data
    return (str(meta.get("created") or ""), str(meta.get("name") or ""),  # not result data
            commit.get("id"), commit.get("branch"), commit.get("time"),  # not result data
            int(bool(commit.get("dirty"))),  # not result data
            meta.get("model"), meta.get("server"), meta.get("server_version"),  # not result data
            meta.get("plugin_version"), machine.get("host_id"), json.dumps(machine, default=str),  # not result data
            json.dumps(meta.get("job") or {}, default=str), str(meta.get("partial") or ""), source)  # not result data


def record_run(store: Store, results: Iterable[Recorded], meta: dict[str, Any], *,
               source: str | None = None, gated: bool = False) -> int | None:
    """Add one run (its ``meta`` as ``storage.run_meta`` builds it); returns its id, or None when ``source`` (an
    imported file) is already in the history. ``gated``: the run was judged against this history, so the units
    that failed it are held out of later predictions (``held_keys``). Records become JSON here, at the store's
    edge; ``record_of`` turns them back."""
    recorded = list(results)
    data = [to_dict(r) for r in recorded]
    held = held_keys(recorded) if gated else set()
    row = _run_row(meta, source)
    rows = units(recorded)
    try:
        with store.transaction() as cur:
            if source is not None and store.execute(cur, "SELECT id FROM runs WHERE source = ?",
                                                    (source,)).fetchall():
                return None
            store.execute(cur, """INSERT INTO runs (created, name, commit_id, branch, commit_time, dirty, model, server,
                server_version, plugin_version, host_id, machine, job, partial, source)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""", row)
            run_id = int(cur.fetchone()[0])
            for r, d in zip(recorded, data, strict=True):
                if r.nodeid:
                    store.execute(cur, "INSERT INTO results (run_id, nodeid, result) VALUES (?, ?, ?)",
                                  (run_id, r.nodeid, json.dumps(d, default=str)))
            for u in rows:
                setup = setup_of(u.form, meta)
                store.execute(cur, """INSERT INTO cases (run_id, case_key, nodeid, fingerprint, setup, verdict, held)
                    VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id""", (
                    run_id, u.key, u.nodeid or u.key, fingerprint(setup), json.dumps(setup, default=str),
                    u.verdict, HELD if u.key in held else 0))
                case_id = int(cur.fetchone()[0])
                values = [(case_id, metric, i, float(v)) for metric, vs in gated_trials(u.case).items()
                          for i, v in enumerate(vs)]
                if values:
                    cur.executemany(store.sql("INSERT INTO trials (case_id, metric, trial, value) VALUES (?, ?, ?, ?)"),
                                    values)
            return run_id
    except Exception as exc:
        raise store.error("cannot record the run", exc) from None


def case_history(store: Store, key: str, *, rows_of: str | None = None) -> list[CaseRun]:
    """Every recorded run of case ``key``, any set-up, oldest first; with ``rows_of`` (a fingerprint), the runs of
    that set-up carry their replay trials' answered rows, read from each one's stored result (``CaseRun.rows``):
    only they are judged against, so no other run's result is read."""
    try:
        cases = store.query("""SELECT c.id, r.id, r.created, r.name, r.commit_id, r.commit_time, r.server_version,
            c.fingerprint, c.setup, c.verdict, r.partial, c.held, c.accepted, c.nodeid
            FROM cases c JOIN runs r ON r.id = c.run_id WHERE c.case_key = ? ORDER BY r.id, c.id""", (key,))
        values = store.query("""SELECT t.case_id, t.metric, t.value FROM trials t JOIN cases c ON c.id = t.case_id
            WHERE c.case_key = ? ORDER BY t.case_id, t.metric, t.trial""", (key,))
    except Exception as exc:
        raise store.error(f"cannot read the history of {key}", exc) from None
    by_case: dict[int, dict[str, list[float]]] = {}
    for case_id, metric, value in values:
        by_case.setdefault(int(case_id), {}).setdefault(str(metric), []).append(float(value))
    out = []
    for row in cases:
        out.append(CaseRun(run_id=int(row[1]), created=str(row[2]), name=str(row[3] or ""), commit_id=row[4],
                           commit_time=row[5], server_version=row[6], fingerprint=str(row[7]),
                           setup=json.loads(row[8]), verdict=row[9], partial=str(row[10] or ""),
                           trials=by_case.get(int(row[0]), {}), held=int(row[11]) == HELD, failed_gate=int(row[11]) > 0,
                           accepted=row[12], nodeid=str(row[13] or "")))
    for h in (h for h in out if h.fingerprint == rows_of) if rows_of is not None else ():
        record = record_of(store, h.run_id, h.nodeid)  # a replay has no sub-cases: its record is the unit
        h.rows = figures.trial_rows(record) if record is not None else None
    return out


def result_of(store: Store, run_id: int, nodeid: str) -> dict[str, Any] | None:
    """The whole result of ``nodeid`` in run ``run_id``, as stored (its JSON; ``record_of`` gives its record)."""
    try:
        rows = store.query("SELECT result FROM results WHERE run_id = ? AND nodeid = ?", (run_id, nodeid))
    except Exception as exc:
        raise store.error(f"cannot read the result of {nodeid}", exc) from None
    data = json.loads(rows[0][0]) if rows else None
    return data if isinstance(data, dict) else None


def record_of(store: Store, run_id: int, nodeid: str) -> Recorded | None:
    """The whole result of ``nodeid`` in run ``run_id`` as its record (what the baseline rule judges against): the
    history's one place where a stored row becomes a record (``saved_results.load_record``)."""
    data = result_of(store, run_id, nodeid)
    return None if data is None else load_record(data)


def runs(store: Store) -> list[dict[str, Any]]:
    """Every recorded run, oldest first: id, created, name, commit, server, model and its number of cases."""
    try:
        rows = store.query("""SELECT r.id, r.created, r.name, r.commit_id, r.dirty, r.server, r.server_version,
            r.model, r.partial, COUNT(c.id) FROM runs r LEFT JOIN cases c ON c.run_id = r.id
            GROUP BY r.id, r.created, r.name, r.commit_id, r.dirty, r.server, r.server_version, r.model, r.partial
            ORDER BY r.id""")
    except Exception as exc:
        raise store.error("cannot list its runs", exc) from None
    keys = ("id", "created", "name", "commit_id", "dirty", "server", "server_version", "model", "partial", "cases")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def case_keys(store: Store) -> list[str]:
    """Every case key the history holds, sorted."""
    try:
        return [str(r[0]) for r in store.query("SELECT DISTINCT case_key FROM cases ORDER BY case_key")]
    except Exception as exc:
        raise store.error("cannot list its cases", exc) from None


def judged_runs(runs: list[CaseRun]) -> tuple[list[CaseRun], list[CaseRun]]:
    """Of one set-up's runs of a case (oldest first): those its gate judges against (from the last accepted
    change on, neither partial nor errored nor held) and those held out (failed their gate, not accepted)."""
    start = max((i for i, h in enumerate(runs) if h.accepted), default=0)
    usable = [h for h in runs[start:] if not h.partial and h.verdict != "error"]
    return [h for h in usable if not h.held], [h for h in usable if h.held]


def held_runs(store: Store) -> list[tuple[int, int, str, str]]:
    """Every held unit: ``(case row id, run id, case key, fingerprint)``, oldest first."""
    try:
        rows = store.query("""SELECT c.id, c.run_id, c.case_key, c.fingerprint FROM cases c WHERE c.held = ?
            ORDER BY c.run_id, c.id""", (HELD,))
    except Exception as exc:
        raise store.error("cannot list its held runs", exc) from None
    return [(int(a), int(b), str(c), str(d)) for a, b, c, d in rows]


def accept(store: Store, run_id: int, keys: Iterable[str] | None = None, *, when: str) -> list[tuple[str, list[int]]]:
    """Accept the change of run ``run_id``'s held units (those of ``keys``, or all): each starts its case's history
    anew at that run, and the other held runs of its case and set-up since its last accepted change are released
    (the later ones measure the accepted level; the earlier ones, the same change first seen there, would else stay
    held for good). Returns ``(case key, released run ids)`` per accepted unit; [] when the run holds none."""
    wanted = None if keys is None else set(keys)
    held = held_runs(store)
    chosen = [(cid, key, fp) for cid, run, key, fp in held if run == run_id and (wanted is None or key in wanted)]
    out = []
    try:
        with store.transaction() as cur:
            for cid, key, fp in chosen:
                since = max((int(r[0]) for r in store.execute(
                    cur, "SELECT run_id, accepted FROM cases WHERE case_key = ? AND fingerprint = ? AND run_id < ?",
                    (key, fp, run_id)).fetchall() if r[1]), default=0)
                store.execute(cur, "UPDATE cases SET held = ?, accepted = ? WHERE id = ?", (RELEASED, when, cid))
                others = [(c, run) for c, run, k, f in held if k == key and f == fp and run > since and run != run_id]
                for c, _ in others:
                    store.execute(cur, "UPDATE cases SET held = ? WHERE id = ?", (RELEASED, c))
                out.append((key, [run for _, run in others]))
    except Exception as exc:
        raise store.error(f"cannot accept the change of run {run_id}", exc) from None
    return out


def run_verdicts(store: Store) -> dict[int, list[tuple[str, str, str]]]:
    """Per run id, ``(nodeid, verdict, reason)`` of each of its cases, as their stored results say."""
    try:
        rows = store.query("SELECT run_id, nodeid, result FROM results ORDER BY run_id, nodeid")
    except Exception as exc:
        raise store.error("cannot read its verdicts", exc) from None
    out: dict[int, list[tuple[str, str, str]]] = {}
    for run_id, nodeid, text in rows:
        # Two keys of the stored JSON, read here at the store's edge: building every run's whole record for a
        # listing would cost a conversion per stored result, and a kind of a newer version would lose its verdict.
        try:
            data = json.loads(text)
        except ValueError:  # a damaged row
            data = {}
        data = data if isinstance(data, dict) else {}
        verdict, reason = str(data.get("verdict") or "-"), str(data.get("reason") or "")
        out.setdefault(int(run_id), []).append((str(nodeid), verdict, reason))
    return out


def nodeids(store: Store) -> list[str]:
    """Every case's node id the history holds, sorted."""
    try:
        return [str(r[0]) for r in store.query("SELECT DISTINCT nodeid FROM cases ORDER BY nodeid")]
    except Exception as exc:
        raise store.error("cannot list its cases", exc) from None
