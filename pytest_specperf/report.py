"""Reports: the end-of-run table and the atomically written JSON file."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import __version__

COLUMNS = ("case", "ctx", "tokens", "ttft", "decode tok/s", "early -> late", "drift", "verdict")


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def row(r: dict[str, Any]) -> tuple[str, ...]:
    """One table row from a result dict."""
    kind = r.get("kind", "")
    case = r.get("nodeid", "").split("::")[-1] or r.get("nodeid", "")
    if kind == "ctx_sweep" and r.get("points"):
        ctx = f"{r['points'][0]['prompt_tokens']}..{r['points'][-1]['prompt_tokens']}"
    else:
        ctx = _fmt(r.get("prompt_tokens") or r.get("ctx"), "d")
    tokens = _fmt(r.get("completion_tokens") if kind == "sustained" else
                  (r["long"] - r["short"] if kind == "two_point" and "long" in r else None), "d")
    ttft = f"{r['ttft_s'] * 1000:.0f} ms" if r.get("ttft_s") else "-"
    early, late = r.get("early_tps"), r.get("late_tps")
    el = f"{early:.1f} -> {late:.1f}" if early is not None and late is not None else "-"
    drift = _fmt(r.get("drift"), ".2f")
    verdict = r.get("verdict", "")
    if verdict != "passed" and r.get("reason"):
        verdict = f"{verdict}: {r['reason']}"
    return (f"[{kind}] {case}", ctx, tokens, ttft, _fmt(r.get("decode_tps")), el, drift, verdict)


def table(results: Iterable[dict[str, Any]]) -> list[str]:
    """The summary table as lines of aligned columns; the verdict column is left unpadded."""
    rows = [COLUMNS, *(row(r) for r in results)]
    widths = [max(len(x[i]) for x in rows) for i in range(len(COLUMNS) - 1)]
    out = []
    for x in rows:
        cells = [x[i].ljust(widths[i]) if i == 0 else x[i].rjust(widths[i]) for i in range(len(widths))]
        out.append("  ".join([*cells, x[-1]]))
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
