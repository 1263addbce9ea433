"""Reports: the end-of-run table and the atomically written JSON file."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import __version__

COLUMNS = ("case", "ctx", "users", "tokens", "ttft", "decode tok/s", "total tok/s", "early -> late", "drift",
           "verdict")


def finite_number(v: Any) -> float | None:
    """``v`` as a float if it is a finite number (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _f(v: Any, spec: str = ".1f") -> str:
    x = finite_number(v)
    return "-" if x is None else format(x, spec)


def cells(r: dict[str, Any], *, verdict: bool = True) -> list[str]:
    """The columns after "case" for one result dict, as plain text (missing values are "-")."""
    if r.get("kind") == "ctx_sweep" and r.get("points"):
        pts = r["points"]
        ctx = f"{_f(pts[0].get('prompt_tokens') or pts[0].get('ctx'), '.0f')}.." \
              f"{_f(pts[-1].get('prompt_tokens') or pts[-1].get('ctx'), '.0f')}"
    else:
        ctx = _f(r.get("prompt_tokens") or r.get("ctx"), ".0f")
    if r.get("kind") in ("sustained", "load_sweep"):
        tokens = _f(r.get("completion_tokens") or r.get("tokens"), ".0f")
    elif finite_number(r.get("long")) is not None and finite_number(r.get("short")) is not None:
        tokens = _f(r["long"] - r["short"], ".0f")
    else:
        tokens = "-"
    ttft = finite_number(r.get("ttft_s"))
    early, late = finite_number(r.get("early_tps")), finite_number(r.get("late_tps"))
    text = ""
    if verdict:
        text = str(r.get("verdict", ""))
        if text != "passed" and r.get("reason"):
            text = f"{text}: {r['reason']}"
        for warning in r.get("warnings") or []:
            text += f"; warning: {warning}"
        for note in r.get("notes") or []:
            text += f"; {note}"
    return [ctx, users(r), tokens, "-" if not ttft else f"{ttft * 1000:.0f} ms", _f(r.get("decode_tps")),
            _f(r.get("total_tps")), "-" if early is None or late is None else f"{early:.1f} -> {late:.1f}",
            _f(r.get("drift"), ".2f"), text]


def users(r: dict[str, Any]) -> str:
    """Concurrent streams: a load case's N, a load sweep's levels (1..8), 1 for single-stream cases."""
    c = r.get("concurrency", 1)
    if isinstance(c, list):
        return f"{c[0]}..{c[-1]}" if len(c) > 1 else str(c[0]) if c else "-"
    return str(c)


def level_rows(r: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A load sweep's levels as (label suffix, row dict) for a row each under the case's own."""
    if r.get("kind") != "load_sweep":
        return []
    return [(f" @ {n_users(lv.get('concurrency'))}", {**lv, "kind": "sustained"}) for lv in r.get("levels") or []]


def n_users(n: Any) -> str:
    """'1 user', '8 users'."""
    return f"{n} user" if n == 1 else f"{n} users"


def row(r: dict[str, Any]) -> tuple[str, ...]:
    """One terminal table row from a result dict."""
    nodeid = str(r.get("nodeid", ""))
    case = nodeid.split("::")[-1] or nodeid
    return (f"[{r.get('kind', '')}] {case}", *cells(r))


def table(results: Iterable[dict[str, Any]]) -> list[str]:
    """The summary table as lines of aligned columns; the verdict column is left unpadded."""
    rows: list[tuple[str, ...]] = [COLUMNS]
    for r in results:
        rows.append(row(r))
        rows += [(f"  {label.strip()}", *cells(lv)) for label, lv in level_rows(r)]
    widths = [max(len(x[i]) for x in rows) for i in range(len(COLUMNS) - 1)]
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
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
