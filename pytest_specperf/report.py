"""Reports: the end-of-run table and the atomically written JSON file."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .files import write_text_atomic

COLUMNS = ("case", "ctx", "tokens", "ttft", "decode tok/s", "early -> late", "drift", "verdict")
#: shown before the verdict when a run has load cases: users per row, and their aggregate output
LOAD_COLUMNS = ("users", "total tok/s")


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


def _sweep_low(r: dict[str, Any]) -> str:
    """The sweep's decode cell: its figure is the slowest point's, so say so and where."""
    rated = [p for p in r["points"] if finite_number(p.get("decode_tps")) is not None]
    if not rated:
        return _f(r.get("decode_tps"))
    low = min(rated, key=lambda p: p["decode_tps"])
    return f"{_f(low['decode_tps'])} (min, ctx {_f(low.get('ctx'), '.0f')})"


def cells(r: dict[str, Any], *, verdict: bool = True) -> list[str]:
    """The columns after "case" for one result dict, as plain text (missing values are "-")."""
    if r.get("kind") == "ctx_sweep" and r.get("points"):
        pts = r["points"]
        ctx = f"{_f(pts[0].get('prompt_tokens') or pts[0].get('ctx'), '.0f')}.." \
              f"{_f(pts[-1].get('prompt_tokens') or pts[-1].get('ctx'), '.0f')}"
    else:
        ctx = _f(r.get("prompt_tokens") or r.get("ctx"), ".0f")
    if r.get("kind") in ("sustained", "load_sweep", "rate", "capacity"):
        tokens = _f(r.get("completion_tokens") or r.get("tokens"), ".0f")
    elif finite_number(r.get("long")) is not None and finite_number(r.get("short")) is not None:
        tokens = _f(r["long"] - r["short"], ".0f")
    else:
        tokens = "-"
    ttft = finite_number(r.get("ttft_s"))
    early, late = finite_number(r.get("early_tps")), finite_number(r.get("late_tps"))
    text = ""
    if verdict:
        text = open_loop(r) + str(r.get("verdict", ""))
        if r.get("verdict") != "passed" and r.get("reason"):
            text = f"{text}: {r['reason']}"
        for warning in r.get("warnings") or []:
            text += f"; warning: {warning}"
        for note in r.get("notes") or []:
            text += f"; {note}"
    decode = _sweep_low(r) if r.get("kind") == "ctx_sweep" and r.get("points") else _f(r.get("decode_tps"))
    return [ctx, tokens, "-" if not ttft else f"{ttft * 1000:.0f} ms", decode,
            "-" if early is None or late is None else f"{_f(early)} -> {_f(late)}", _f(r.get("drift"), ".2f"), text]


def label(r: dict[str, Any]) -> str:
    """The case cell: kind and test name; a direct call (``specperf.sustained(...)``) adds its number and content,
    so several calls in one test are told apart (ctx and tokens have their own columns)."""
    nodeid = str(r.get("nodeid", ""))
    case = nodeid.split("::")[-1] or nodeid
    text = f"[{r.get('kind', '')}] {case}"
    if r.get("call") is not None:
        text += f" (call {r['call']}, {r.get('content', '')})"
    return text


def _stalls(r: dict[str, Any]) -> str:
    n = finite_number(r.get("stalls"))
    if not n:
        return "-"
    return f"{n:.0f} ({_f(r.get('stall_s'), '.1f')} s)"


def _change(c: dict[str, Any]) -> str:
    metric = {"decode_tps": "decode", "ttft_s": "ttft"}.get(str(c.get("metric")), str(c.get("metric") or ""))
    where = f"@{c['ctx']}" if c.get("ctx") is not None else ""
    change = finite_number((c.get("comparison") or {}).get("change"))
    if not metric:
        return str(c.get("verdict", ""))
    return f"{metric}{where} {'' if change is None else f'{change * 100:+.1f}% '}{c.get('verdict', '')}"


def extra_columns(results: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Columns shown only when they say something: stalls when any occurred, the comparison when comparing."""
    extra: list[tuple[str, Any]] = []
    if any(finite_number(r.get("stalls")) for r in results):
        extra.append(("stalls", _stalls))
    if any("comparisons" in r for r in results):
        title = "B vs A" if any("ab" in r for r in results) else "vs baseline"
        extra.append((title, lambda r: ", ".join(_change(c) for c in r.get("comparisons") or []) or "-"))
    return extra


def has_load(results: Iterable[dict[str, Any]]) -> bool:
    """Whether any result is a load case (then the table shows LOAD_COLUMNS)."""
    return any(r.get("kind") in ("load_sweep", "rate", "capacity") or (finite_number(r.get("concurrency")) or 1) > 1
               for r in results)


def with_load(values: Sequence[str], r: dict[str, Any] | None = None) -> list[str]:
    """``values`` (a row ending in its verdict) with the load cells of ``r`` before the verdict; the
    header's names when ``r`` is None."""
    extra = list(LOAD_COLUMNS) if r is None else [users(r), _f(r.get("total_tps"))]
    return [*values[:-1], *extra, values[-1]]


def users(r: dict[str, Any]) -> str:
    """Concurrent streams: a load case's N, a load sweep's levels (1..8), 1 for single-stream cases."""
    if r.get("kind") == "rate":
        return f"{_f(r.get('achieved_rps'), '.3g')} req/s"
    if r.get("kind") == "capacity":
        return f"<= {_f(r.get('max_rps'), '.3g')} req/s"
    c = r.get("concurrency", 1)
    if isinstance(c, list):
        return f"{c[0]}..{c[-1]}" if len(c) > 1 else str(c[0]) if c else "-"
    return str(c)


def open_loop(r: dict[str, Any]) -> str:
    """What a rate or capacity case is judged on, ahead of its verdict; '' for other kinds."""
    if r.get("kind") == "rate" and r.get("attainment") is not None:
        return (f"attainment {_f(r['attainment'], '.2f')}, goodput {_f(r.get('goodput_rps'), '.3g')} req/s, "
                f"{_f(r.get('output_tps'))} tok/s out; ")
    if r.get("kind") == "capacity":
        lo, hi = (r.get("bracket") or [None, None])[:2]
        return f"max {_f(r.get('max_rps'), '.3g')} req/s (bracket {_f(lo, '.3g')}..{_f(hi, '.3g')}); "
    return ""


def level_rows(r: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A load sweep's levels as (label suffix, row dict) for a row each under the case's own."""
    if r.get("kind") != "load_sweep":
        return []
    return [(f" @ {n_users(lv.get('concurrency'))}", {**lv, "kind": "sustained"}) for lv in r.get("levels") or []]


def n_users(n: Any) -> str:
    """'1 user', '8 users'."""
    return f"{n} user" if n == 1 else f"{n} users"


def row(r: dict[str, Any]) -> tuple[str, ...]:
    """One terminal table row from a result dict (the fixed columns)."""
    return (label(r), *cells(r))


def table(results: Iterable[dict[str, Any]]) -> list[str]:
    """The summary table as lines of aligned columns; the verdict column is last and left unpadded."""
    results = list(results)
    load = has_load(results)
    extra = extra_columns(results)

    def line(values: Sequence[str], source: dict[str, Any] | None = None) -> tuple[str, ...]:
        values = with_load(values, source) if load else list(values)
        shown = [name for name, _ in extra] if source is None else [show(source) for _, show in extra]
        return (*values[:-1], *shown, values[-1])

    rows = [line(COLUMNS)]
    for r in results:
        for x, src in [(row(r), r), *(((f"  {lb.strip()}", *cells(lv)), lv) for lb, lv in level_rows(r))]:
            rows.append(line(x, src))
    widths = [max(len(x[i]) for x in rows) for i in range(len(rows[0]) - 1)]
    out = []
    for x in rows:
        padded = [x[i].ljust(widths[i]) if i == 0 else x[i].rjust(widths[i]) for i in range(len(widths))]
        out.append("  ".join([*padded, x[-1]]))
    return out


def write_json_atomic(path: Path, results: list[dict[str, Any]], meta: dict[str, Any],
                      redact: Iterable[str] = ()) -> None:
    """Write the results file so that a reader never sees half of it (temp file + rename)."""
    doc = {"format": "pytest-specperf/1", "plugin_version": __version__,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **meta, "results": results}
    text = json.dumps(doc, indent=2, sort_keys=False, default=str)
    for secret in redact:
        if secret:
            text = text.replace(secret, "***")
    write_text_atomic(path, text + "\n")
