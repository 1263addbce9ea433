"""The terminal's end-of-run section: failures first, then the table; its cells are shared by the Markdown."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_specperf.cases.result_parts import ArmsTable, CaseComparison, CategoryFigures, Crossover, Goal, SweepPoint
from pytest_specperf.cases.results import AbSummary, ErrorRecord, LoadLevel, Recorded, Result
from pytest_specperf.cases.saved_results import as_result, has_record, load_part
from pytest_specperf.report import arms_grid
from pytest_specperf.run.load import knee_text

COLUMNS = ("case", "ctx", "tokens", "ttft", "decode tok/s", "early -> late", "drift", "verdict")
#: shown before the verdict when a run has load cases: users per row, and their aggregate output
LOAD_COLUMNS = ("users", "total tok/s")
#: the terminal table's widest line: a row's comparisons, reasons and notes that would pass it go on their own
#: lines under the row, as pytest's short summary lines are
WIDTH = 120
#: the case column's fewest columns where a long test name is cut to fit ``WIDTH`` (the name is said whole under
#: its row), and what marks the cut
MIN_CASE = 16
ELLIPSIS = "..."


def finite_number(v: Any) -> float | None:
    """``v`` as a float if it is a finite number (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _f(v: Any, spec: str = ".1f") -> str:
    x = finite_number(v)
    if x is None:
        return "-"
    text = format(x, spec)
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # never "-0.00"


@dataclass
class Row:
    """What one row of the table (and of the Markdown) is drawn from: a case, a load sweep's level or a prompt
    category. Its fields are the result fields of the same names; one the row's source does not have is None, so
    a level's or a category's row goes through the same cells as a case's."""

    kind: str = ""
    nodeid: str = ""
    endpoint: str | None = None
    model: str | None = None
    server: str | None = None
    server_version: str | None = None
    call: int | None = None
    content: str = ""
    verdict: str = ""
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ctx: float | None = None
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    tokens: float | None = None
    short: float | None = None
    long: float | None = None
    ttft_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_content_s: float | None = None
    decode_tps: float | None = None
    decode_p10_tps: float | None = None
    early_tps: float | None = None
    late_tps: float | None = None
    drift: float | None = None
    total_tps: float | None = None
    min_total_tps: Any = None  # one number, or a load sweep's {users: floor}
    stalls: float | None = None
    stall_s: float | None = None
    concurrency: int | list[int] | None = None  # a load case's users, or a load sweep's levels
    users: int | None = None  # a session case's sessions at once
    turns: int | None = None
    repeat: int | None = None
    requests: int | None = None  # a load case's (or level's) requests: more than its users with refill
    reasoning_tokens: int | None = None
    reasoning_tps: float | None = None
    content_tokens: int | None = None
    content_tps: float | None = None
    cache_hit: float | None = None
    ttft_growth_ms_per_1k: float | None = None
    attainment: float | None = None
    goodput_rps: float | None = None
    output_tps: float | None = None
    achieved_rps: float | None = None
    max_rps: float | None = None
    bracket: list[float | None] | None = None
    points: list[SweepPoint] | None = None
    levels: list[LoadLevel] | None = None
    knee: int | None = None
    categories: dict[str, CategoryFigures] | None = None
    ab: AbSummary | None = None
    arms: ArmsTable | None = None
    crossover: Crossover | None = None
    comparisons: list[CaseComparison] | None = None
    history_comparisons: list[CaseComparison] | None = None  # a short history's, apart from a named baseline's
    level: int | None = None  # a load sweep's level row: its users
    goals: list[Goal] | None = None  # the floors and ceilings the case was judged against


_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(Row))


def _row_of(record: object, **given: Any) -> Row:
    """A row of ``record``'s fields of the row's names (the rest None), then ``given``."""
    have = {name: getattr(record, name) for name in _ROW_FIELDS if hasattr(record, name)}
    return Row(**{**have, **given})


def as_row(r: Row | Recorded | Mapping[str, Any]) -> Row:
    """``r`` as a table row: a result (typed, or its JSON) gives its case's row."""
    if isinstance(r, Row):
        return r
    case = as_case(r)
    return case if isinstance(case, Row) else _row_of(case)


def as_case(r: Recorded | Row | Mapping[str, Any]) -> Result | Row:
    """What the outputs read of one case: its typed result; or its row, read from the data as it is (what it lacks
    shown as missing), for the error record of a case that could not be measured (plain data with none of a
    result's figures) and for a kind this version has no record of (a view registered for it draws it)."""
    if isinstance(r, Row):
        return r
    if isinstance(r, ErrorRecord):
        return _row_of(r)
    if isinstance(r, Mapping) and not has_record(r):  # an error record, or a kind without a record
        return error_row(r)
    return as_result(r)


def error_row(record: Mapping[str, Any]) -> Row:
    """The row of an error record (or of a kind without a record): the fields it has, the rest None."""
    given = {name: record[name] for name in _ROW_FIELDS if name in record}
    comparisons = given.pop("comparisons", None)  # an errored case is compared too ("skipped" against a baseline)
    kept = given.pop("history_comparisons", None)  # a kind without a record, judged against a short history
    nested = {"points", "levels", "categories", "ab", "goals"}  # figures, which an error record has none of
    # the arms table and the crossover are judgements, which a case judged before it errored may carry
    arms_part, cross = given.pop("arms", None), given.pop("crossover", None)
    return Row(**{k: v for k, v in given.items() if k not in nested},
               arms=load_part(arms_part, ArmsTable) if isinstance(arms_part, Mapping) else None,
               crossover=load_part(cross, Crossover) if isinstance(cross, Mapping) else None,
               comparisons=None if comparisons is None else [_comparison(c) for c in comparisons],
               history_comparisons=None if kept is None else [_comparison(c) for c in kept])


def _comparison(data: CaseComparison | Mapping[str, Any]) -> CaseComparison:
    return data if isinstance(data, CaseComparison) else load_part(data, CaseComparison)


def _sweep_low(r: Row) -> str:
    """The sweep's decode cell: its figure is the slowest point's, so say so and where."""
    rated = [p for p in r.points or [] if finite_number(p.decode_tps) is not None]
    if not rated:
        return _f(r.decode_tps)
    low = min(rated, key=lambda p: p.decode_tps)
    return f"{_f(low.decode_tps)} (min, ctx {_f(low.ctx, '.0f')})"


def cells(r: Row | Recorded | Mapping[str, Any], *, verdict: bool = True) -> list[str]:
    """The columns after "case" for one result (or row), as plain text (missing values are "-")."""
    r = as_row(r)
    if r.kind == "ctx_sweep" and r.points:
        first, last = r.points[0], r.points[-1]
        ctx = f"{_f(first.prompt_tokens or first.ctx, '.0f')}..{_f(last.prompt_tokens or last.ctx, '.0f')}"
    else:
        ctx = _f(r.prompt_tokens or r.ctx, ".0f")
    if r.kind in ("sustained", "load_sweep", "rate", "capacity", "session"):
        tokens = _f(r.completion_tokens or r.tokens, ".0f")
    elif r.long is not None and r.short is not None and finite_number(r.long) is not None \
            and finite_number(r.short) is not None:
        tokens = _f(r.long - r.short, ".0f")
    else:
        tokens = "-"
    ttft = finite_number(r.ttft_s)
    early, late = finite_number(r.early_tps), finite_number(r.late_tps)
    text = "; ".join(verdict_parts(r)) if verdict else ""
    decode = _sweep_low(r) if r.kind == "ctx_sweep" and r.points else _f(r.decode_tps)
    if finite_number(r.decode_p10_tps) is not None:  # a load case: decode is the median user's
        decode = f"{decode} (p10 {_f(r.decode_p10_tps)})"
    return [ctx, tokens, "-" if not ttft else ttft_median(r) + f"{ttft * 1000:.0f} ms", decode,
            "-" if early is None or late is None else f"{_f(early)} -> {_f(late)}", _f(r.drift, ".2f"), text]


#: kinds whose ``ttft_s`` is always the median of many requests (a rate case's, a replay's) or turns (a session's)
MEDIAN_TTFT_KINDS = ("rate", "replay", "session")


def ttft_median(r: Row) -> str:
    """'p50 ' where a row's ttft is the median request's, as its goals line says (``floors.ttft_label``): a load
    row (a sustained case's users or requests, a load sweep's level, a category's requests under load), a
    sustained case's repeats, a rate case's or a replay's requests, a session's turns (whose ceilings read the p90
    turn, named so in their goals); '' where it is one request's."""
    if r.kind in MEDIAN_TTFT_KINDS:
        return "p50 "
    several = any((finite_number(n) or 1) > 1 for n in (r.concurrency, r.repeat, r.requests))
    return "p50 " if r.kind == "sustained" and several else ""


def verdict_parts(r: Row | Recorded | Mapping[str, Any]) -> list[str]:
    """The verdict cell's parts: the verdict (with what an open-loop case is judged on, and a failure's reason),
    each warning, each note, and the floors and ceilings the case was judged against with their margins."""
    r = as_row(r)
    text = open_loop(r) + str(r.verdict)
    if r.verdict != "passed" and r.reason:
        text = f"{text}: {r.reason}"
    goals = goals_text(r)
    return [text, *(f"warning: {w}" for w in case_warnings(r)), *notes(r), *([goals] if goals else [])]


def _goal_value(g: Goal) -> str:
    v = finite_number(g.value)
    if v is None:
        return "-"
    if g.unit == "s":
        return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.3g} s"
    if g.unit == "tok/s":
        return f"{v:.1f} tok/s"
    return f"{v:.3g}" + (f" {g.unit}" if g.unit else "")


def goal_text(g: Goal, where: str = "") -> str:
    """'max_ttft_s 2: ttft p50 5 ms (+99.8%)': the bound, the figure it judged and its margin (negative: missed);
    ``where`` follows the bound ('min_tps 10 tok/s at 4 users: ...', a load sweep's level)."""
    margin = g.margin()
    unit = f" {g.unit}" if g.unit in ("s", "tok/s", "req/s") else ""
    return (f"{g.keyword} {g.bound:g}{unit}{where}: {g.label} {_goal_value(g)}"
            + ("" if margin is None else f" ({signed_pct(margin)})"))


def goals_text(r: Row | Recorded | Mapping[str, Any]) -> str:
    """'judged against min_tps 40 tok/s: decode 2989.3 tok/s (+7373.3%), ...', or '' for a case without goals."""
    goals = as_row(r).goals or []
    return "judged against " + ", ".join(goal_text(g) for g in goals) if goals else ""


def case_warnings(r: Row | Recorded | Mapping[str, Any]) -> list[str]:
    """A row's warnings, each once; a load sweep leaves a level's own ("at 2 users: ...") to that level's row."""
    r = as_row(r)
    out = once(r.warnings or [])
    if r.kind != "load_sweep":
        return out
    shown = {f"at {n_users(lv.concurrency)}: " for lv in r.levels or []}
    return [w for w in out if not w.startswith(tuple(shown))]


def aggregation_note(r: Row | Recorded | Mapping[str, Any]) -> str | None:
    """Where early -> late and drift are separate medians (over an A/B arm's trials, or a case's streams) that do
    not give each other, say so: else '714.2 -> 668.1' beside drift 0.01 reads as a mistake."""
    r = as_row(r)
    early, late, drift = finite_number(r.early_tps), finite_number(r.late_tps), finite_number(r.drift)
    if early is None or late is None or drift is None or not early or abs((1 - late / early) - drift) < 0.01:
        return None
    trials = finite_number(r.repeat) if r.ab is not None or r.arms else None
    what = f"{trials:.0f} trials" if trials and trials > 1 else "streams"
    return (f"early -> late and drift are each the median over {what} (drift is the median of their drifts, "
            f"not 1 - late/early of the medians)")


def once(texts: Iterable[Any]) -> list[str]:
    """``texts`` without repeats, in first-seen order (an A/B case gathers the same note from every trial)."""
    return list(dict.fromkeys(str(t) for t in texts))


def phase_notes(r: Row | Recorded | Mapping[str, Any]) -> list[str]:
    """What a reasoning phase and a session add to a row: each phase's tokens and rate, the first answer
    token; a session's turns and cache-hit share (nothing for a result without them)."""
    r = as_row(r)
    out = []
    if r.reasoning_tokens:
        first = finite_number(r.ttft_content_s)
        out.append(f"reasoning {r.reasoning_tokens} tokens at {_f(r.reasoning_tps)} tok/s, answer "
                   f"{r.content_tokens} at {_f(r.content_tps)} tok/s"
                   + ("" if first is None else f", first answer token {first * 1000:.0f} ms"))
    if r.kind == "session" and r.verdict != "error":  # an error measured no turn to speak of
        hit = finite_number(r.cache_hit)
        growth = finite_number(r.ttft_growth_ms_per_1k)
        out.append(f"{plural(r.users, 'session')} x {plural(r.turns, 'turn')}, ttft p90 "
                   f"{(finite_number(r.ttft_p90_s) or 0) * 1000:.0f} ms"
                   + ("" if growth is None else f" ({growth:+.0f} ms per 1k prompt tokens)")
                   + ("" if hit is None else f", cache hit {hit:.0%} of later turns"))
    return out


def _is_knee(note: str) -> bool:
    return note.startswith(("knee at ", "no knee up to "))


def notes(r: Row | Recorded | Mapping[str, Any]) -> list[str]:
    """A row's notes, each once. A load sweep says its knee once, for the levels shown (an A/B case has one knee
    note per trial), and carries the notes every level shares, which its level rows then leave out."""
    r = as_row(r)
    out = once(r.notes or []) + phase_notes(r)
    how = aggregation_note(r)
    if how:
        out.append(how)
    if r.kind != "load_sweep":
        return out
    on_arms = arms_note(r)
    if on_arms:
        out.append(on_arms)
    knees = [n for n in out if _is_knee(n)]
    if knees:
        try:
            knees = [knee_text(r.knee, r.levels or [])]
        except (KeyError, IndexError, StopIteration, TypeError, ValueError):
            knees = knees[:1]  # levels without the figures the sentence needs: the first trial's words
    return [*knees, *[n for n in out if not _is_knee(n)], *shared_level_notes(r)]


def shared_level_notes(r: Row | Recorded | Mapping[str, Any]) -> list[str]:
    """Notes that every level of a load sweep has (e.g. why drift was not judged), said once for the case."""
    levels = [once(lv.notes or []) for lv in as_row(r).levels or []]
    if len(levels) < 2:
        return []
    return [n for n in levels[0] if all(n in other for other in levels[1:])]


def label(r: Row | Recorded | Mapping[str, Any], *, full: bool = False) -> str:
    """The case cell: kind and test name; a direct call (``specperf.sustained(...)``) adds its number and content,
    so several calls in one test are told apart (ctx and tokens have their own columns). ``full``: the whole node
    id instead of the test name (what a row whose case cell was cut says under it)."""
    r = as_row(r)
    nodeid = str(r.nodeid)
    case = nodeid if full else nodeid.split("::")[-1] or nodeid
    text = f"[{r.kind}] {case}"
    if r.call is not None:
        text += f" (call {r.call}, {r.content})"
    return text


def _stalls(r: Row) -> str:
    n = finite_number(r.stalls)
    if not n:
        return "-"
    return f"{n:.0f} ({_f(r.stall_s, '.1f')} s)"


#: comparison verdicts, most telling first: the case row of a sweep shows its worst
SEVERITY = {"regressed": 0, "inconclusive": 1, "missing": 2, "skipped": 3, "new": 4, "passed": 5, "improved": 6}
METRIC_NAMES = {"decode_tps": "decode", "ttft_s": "ttft", "total_tps": "total"}


def _change(c: CaseComparison, *, where: bool = False) -> str:
    """One comparison, labelled by metric (and, with ``where``, by its ctx or level): 'decode @ 8 users -12.3%
    regressed'."""
    metric = METRIC_NAMES.get(str(c.metric), str(c.metric or ""))
    at = ""
    if where and c.users is not None:
        at = f" @ {n_users(c.users)}"
    elif where and c.ctx is not None:
        at = f" @ ctx {c.ctx}"
    change = finite_number(None if c.comparison is None else c.comparison.change)
    if not metric:
        return f"{at.strip()} {c.verdict}".strip()
    return f"{metric}{at} {'' if change is None else signed_pct(change) + ' '}{c.verdict}"


def signed_pct(x: float) -> str:
    """'+12.3%', '-4.0%', and '0.0%' for a change that rounds to nothing (never '-0.0%')."""
    text = f"{x * 100:+.1f}"
    return ("0.0" if float(text) == 0 else text) + "%"


def worst(comparisons: Iterable[CaseComparison]) -> CaseComparison | None:
    """The most telling comparison: regressed before inconclusive before the rest, then the largest worsening."""
    def rank(c: CaseComparison) -> tuple[int, float]:
        effect = finite_number(None if c.comparison is None else c.comparison.effect)
        return SEVERITY.get(str(c.verdict), 7), effect if effect is not None else 0.0
    return min(comparisons, key=rank, default=None)


def comparison_cell(r: Row | Recorded | Mapping[str, Any]) -> str:
    """The comparison column: a case's own comparisons; for a sweep, also the worst of its points or levels,
    labelled with where (each level's own are on the level's row)."""
    r = as_row(r)
    ccs = list(r.comparisons or [])
    if r.level is not None or r.kind == "session":  # a level row's own; a session's users are its own
        return ", ".join(_change(c) for c in ccs) or "-"
    own = [c for c in ccs if c.users is None and c.ctx is None]
    parts = [_change(c) for c in own]
    subs = [c for c in ccs if c not in own]
    bad = worst(subs)
    if bad is not None:
        parts.append(("worst: " if len(subs) > 1 else "") + _change(bad, where=True))
    return ", ".join(parts) or "-"


def extra_columns(results: Iterable[Row | Recorded | Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """Columns shown only when they say something: stalls when any occurred, the comparison when comparing."""
    rows = [as_row(r) for r in results]
    extra: list[tuple[str, Any]] = []
    if any(finite_number(r.stalls) for r in rows):
        extra.append(("stalls", _stalls))
    if any(r.comparisons is not None for r in rows):
        title = "B vs A" if any(r.ab is not None for r in rows) else "vs baseline"
        extra.append((title, comparison_cell))
    return extra


def has_load(results: Iterable[Row | Recorded | Mapping[str, Any]]) -> bool:
    """Whether any result is a load case (then the table shows LOAD_COLUMNS)."""
    return any(r.kind in ("load_sweep", "rate", "capacity") or (finite_number(r.concurrency) or 1) > 1
               for r in map(as_row, results))


def with_load(values: Sequence[str], r: Row | Recorded | Mapping[str, Any] | None = None) -> list[str]:
    """``values`` (a row ending in its verdict) with the load cells of ``r`` before the verdict; the
    header's names when ``r`` is None."""
    extra = list(LOAD_COLUMNS) if r is None else [users(r), total_cell(r)]
    return [*values[:-1], *extra, values[-1]]


def users(r: Row | Recorded | Mapping[str, Any]) -> str:
    """Concurrent streams: a load case's N, a load sweep's levels (1..8), a session case's sessions at once, 1 for
    single-stream cases, "-" for open-loop cases (their load is a request rate, said with their verdict)."""
    r = as_row(r)
    if r.kind in ("rate", "capacity"):
        return "-"
    if r.kind == "session" and finite_number(r.users) is not None:
        return str(r.users)  # sessions at once
    c = r.concurrency
    if isinstance(c, list):
        return f"{c[0]}..{c[-1]}" if len(c) > 1 else str(c[0]) if c else "-"
    return str(c) if finite_number(c) is not None else "1"


def total_cell(r: Row | Recorded | Mapping[str, Any]) -> str:
    """Aggregate tok/s, with the floor it was judged against (``min_total_tps``) when the case has one."""
    r = as_row(r)
    floor = finite_number(r.min_total_tps)
    return _f(r.total_tps) + (f" (min {floor:g})" if floor is not None else "")


def open_loop(r: Row | Recorded | Mapping[str, Any]) -> str:
    """What a rate or capacity case is judged on, ahead of its verdict; '' for other kinds."""
    r = as_row(r)
    if r.kind == "rate" and r.attainment is not None:
        return (f"attainment {_f(r.attainment, '.2f')}, goodput {_f(r.goodput_rps, '.3g')} req/s, "
                f"{_f(r.output_tps)} tok/s out; ")
    if r.kind == "capacity":
        return capacity_text(r) + "; "
    return ""


def capacity_text(r: Row | Recorded | Mapping[str, Any]) -> str:
    """What a capacity search found: a lower bound (the highest rate that met the SLO) and its bracket."""
    r = as_row(r)
    lo_hi: list[Any] = [*(r.bracket or []), None, None]
    lo = finite_number(lo_hi[0]) or finite_number(r.max_rps)
    hi = finite_number(lo_hi[1])
    if not lo:
        return "no rate met the SLO" + (f" (capacity < {hi:.3g} req/s)" if hi else "")
    if hi is None:
        return f"capacity >= {lo:.3g} req/s (no rate tried failed the SLO)"
    return f"capacity >= {lo:.3g} req/s (bracket {lo:.3g}..{hi:.3g})"


def level_rows(r: Row | Recorded | Mapping[str, Any]) -> list[tuple[str, Row]]:
    """A load sweep's levels as (label suffix, row) for a row each under the case's own: each with its
    comparisons, its aggregate floor, and a verdict that agrees with the case's reason."""
    r = as_row(r)
    if r.kind != "load_sweep":
        return []
    floors = r.min_total_tps
    shared = shared_level_notes(r)
    rows = []
    for lv in r.levels or []:
        n = lv.concurrency
        floor = floors.get(n, floors.get(str(n))) if isinstance(floors, dict) else floors  # JSON keys are text
        ccs = [c for c in r.comparisons or [] if c.users == n]
        row = _row_of(lv, kind="sustained", min_total_tps=floor, comparisons=ccs, level=n,
                      notes=[x for x in once(lv.notes or []) if x not in shared])
        row = dataclasses.replace(row, **_arms_figures(r, n))
        rows.append((f" @ {n_users(n)}", dataclasses.replace(row, **_level_verdict(r, row))))
    return rows


def _arms_figures(r: Row, n: Any) -> dict[str, Any]:
    """On arms (and A/B), a level row shows its arm's per-user decode and aggregate as the arms table does (the
    geometric mean over trials, the centre of its interval), so one arm at one level reads one figure."""
    t = r.arms
    mine = next((row.arms.get(t.deployed) for row in t.levels if row.users == n), None) if t is not None else None
    if mine is None or finite_number(mine.decode_tps) is None:
        return {}
    # its p10 is a median over trials of another figure: beside a geometric mean it would read as one of its parts
    out = {"decode_tps": mine.decode_tps, "decode_p10_tps": None}
    if finite_number(mine.total_tps) is not None:
        out["total_tps"] = mine.total_tps
    return out


def arms_note(r: Row | Recorded | Mapping[str, Any]) -> str | None:
    """What a load sweep measured on arms (or A/B) shows as per-user decode on its rows, and why."""
    r = as_row(r)
    t = r.arms
    if r.kind != "load_sweep" or t is None or not t.levels:
        return None
    return f"per-user decode on the level rows: arm {t.deployed}'s geometric mean over its trials, as in the arms table"


def _level_verdict(r: Row, lv: Row) -> dict[str, Any]:
    """The level's own verdict, failed also where the case's reason blames this level (a regression at it, or
    speculation's speedup below ``min_speedup`` there), with those reasons."""
    reason = str(r.reason or "")
    if r.verdict != "failed" or not reason:
        return {}
    n = lv.level
    blamed = [str(lv.reason)] if lv.verdict == "failed" and lv.reason else []
    gate = r.arms.gate if r.arms is not None else None
    # the arms gate: the deployed arm too slow against the best here
    for judged in [x for x in (gate.levels if gate is not None else []) if x.users == n]:
        if gate is not None and judged.verdict in ("below", "inconclusive"):
            text = judged.loss_text(gate.deployed, gate.max_loss_vs_best)
            if text in reason:
                blamed.append(text.removeprefix(f"at {n_users(n)} "))
    prefix = f"at {n_users(n)}: "
    blamed += [str(c.reason).removeprefix(prefix) for c in lv.comparisons or []
               if c.verdict in ("regressed", "inconclusive") and c.reason and c.reason in reason]
    # a short history's judgement, kept apart from a named baseline's comparisons ('history, against run 3: at 4
    # users: ...')
    blamed += [str(c.reason).replace(prefix, "", 1) for c in r.history_comparisons or []
               if c.users == n and c.verdict in ("regressed", "inconclusive") and c.reason and c.reason in reason]
    cross = r.crossover
    if cross is not None and cross.gated and cross.text and cross.text in reason:
        failing = [x for x in cross.levels if x.verdict == "below"] or [
            x for x in cross.levels if x.verdict == "inconclusive"]
        for x in failing:
            if x.users == n:
                lo, hi = ([*(x.interval or []), None, None])[:2]
                blamed.insert(0, f"speedup {_f(x.speedup, '.2f')} [{_f(lo, '.2f')}, {_f(hi, '.2f')}] "
                                 f"under min_speedup {_f(cross.floor, 'g')}")
    return {"verdict": "failed", "reason": "; ".join(once(blamed))} if blamed else {}


def category_rows(r: Row | Recorded | Mapping[str, Any]) -> list[tuple[str, Row]]:
    """A case over a prompt file: (label suffix, row) per category, its figures over its own requests
    (the decode cell is the category's median, with its p10; the last cell says n, acceptance and its floors)."""
    r = as_row(r)
    if r.categories is None:
        return []
    failed = [p.strip() for p in str(r.reason or "").split(";")] if r.verdict == "failed" else []
    load, level = category_load(r)
    rows = []
    for name, f in r.categories.items():
        text = category_count(f)
        if finite_number(f.accept_len) is not None:
            text += f", accept {_f(f.accept_len, '.2f')}/step"
        if finite_number(f.accept_rate) is not None:
            text += f", rate {_f(f.accept_rate, '.2f')}"
        if f.attainment is not None and finite_number(f.attainment) is not None:
            text += f", SLO met {f.attainment:.0%}"
        if f.speedup is not None and finite_number(f.speedup) is not None:  # A/B: B over A, trials as samples
            lo, hi = ([*(f.speedup_interval or []), None, None])[:2]
            text += (f", speedup {_f(f.speedup, '.2f')}x [{_f(lo, '.2f')}, {_f(hi, '.2f')}] over "
                     f"{f.speedup_n_b} trials")
        mine = [p.removeprefix(f"{name}: ") for p in failed if p.startswith(f"{name}: ")]
        if mine:
            text += "; failed: " + "; ".join(mine)
        row = Row(**{"kind": "sustained", "prompt_tokens": f.prompt_tokens_p50,
                     "completion_tokens": r.completion_tokens or r.tokens, "ttft_s": f.ttft_p50_s,
                     "decode_tps": f.decode_tps_p50, "decode_p10_tps": f.decode_tps_p10, "drift": f.drift,
                     "verdict": text, **load})
        rows.append((f" [{name}]" + (f" @ {n_users(level)}" if level is not None else ""), row))
    return rows


def category_load(r: Row | Recorded | Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """(the load fields of ``Row`` a category row shows, the sweep level its figures come from or None).

    A category's requests ran under its case's load: a 4-user case's categories are at 4 users, a session
    case's at its sessions at once, a load sweep's at the level the case's ``categories`` are from (the highest,
    ``categories_users``), which the row names."""
    r = as_row(r)
    kind = r.kind
    if kind in ("rate", "capacity"):
        return {"kind": kind}, None  # a request rate: the users cell is "-", as on the case's own row
    if kind == "session":
        return {"kind": "session", "users": r.users}, None
    if kind == "load_sweep":
        level = r.levels[-1].concurrency if r.levels else None  # the JSON's categories_users
        return {"concurrency": level}, level
    return {"concurrency": r.concurrency}, None


def plural(n: Any, noun: str) -> str:
    """'1 prompt', '3 prompts', '- prompts' when the count is missing."""
    return f"{'-' if n is None else n} {noun}" + ("" if str(n) in ("1", "1.0") else "s")


def _figures(f: CategoryFigures | Mapping[str, Any]) -> CategoryFigures:
    """A category's figures as their record (a mapping is its JSON; keys the record lacks are dropped)."""
    if isinstance(f, CategoryFigures):
        return f
    names = {x.name for x in dataclasses.fields(CategoryFigures)}
    return CategoryFigures(**{k: v for k, v in f.items() if k in names})


def category_count(f: CategoryFigures | Mapping[str, Any]) -> str:
    """'n=3 (1 prompt)': a category's requests and how many distinct prompts they sent; over an A/B arm's trials,
    also each trial's n, which its floors were judged on ('n=3 (1 prompt; 3 trials of n=1)')."""
    f = _figures(f)
    text = f"n={f.n} ({plural(f.n_prompts, 'prompt')}"
    trials, n = finite_number(f.trials), finite_number(f.n)
    if trials is not None and trials > 1 and n is not None and n % trials == 0:
        text += f"; {trials:.0f} trials of n={n / trials:.0f}"
    elif trials is not None and trials > 1:
        text += f"; {trials:.0f} trials"
    return text + ")"


def n_users(n: Any) -> str:
    """'1 user', '8 users'."""
    return f"{n} user" if str(n) == "1" else f"{n} users"


def row(r: Row | Recorded | Mapping[str, Any]) -> tuple[str, ...]:
    """One terminal table row from a result (the fixed columns)."""
    return (label(r), *cells(shown_case(r)))


def shown_case(r: Row | Recorded | Mapping[str, Any]) -> Row:
    """The case row's figures: a sweep on arms shows its highest level's per-user decode and its best aggregate
    as those levels' rows do (the arms table's figures)."""
    r = as_row(r)
    levels = (r.levels or []) if r.kind == "load_sweep" else []
    if levels and _arms_figures(r, levels[-1].concurrency):
        figures = [_arms_figures(r, lv.concurrency) for lv in levels]
        totals = [finite_number(f["total_tps"]) for f in figures if "total_tps" in f]
        return dataclasses.replace(r, decode_tps=_arms_figures(r, levels[-1].concurrency)["decode_tps"],
                                   total_tps=max((x for x in totals if x is not None), default=r.total_tps))
    return r


def table(results: Iterable[Row | Recorded | Mapping[str, Any]], width: int | None = None) -> list[str]:
    """The summary table as lines of aligned columns; the verdict column is last and left unpadded.

    With ``width`` (the terminal's table), no line is wider: the comparison column shows each row's worst
    comparison, and a row whose verdict cell would pass ``width`` keeps its verdict and puts its comparisons,
    reason, warnings, notes and goals on their own lines under it, wrapped; when every movable column has gone
    under the rows and a long test name still passes ``width``, the case column shrinks (``cut_middle``) and a cut
    row's first line under it names its case whole."""
    cases = [as_row(r) for r in results]
    load = has_load(cases)
    extra = extra_columns(cases)

    def line(values: Sequence[str], source: Row | None = None) -> tuple[str, ...]:
        values = with_load(values, source) if load else list(values)
        shown = [name for name, _ in extra] if source is None else [show(source) for _, show in extra]
        return (*values[:-1], *shown, values[-1])

    rows = [line(COLUMNS)]
    sources: list[Row | None] = [None]
    for r in cases:
        subs = [*level_rows(r), *category_rows(r)]
        for x, src in [(row(r), shown_case(r)), *(((f"  {lb.strip()}", *cells(lv)), lv) for lb, lv in subs)]:
            rows.append(line(x, src))
            sources.append(src)
    out = _aligned(rows)
    if width is None or max(map(len, out)) <= width:
        return out
    # Too wide: a long verdict cell, then the comparison and stalls columns, then early -> late, go under each row.
    header = rows[0]
    extras = [name for name, _ in extra]
    for moved in ([], extras, [*extras, "early -> late"], [*extras, "early -> late", "drift"]):
        keep = [i for i, name in enumerate(header) if name not in moved]
        narrow = [tuple(x[i] for i in keep) for x in rows]
        widths = _widths(narrow)
        alone = [narrow[0]] + [(*x[:-1], _verdict_word(s)) for x, s in zip(narrow[1:], sources[1:], strict=True)]
        if max(len(x) for x in _aligned(alone, widths)) <= width:
            break  # each row fits with its verdict alone (the rest of the cell may go below)
    # Still too wide (a long test name): the case column shrinks, each longer label cut in its middle, and the row
    # says its whole case (kind and node id) on its own line under it.
    over = max(len(x) for x in _aligned(alone, widths)) - width
    if over > 0:
        widths[0] = max(MIN_CASE, widths[0] - over)
    out = []
    for x, short, source in zip(rows, narrow, sources, strict=True):
        whole = short[0]
        if source is not None and len(whole) > widths[0]:
            short = (cut_middle(whole, widths[0]), *short[1:])
        line_text = _aligned([short], widths)[0]
        below = [] if source is None else [f"{name}: {x[i]}" for i, name in enumerate(header)
                                        if name in moved and x[i] != "-"]
        if short[0] != whole:
            below.insert(0, "case: " + (whole.strip() if whole.startswith(" ") or source is None
                                        else label(source, full=True)))
        if source is not None and len(line_text) > width:
            below += _below(source)
            line_text = _aligned([(*short[:-1], _verdict_word(source))], widths)[0]
        out.append(line_text)
        for text in below:
            out += textwrap.wrap(text, width=width, initial_indent="    ", subsequent_indent="      ",
                                 break_on_hyphens=False)
    return out


def cut_middle(text: str, n: int) -> str:
    """``text`` in at most ``n`` columns: its start and end kept, '...' for what was cut between them (a test's
    name is told apart by both ends: the kind and the test's prefix, the parameters or suffix)."""
    if len(text) <= n:
        return text
    if n <= len(ELLIPSIS):
        return text[:n]
    keep = n - len(ELLIPSIS)
    return text[:(keep + 1) // 2] + ELLIPSIS + text[len(text) - keep // 2:]


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(x[i]) for x in rows) for i in range(len(rows[0]) - 1)]


def _aligned(rows: Sequence[Sequence[str]], widths: Sequence[int] | None = None) -> list[str]:
    widths = widths if widths is not None else _widths(rows)
    out = []
    for x in rows:
        padded = [x[i].ljust(widths[i]) if i == 0 else x[i].rjust(widths[i]) for i in range(len(widths))]
        out.append("  ".join([*padded, x[-1]]))
    return out


def _verdict_word(r: Row | None) -> str:
    """A row's verdict alone ('passed', 'failed'), or '' for a row whose cell is not one (a category's figures)."""
    v = "" if r is None else str(r.verdict)
    return v if v in (*SEVERITY, "error", "warning") else ""


def _below(r: Row) -> list[str]:
    """What a too-wide row says on its own lines: an open-loop case's figures, a failure's reason, its warnings,
    notes and goals."""
    parts = verdict_parts(r)
    first, out = parts[0], []
    if open_loop(r) and first.startswith(open_loop(r)):
        out.append(open_loop(r).rstrip("; "))
        first = first[len(open_loop(r)):]
    if first != _verdict_word(r):  # a reason after the verdict, or a category's figures
        out.append(first)
    return out + parts[1:]


def one_trial_undecided(c: CaseComparison) -> bool:
    """A comparison left inconclusive because each side had one trial and nothing measured the noise: what
    ``one_trial_note`` says once per run instead of once per metric."""
    x = c.comparison
    return (c.verdict == "inconclusive" and x is not None and x.method.startswith("noise-floor")
            and x.n_base == 1 == x.n_cand)


def one_trial_note(results: Iterable[Row | Recorded | Mapping[str, Any]]) -> str | None:
    """Once per run: comparisons with one trial on each side have no noise to judge by and cannot decide within
    their threshold; what ``repeat=`` would do (None when no comparison was one of those)."""
    rows = list(map(as_row, results))
    undecided = [c for r in rows for c in r.comparisons or [] if one_trial_undecided(c)]
    history = [c for r in rows for c in r.history_comparisons or [] if one_trial_undecided(c)]
    undecided += history
    if not undecided:
        return None
    cmp = [c.comparison for c in undecided if c.comparison is not None]
    threshold = max(x.threshold for x in cmp)
    need = max(x.trials_needed for x in cmp)
    detect = min(x.mde for x in cmp)
    whose = f", {len(history)} of them the history's against its latest run" if history else ""
    return (f"note: {plural(len(undecided), 'comparison')} had one trial on each side (the baseline's and this "
            f"run's{whose}) and no noise estimate, so could not decide within {threshold:.0%} (detectable at the "
            f"assumed noise: {detect:.1%} or more); run the cases with repeat={need} (trials per side) on the baseline "
            f"and here, or repeat='auto' to add trials until each comparison is decided")


def count_text(n: int, verdict: str) -> str:
    """'1 error', '2 errors', '3 failed': verdicts that are nouns take a plural."""
    return f"{n} {verdict}" + ("s" if n != 1 and verdict in ("error", "warning") else "")


def headline(r: Row | Recorded | Mapping[str, Any]) -> str:
    """A result's figures in a few words, in the terms its kind is judged on (a summary's figures cell)."""
    r = as_row(r)
    kind = r.kind
    if kind == "rate":
        return (f"attainment {_f(r.attainment, '.2f')}, goodput {_f(r.goodput_rps, '.3g')} req/s "
                f"at {_f(r.achieved_rps, '.3g')} req/s offered")
    if kind == "capacity":
        return capacity_text(r)
    if kind == "load_sweep":
        top = r.levels[-1] if r.levels else None
        return (f"{users(r)} users: aggregate up to {_f(r.total_tps)} tok/s; per user "
                f"{_f(None if top is None else top.decode_tps)} tok/s "
                f"(p10 {_f(None if top is None else top.decode_p10_tps)}) at "
                f"{n_users('-' if top is None else top.concurrency)}")
    if (finite_number(r.concurrency) or 1) > 1:
        return (f"{n_users(r.concurrency)}: aggregate {total_cell(r)} tok/s; per user {_f(r.decode_tps)} "
                f"tok/s (p10 {_f(r.decode_p10_tps)})")
    if kind == "ctx_sweep" and r.points:
        return f"decode {_sweep_low(r)} tok/s"
    return f"decode {_f(r.decode_tps)} tok/s"


#: what needs attention first, in the summaries
ATTENTION = {"error": 0, "failed": 1}


def diagnosis(results: Iterable[Row | Recorded | Mapping[str, Any]]) -> list[str]:
    """One line per case that failed or errored, errors first then failures, each with its one-line reason."""
    bad = sorted((r for r in map(as_row, results) if r.verdict in ATTENTION), key=lambda r: ATTENTION[r.verdict])
    return [f"{str(r.verdict).upper()} {label(r)}: {r.reason or 'no reason given'}" for r in bad]


def summary(results: Iterable[Recorded | Mapping[str, Any]], width: int | None = None) -> list[str]:
    """The terminal section: failures and errors first with their reasons, then the table (within ``width``), and
    once per run what one-trial comparisons cannot decide."""
    cases = [as_case(r) for r in results]
    first = diagnosis(cases)
    if width is not None:
        first = [x for line in first for x in textwrap.wrap(line, width, subsequent_indent="    ")]
    grids = [lines for r in cases if isinstance(r, Result) for lines in [arms_grid.text_lines(r)] if lines]
    note = one_trial_note(cases)
    said = [] if note is None else [note] if width is None else textwrap.wrap(note, width, subsequent_indent="  ")
    return [*first, *([""] if first else []), *table(cases, width), *said,
            *[x for lines in grids for x in ["", *lines]]]

