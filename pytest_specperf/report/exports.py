"""Exports of results (and comparisons) for other tools; pure functions, never imports pytest.

Public API
----------
``markdown_summary(results, comparisons=None) -> str``
    A GitHub-flavoured table (``--specperf-markdown``, e.g. into ``$GITHUB_STEP_SUMMARY``): case, ctx, tokens,
    ttft, decode tok/s, early -> late, drift, verdict, plus a "vs baseline" column when ``comparisons``
    (``compare.CaseComparison``) are given. Sweep points get a row each; baseline-only cases are listed at the end.
    Below the table: the comparison counts, each regression's reason, and, for inconclusive comparisons the noise
    cannot settle, the minimum detectable effect and the trials per side needed. Cells escape ``|``.
``bencher_json(results) -> dict``
    Bencher Metric Format: ``{benchmark: {measure: {"value", "lower_value", "upper_value"}}}``; benchmark = nodeid
    (``nodeid@ctx=N`` for sweep points), measures ``MEASURES`` (``decode-tps``, ``ttft-s``, ``drift``, ...); value =
    the result's figure, lower/upper = the smallest/largest trial when there are several. Errored cases are left out.
``junit_properties(result, comparisons=None) -> list[tuple[str, str]]``
    ``specperf_<field>`` pairs (verdict, decode_tps, ttft_s, drift, ...), all values strings, for
    ``record_property``/``user_properties``; plus ``specperf_cmp_<metric>[_ctx<N>]_{verdict,change,ci,p}`` for the
    case's comparisons (given, or found as dicts in ``result["comparisons"]``).
``benchmark_extra_info(result) -> dict``
    Flat scalar fields for pytest-benchmark's ``extra_info``.
``per_token_seconds(result) -> list[float]``
    Seconds per decoded token, one per trial (1 / decode tok/s), so pytest-benchmark's smaller-is-better maths
    applies; for a sweep, the trials of its slowest point (the one its ``decode_tps`` reports).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pytest_specperf.compare.trials import CaseComparison, case_key, sub_cases, trials
from pytest_specperf.report.table import (
    ATTENTION,
    COLUMNS,
    cells,
    has_load,
    label,
    level_rows,
    n_users,
    signed_pct,
    with_load,
)
from pytest_specperf.report.table import finite_number as _num

#: result field -> Bencher measure slug
MEASURES = {
    "decode_tps": "decode-tps",
    "ttft_s": "ttft-s",
    "client_tps": "client-tps",
    "early_tps": "early-tps",
    "late_tps": "late-tps",
    "burst_tps": "burst-tps",
    "drift": "drift",
    "total_tps": "total-tps",
    "decode_p10_tps": "decode-p10-tps",
}
JUNIT_FIELDS = ("verdict", "decode_tps", "ttft_s", "drift", "drift_verdict", "client_tps", "early_tps", "late_tps",
                "burst_tps", "prompt_tokens", "completion_tokens", "repeat", "concurrency", "decode_p10_tps",
                "total_tps", "common_window_s", "ttft_p50_s", "ttft_p90_s", "step_ms", "knee",
                # open-loop cases (rate, capacity)
                "achieved_rps", "attainment", "goodput_rps", "refused", "tpot_p90_ms", "e2e_p90_s", "max_rps")
#: per level of a load sweep, as specperf_users<N>_<field>
JUNIT_LEVEL_FIELDS = ("verdict", "decode_tps", "decode_p10_tps", "total_tps", "ttft_p50_s", "ttft_p90_s",
                      "accept_len", "step_ms", "drift")
EXTRA_INFO_FIELDS = ("kind", "endpoint", "model", "server", "content", "ctx", "prompt_tokens", "tokens",
                     "completion_tokens", "short", "long", "repeat", "decode_tps", "client_tps", "ttft_s", "total_s",
                     "early_tps", "late_tps", "drift", "stalls", "tokens_per_chunk", "burst_tps", "burst_gap",
                     "verdict", "reason")


def _cell(text: str) -> str:
    # GFM: a '|' ends the cell even inside a code span unless escaped; newlines end the row.
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def _case(nodeid: str, suffix: str = "") -> str:
    short = _cell(nodeid.rsplit("/", 1)[-1] or nodeid).replace("`", "'")
    return f"`{short}`{suffix}"


def _row(r: dict[str, Any], case: str, *, verdict: bool = True, load: bool = False) -> list[str]:
    out = [case, *(_cell(c) for c in cells(r, verdict=verdict))]
    return with_load(out, r) if load else out


def _pct(x: float) -> str:
    return signed_pct(x)


def _cmp_cell(ccs: Sequence[CaseComparison]) -> str:
    parts = []
    for cc in ccs:
        c = cc.comparison
        if c is None:
            parts.append(cc.verdict if cc.verdict in ("new", "missing") else f"{cc.verdict}: {cc.reason}")
        else:
            # The case comparison's verdict: the one JSON, JUnit and the terminal carry (noise floors applied).
            word = f"**{cc.verdict}**" if cc.verdict == "regressed" else cc.verdict
            parts.append(f"{c.metric} {_pct(c.change)} [{_pct(c.change_ci[0])}, {_pct(c.change_ci[1])}] {word}")
    return "<br>".join(_cell(p) for p in parts)


def markdown_summary(results: Iterable[dict[str, Any]], comparisons: Iterable[CaseComparison] | None = None,
                     against: str = "baseline", plots: Sequence[str | None] | None = None) -> str:
    """The results (and comparisons against ``against``: "baseline" or "A") as a GitHub-flavoured Markdown table
    with notes below it.

    ``plots``: one image link per result (None where it has none), listed under the table.
    """
    results = list(results)
    ccs = list(comparisons) if comparisons is not None else None
    by_key: dict[str, list[CaseComparison]] = {}
    for cc in ccs or []:
        by_key.setdefault(cc.key, []).append(cc)
    load = has_load(results)
    columns = with_load(COLUMNS) if load else list(COLUMNS)
    header = [*columns, f"vs {against}"] if ccs is not None else columns
    rows: list[list[str]] = []
    shown: set[str] = set()

    def add(cells: list[str], key: str) -> None:
        if ccs is not None:
            cells = [*cells, _cmp_cell(by_key.get(key, []))]
            shown.add(key)
        rows.append(cells)

    for r in results:
        nodeid = str(r.get("nodeid", ""))
        add(_row(r, _case(nodeid, f" ({_cell(r.get('kind', ''))})" if r.get("kind") else ""), load=load), nodeid)
        if r.get("kind") == "ctx_sweep":
            for _, ctx, point in sub_cases(r):
                add(_row(point, _case(nodeid, f" @ ctx {ctx}"), verdict=False, load=load), case_key(nodeid, ctx))
        for where, lv in level_rows(r):
            add(_row(lv, _case(nodeid, where), load=True), case_key(nodeid, None, lv.get("concurrency")))
    for key, group in by_key.items():
        if key not in shown:
            g = group[0]
            label = _case(g.nodeid, _where(g))
            add([label, *["-"] * (len(columns) - 2), ""], key)
    align = ["---", *["---:"] * (len(columns) - 2), "---", *(["---"] if ccs is not None else [])]
    lines = _attention(results)
    lines += ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    if ccs:
        lines += _notes(ccs, against)
    return "\n".join(lines + _plot_links(results, plots)) + "\n"


def _attention(results: list[dict[str, Any]]) -> list[str]:
    """Above the table: the cases that errored or failed, errors first, each with its one-line reason."""
    bad = sorted((r for r in results if r.get("verdict") in ATTENTION), key=lambda r: ATTENTION[r["verdict"]])
    if not bad:
        return []
    return [f"- **{r['verdict']}** {_cell(label(r))}: {_cell(r.get('reason') or 'no reason given')}"
            for r in bad] + [""]


def _plot_links(results: list[dict[str, Any]], plots: Sequence[str | None] | None) -> list[str]:
    """The "Plots:" list under the table: one link per result that has a plot."""
    links = [(r, link) for r, link in zip(results, plots or [], strict=False) if link]
    if not links:
        return []
    return ["", "Plots:"] + [f"- [{_case(str(r.get('nodeid', '')))}]({link.replace(' ', '%20')})"
                             for r, link in links]


def _where(cc: CaseComparison) -> str:
    if cc.users is not None:
        return f" @ {n_users(cc.users)}"
    return "" if cc.ctx is None else f" @ ctx {cc.ctx}"


def _notes(ccs: Sequence[CaseComparison], against: str) -> list[str]:
    counts = Counter(cc.verdict for cc in ccs)
    order = ("regressed", "inconclusive", "improved", "passed", "new", "missing", "skipped")
    who = "the baseline" if against == "baseline" else against
    out = ["", f"Compared with {who}: " + ", ".join(f"{counts[v]} {v}" for v in order if counts[v]) + "."]
    regressed = [cc for cc in ccs if cc.verdict == "regressed"]
    if regressed:
        out += ["", "Regressions:"]
        out += [f"- {_case(cc.nodeid, _where(cc))}: {_cell(cc.reason)}"
                for cc in regressed]
    noisy = [(cc, cc.comparison) for cc in ccs if cc.verdict == "inconclusive" and cc.comparison is not None
             and cc.comparison.mde > cc.comparison.threshold]
    if noisy:
        out += ["", "Too noisy to settle (minimum detectable effect above the threshold):"]
        for cc, c in noisy:
            where = _case(cc.nodeid, _where(cc))
            noise = f"noise {c.noise:.1%} per trial" + (" (assumed)" if c.noise_source == "floor" else "")
            out.append(f"- {where} {c.metric}: {noise}; with {c.n_base} vs {c.n_cand} trials the smallest detectable "
                       f"change is {c.mde:.1%}, above {c.threshold:.0%}; {c.trials_needed} trials per side needed.")
    return out


def _measure(value: float | None, values: list[float]) -> dict[str, float] | None:
    if value is None:
        if not values:
            return None
        value = float(np.median(values))
    out = {"value": value}
    if len(values) >= 2:
        out["lower_value"] = min(min(values), value)
        out["upper_value"] = max(max(values), value)
    return out


def bencher_json(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Results in Bencher Metric Format (``bencher run --adapter json``)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in results:
        if r.get("verdict") == "error":
            continue
        for nodeid, ctx, case in sub_cases(r):
            measures = {}
            for fieldname, slug in MEASURES.items():
                m = _measure(_num(case.get(fieldname)), trials(case, fieldname))
                if m is not None:
                    measures[slug] = m
            if measures:
                out.setdefault(case_key(nodeid, ctx, case.get("users")), {}).update(measures)
    return out


def _s(v: Any) -> str:
    x = _num(v)
    if x is not None:
        return str(int(x)) if isinstance(v, int) else f"{x:.6g}"
    return str(v)


def junit_properties(result: dict[str, Any], comparisons: Iterable[CaseComparison] | None = None
                     ) -> list[tuple[str, str]]:
    """``(name, value)`` string pairs for JUnit XML properties."""
    props = [(f"specperf_{k}", _s(result[k])) for k in JUNIT_FIELDS if result.get(k) is not None]
    props += [(f"specperf_{k}", " | ".join(result[k])) for k in ("warnings", "notes") if result.get(k)]
    if isinstance(result.get("concurrency"), list):  # a load sweep: its levels' list
        props[[k for k, _ in props].index("specperf_concurrency")] = (
            "specperf_concurrency", ",".join(str(c) for c in result["concurrency"]))
    if (_num(result.get("concurrency")) or 1) > 1:
        props += _stream_props("specperf", result)
    for lv in result.get("levels") or []:
        props += [(f"specperf_users{lv['concurrency']}_{k}", _s(lv[k])) for k in JUNIT_LEVEL_FIELDS
                  if lv.get(k) is not None]
        props += _stream_props(f"specperf_users{lv['concurrency']}", lv)
    cross = result.get("crossover")
    if isinstance(cross, dict):
        props.append(("specperf_crossover", cross.get("text", "")))
    nodeid = result.get("nodeid")
    if comparisons is not None:
        ccs = [cc.as_dict() for cc in comparisons if cc.nodeid == nodeid]
    else:
        ccs = [cc for cc in result.get("comparisons") or [] if isinstance(cc, dict)]
    for cc in ccs:
        at = (f"_ctx{cc['ctx']}" if cc.get("ctx") is not None else "") + (
            f"_users{cc['users']}" if cc.get("users") is not None else "")
        if not cc.get("metric"):
            props.append(("specperf_cmp" + at, str(cc.get("verdict", ""))))
            continue
        name = f"specperf_cmp_{cc['metric']}" + at
        props.append((f"{name}_verdict", str(cc.get("verdict", ""))))
        c = cc.get("comparison") or {}
        if c.get("change") is not None:
            props.append((f"{name}_change", _s(c["change"])))
        if c.get("change_ci"):
            props.append((f"{name}_ci", ",".join(_s(x) for x in c["change_ci"])))
        if c.get("p") is not None:
            props.append((f"{name}_p", _s(c["p"])))
    return props


def _stream_props(prefix: str, case: dict[str, Any]) -> list[tuple[str, str]]:
    """A load case's per-stream decode and ttft, comma-separated in stream order."""
    streams = [x for x in case.get("streams") or [] if isinstance(x, dict)]
    return [(f"{prefix}_stream_{k}", ",".join(_s(x.get(k)) for x in streams)) for k in ("decode_tps", "ttft_s")
            if streams]


def benchmark_extra_info(result: dict[str, Any]) -> dict[str, Any]:
    """Scalar result fields (no lists) for pytest-benchmark's ``benchmark.extra_info``."""
    info = {k: result[k] for k in EXTRA_INFO_FIELDS
            if isinstance(result.get(k), str | int | float | bool) and not (
                isinstance(result[k], float) and not math.isfinite(result[k]))}
    info["nodeid"] = result.get("nodeid", "")
    return info


def per_token_seconds(result: dict[str, Any]) -> list[float]:
    """Seconds per decoded token, one per trial; [] for an errored case."""
    if result.get("verdict") == "error":
        return []
    case = result
    if result.get("kind") == "ctx_sweep":
        points = [c for _, _, c in sub_cases(result) if _num(c.get("decode_tps"))]
        if not points:
            return []
        case = min(points, key=lambda c: c["decode_tps"])
    return [1.0 / x for x in trials(case, "decode_tps") if x > 0]
