"""Speculation's crossover: the concurrency at which B (speculation on) stops being faster for users than A (off).

Run on a ``load_sweep`` in A/B mode (``--specperf-ab=A,B``). Per level, B's speedup is the ratio of
per-user decode rates, B over A (every stream of every trial pooled per arm), with the interval
``compare.compare_case`` gives that ratio (98 % two-sided, i.e. 99 % one-sided either way). The
crossover is the first level whose point estimate is below 1 (or below ``min_speedup`` when the
case asks for one). ``min_speedup`` turns it into a gate: a level whose whole interval lies below
the floor fails; one whose point estimate is below but interval reaches it is inconclusive.
"""

from __future__ import annotations

from typing import Any

from . import compare
from .measure import median


def _decode(results: list[dict[str, Any]], users: int) -> list[float]:
    """Per-user decode rates at one level, over every trial of one arm."""
    out: list[float] = []
    for r in results:
        for lv in r.get("levels") or []:
            if lv.get("concurrency") == users:
                out += [s["decode_tps"] for s in lv.get("streams") or [] if s.get("decode_tps", 0) > 0]
    return out


def crossover(arm_a: list[dict[str, Any]], arm_b: list[dict[str, Any]], min_speedup: float | None = None
              ) -> dict[str, Any]:
    """Per level B's speedup over A for users, and the first level at which B is slower (or under the floor)."""
    floor = 1.0 if min_speedup is None else min_speedup
    levels = []
    for users in arm_b[0].get("concurrency") or []:
        a, b = _decode(arm_a, users), _decode(arm_b, users)
        if not a or not b:
            continue
        c = compare.compare_case(a, b, direction="higher", metric="decode_tps", against="A")
        lo, hi = (1.0 + x for x in c.change_ci)
        speedup = 1.0 + c.change
        verdict = "below" if hi < floor else "inconclusive" if speedup < floor else "holds"
        levels.append({"users": users, "speedup": speedup, "interval": [lo, hi], "verdict": verdict,
                       "a_decode_tps": median(a), "b_decode_tps": median(b), "n_a": len(a), "n_b": len(b)})
    first = next((lv for lv in levels if lv["speedup"] < floor), None)
    return {"floor": floor, "gated": min_speedup is not None, "levels": levels,
            "users": first["users"] if first else None, "speedup": first["speedup"] if first else None,
            "interval": first["interval"] if first else None, "text": _text(first, floor, levels)}


def _text(first: dict[str, Any] | None, floor: float, levels: list[dict[str, Any]]) -> str:
    if not levels:
        return "crossover not judged: no level measured on both arms"
    if first is None:
        return f"B faster for users at every level up to {levels[-1]['users']} users (speedup >= {floor:g})"
    lo, hi = first["interval"]
    what = "slower for users" if floor == 1.0 else f"under min_speedup {floor:g}"
    sure = "" if first["verdict"] == "below" else ", not significant"
    users = f"{first['users']} user" + ("" if first["users"] == 1 else "s")
    return (f"B {what} from {users}: speedup {first['speedup']:.2f} [{lo:.2f}, {hi:.2f}] "
            f"({first['b_decode_tps']:.1f} vs {first['a_decode_tps']:.1f} tok/s per user{sure})")


def apply(summary: dict[str, Any], arm_a: list[dict[str, Any]], arm_b: list[dict[str, Any]], inconclusive: str
          ) -> list[str]:
    """Attach the crossover to B's summary; fail it when min_speedup is asked and missed. Returns warnings."""
    result = crossover(arm_a, arm_b, summary.get("min_speedup"))
    summary["crossover"] = result
    if not result["gated"]:
        summary.setdefault("notes", []).append(result["text"])
        return []
    below = [lv for lv in result["levels"] if lv["verdict"] == "below"]
    unsure = [lv for lv in result["levels"] if lv["verdict"] == "inconclusive"]
    fail = below or (unsure if inconclusive == "fail" else [])
    if fail and summary.get("verdict") != "error":
        summary["verdict"] = "failed"
        # The crossover first: it is what the case asked (min_speedup), the rest explains the levels.
        summary["reason"] = "; ".join([result["text"]] + [x for x in [summary.get("reason", "")] if x])
        return []
    return [result["text"]] if unsure and inconclusive == "warn" else []
