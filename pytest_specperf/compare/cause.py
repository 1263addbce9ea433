"""What a change across runs comes from: acceptance, step time, prefill and cached share, each side's own figures.

Pure: never imports pytest, reads records or their JSON (``trials.read``). One rule for every comparison (a saved
baseline, A against B, an arm against the best, a run against its history): ``explain`` splits the metric's
change in log space, where the factors of a rate or a latency add (docs/statistics.md, "What a change comes
from"):

* a decode rate (``decode_tps``, ``total_tps``, ``tpot_p90_ms``, ...) is tokens per step over step time, so
  ``log(rate ratio) = log(acceptance ratio) - log(step time ratio) + other``;
* a time to first token is the prompt tokens the server had to prefill over its prefill rate, and those are the
  prompt's uncached share, so ``-log(TTFT ratio) = -log(uncached share ratio) - log(prompt ratio)
  + log(prefill rate ratio) + other``.

Each factor's share is its term over the metric's log change (better-is-positive, as ``Comparison.effect``), and
``other`` is what the measured factors leave (the comparison's per-trial figure against the sides' medians, stalls,
the client), so the shares add to exactly 1. The cause named is the factor with the largest share.

Each side's figures are its own: tokens per step from the server's acceptance counters where it exposes them
(``Acceptance.mean_len``, a level's ``accept_len``), else the stream's own tokens per chunk (one chunk per step);
step time as measured from the chunks' spacing (``step_ms``) where the case has it, else tokens per step over the
decode rate; the cached share as the server reported it (``cached_share``; a session's later turns, ``cache_hit``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_specperf.cases.figures import DIRECTIONS, Case, figure, sub_cases
from pytest_specperf.cases.result_parts import (
    ArmsTable,
    CaseComparison,
    Cause,
    CauseFactor,
    HistoryEntry,
    value_text,
)
from pytest_specperf.cases.results import (
    ErrorRecord,
    LoadLevel,
    Result,
    SessionResult,
    SustainedResult,
)
from pytest_specperf.compare.samples import Side
from pytest_specperf.run.acceptance import SLOWDOWN_TO_SPLIT

#: metrics that are a decode rate (or its inverse): tokens per step over step time.
DECODE = ("decode_tps", "client_tps", "total_tps", "early_tps", "late_tps", "burst_tps", "tpot_p90_ms")
#: metrics that are a time to first token: uncached prompt tokens over the prefill rate.
TTFT = ("ttft_s", "ttft_p90_s")
#: comparisons whose cause is worth naming (a passed one moved within the threshold).
EXPLAINED = ("regressed", "inconclusive", "improved")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _positive(v: Any) -> float | None:
    x = _num(v)
    return x if x is not None and x > 0 else None


def _geomean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and v > 0]
    if len(kept) == 1:
        return kept[0]  # as measured, not through exp(log(x))
    return math.exp(math.fsum(map(math.log, kept)) / len(kept)) if kept else None


def tokens_per_step(case: Case) -> tuple[float | None, str]:
    """(tokens per engine step, where it came from): the server's acceptance where it counts it, else the stream's
    tokens per chunk on a server that sends one chunk per step."""
    acc = case.acceptance if isinstance(case, SustainedResult | SessionResult) else None
    mean = _positive(acc.mean_len) if acc is not None else None
    if acc is not None and mean is not None:
        return mean, acc.source or "server"
    level = _positive(figure(case, "accept_len"))  # a load level's
    if level is not None:
        return level, (case.accept_source if isinstance(case, LoadLevel) else None) or "server"
    tpc = _positive(figure(case, "tokens_per_chunk"))
    return tpc, "chunks" if tpc is not None else ""


def figures(case: Case, metric: str) -> dict[str, float | None]:
    """One side's unit (a case, a level, a sweep point, a trial) as the split reads it: the metric, tokens per step,
    step time (ms), TTFT (s; the metric's percentile where it is one), cached share and prompt tokens."""
    accept, _ = tokens_per_step(case)
    decode = _positive(figure(case, "decode_tps"))
    step = _positive(figure(case, "step_ms"))
    if step is None and accept is not None and decode is not None:
        step = 1000.0 * accept / decode  # seconds per step = tokens per step / tokens per second
    share = _num(case.cache_hit) if isinstance(case, SessionResult) else None
    if share is None:
        share = _num(figure(case, "cached_share"))
    prompt = None if isinstance(case, ErrorRecord) else case.prompt_tokens
    return {"value": _positive(figure(case, metric)), "accept": accept, "step_ms": step,
            "ttft_s": _positive(figure(case, metric if metric in TTFT else "ttft_s")),
            "share": share if share is not None and 0.0 <= share <= 1.0 else None,
            "prompt": _positive(prompt)}


def _side(cases: Sequence[Case], metric: str) -> tuple[dict[str, float | None], str]:
    """A side's figures over its units (geometric means; the cached share's arithmetic mean) and its acceptance's
    source."""
    each = [figures(c, metric) for c in cases]
    out = {k: _geomean([f[k] for f in each]) for k in ("value", "accept", "step_ms", "ttft_s", "prompt")}
    shares = [f["share"] for f in each if f["share"] is not None]
    out["share"] = math.fsum(shares) / len(shares) if shares else None
    sources = sorted({tokens_per_step(c)[1] for c in cases} - {""})
    return out, "/".join(sources)


def _log_ratio(a: float | None, b: float | None) -> float | None:
    return math.log(b / a) if a is not None and b is not None and a > 0 and b > 0 else None


def _uncached(side: dict[str, float | None]) -> float | None:
    """Prompt tokens the server prefilled: the uncached share of the prompt, at least one token (the last prompt
    token is always computed)."""
    prompt = side["prompt"]
    if prompt is None:
        return None
    return max(prompt * (1.0 - (side["share"] or 0.0)), 1.0)


def explain(metric: str, effect: float, base: Sequence[Case], cand: Sequence[Case],
            sides: tuple[str, str] = ("baseline", "now")) -> Cause | None:
    """The change of ``metric`` between two sides' units, split into its factors (module docstring).

    ``effect`` is the comparison's better-is-positive relative change (``Comparison.effect``); ``base`` and
    ``cand`` are each side's records of one unit. None when neither factor of the metric was measured on both
    sides (a two-point case has no steps), or the metric is neither a rate nor a TTFT."""
    if (metric not in DECODE and metric not in TTFT) or not base or not cand or not effect > -1:
        return None
    (b, b_src), (c, c_src) = _side(base, metric), _side(cand, metric)
    g = math.log1p(effect)  # the metric's log change, better-is-positive
    factors: list[tuple[CauseFactor, float | None]] = []  # (factor, its log term, better-is-positive)

    def add(name: str, unit: str, key: str, term: float | None, source: str = "") -> None:
        lo, hi = b[key], c[key]
        # a share's relative change means little (0.99 -> 0.00 is -100% whatever the cache did): both values say it
        change = hi / lo - 1 if lo is not None and hi is not None and lo > 0 and key != "share" else None
        factors.append((CauseFactor(name=name, unit=unit, base=lo, now=hi, change=change, source=source), term))

    if metric in DECODE:
        accept, step = _log_ratio(b["accept"], c["accept"]), _log_ratio(b["step_ms"], c["step_ms"])
        if accept is None and step is None:
            return None
        src = b_src if b_src == c_src else f"{b_src} -> {c_src}"
        add("acceptance", "tokens/step", "accept", accept, src)
        add("step time", "ms", "step_ms", None if step is None else -step)
    else:
        ub, uc = _uncached(b), _uncached(c)
        if _log_ratio(b["ttft_s"], c["ttft_s"]) is None or ub is None or uc is None:
            return None
        known = b["share"] is not None and c["share"] is not None
        if known:
            add("cached share", "of the prompt", "share",
                -math.log(max(1 - (c["share"] or 0.0), 1e-12) / max(1 - (b["share"] or 0.0), 1e-12)))
        prompt = _log_ratio(b["prompt"], c["prompt"])
        if prompt:  # a prompt of another length: its own term (the same prompt, as usual, has none)
            add("prompt", "tokens", "prompt", -prompt)
        b["prefill"] = ub / (b["ttft_s"] or 1.0)
        c["prefill"] = uc / (c["ttft_s"] or 1.0)
        # the prefill rate over the tokens that were prefilled: TTFT = uncached tokens / rate
        add("prefill", "uncached tok/s", "prefill", _log_ratio(b["prefill"], c["prefill"]))
        if not known:
            # without the server's cached tokens the cache cannot be told from the prefill: shown, not split
            add("cached share", "of the prompt", "share", None)
    terms = [(f, t) for f, t in factors if t is not None]
    if abs(g) >= SLOWDOWN_TO_SPLIT and terms:  # a smaller change is noise, whose split is arbitrary
        for f, t in terms:
            f.share = t / g
        other = CauseFactor(name="other", unit="", share=1.0 - math.fsum(t for _, t in terms) / g)
        ranked = sorted([f for f, _ in terms], key=lambda f: -(f.share or 0.0))
        named: str | None = max([*ranked, other], key=lambda f: f.share or 0.0).name
        shown = [*ranked, *(f for f, t in factors if t is None), other]
    else:
        shown, named = [f for f, _ in factors], None
    out = Cause(metric=metric, change=_change(metric, effect), sides=list(sides), named=named,
                base=b["value"], now=c["value"], factors=shown)
    out.text = text(out)
    return out


def _change(metric: str, effect: float) -> float:
    """The metric's plain relative change (``Comparison.change``) from its better-is-positive ``effect``."""
    return effect if DIRECTIONS.get(metric, "higher") == "higher" else 1.0 / (1.0 + effect) - 1.0


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%".replace("-0.0%", "+0.0%")


def factor_text(f: CauseFactor) -> str:
    """'step time 20.0 -> 22.0 ms (+10.0%, explains 102%)'; 'other explains -2%'."""
    if f.name == "other":
        return f"other explains {round((f.share or 0.0) * 100)}%"
    moved = [_pct(f.change)] if f.change is not None else []
    if f.share is not None:
        moved.append(f"explains {round(f.share * 100)}%")
    tail = f" ({', '.join(moved)})" if moved else ""
    source = f" from {f.source}" if f.source else ""
    unit = f" {f.unit}" if f.unit else ""
    return f"{f.name} {value_text(f.base, f.unit)} -> {value_text(f.now, f.unit)}{unit}{source}{tail}"


def _shown(f: CauseFactor) -> bool:
    """Whether the line names ``f``: measured on a side, and a cached share only where it moved (the same share on
    both sides is no news about TTFT; the record and the report still hold it)."""
    if f.base is None and f.now is None:
        return False
    return f.name != "cached share" or f.base is None or f.now is None or abs(f.now - f.base) >= 0.005


def text(c: Cause) -> str:
    """The cause in one line, for a reason: 'why decode_tps -8.9% (baseline -> now): step time 20.0 -> 22.0 ms
    (+10.0%, explains 102%), acceptance 3.00 -> 3.00 tokens/step from metrics (+0.0%, explains 0%), other explains
    -2%'."""
    head = f"why {c.metric} {_pct(c.change)} ({c.sides[0]} -> {c.sides[1]})"
    parts = [factor_text(f) for f in c.factors if f.name == "other" or _shown(f)]
    if c.named is None:
        return f"{head}: too small or too little measured to split; {', '.join(parts)}"
    return f"{head}: {', '.join(parts)}"


def _errored(r: Case) -> bool:
    return isinstance(r, ErrorRecord) or (isinstance(r, Result) and r.verdict == "error")


def attach(ccs: list[CaseComparison], base: Side, cand: Side,
           sides: tuple[str, str] = ("baseline", "now")) -> list[CaseComparison]:
    """Each comparison that moved (regressed, inconclusive, improved) with its ``cause`` and the cause's line added
    to its reason, read from the two sides' records of its unit (``gates``: a baseline's, A's, B's)."""
    out = []
    for cc in ccs:
        c = cc.comparison
        if c is None or cc.metric is None or cc.verdict not in EXPLAINED:
            out.append(cc)
            continue
        key = (cc.nodeid, cc.ctx, cc.users)
        why = explain(cc.metric, c.effect, base.cases(key), cand.cases(key), sides)
        if why is None:
            out.append(cc)
            continue
        reason = f"{cc.reason}; {why.text}"
        out.append(replace(cc, reason=reason, cause=why, comparison=replace(c, reason=reason)))
    return out


#: the most earlier runs a history cause reads (the latest of those the verdict was judged against)
HISTORY_RUNS = 5


def judged_runs(entry: HistoryEntry, run_ids: Sequence[int]) -> list[int]:
    """The earlier runs (ids, oldest first, at most ``HISTORY_RUNS``) a history entry's change is against: the level
    before the change that decided it (``began``), else the runs since the last change point (the prediction's)."""
    ids = sorted(run_ids)
    marks = sorted(c.run for c in entry.changes if c.run is not None)
    began = entry.began.run if entry.began is not None else None
    if began is not None:
        start = max([m for m in marks if m < began], default=ids[0] if ids else 0)
        kept = [i for i in ids if start <= i < began]
    else:
        kept = [i for i in ids if not marks or i >= marks[-1]]
    return kept[-HISTORY_RUNS:]


def explain_entry(entry: HistoryEntry, past: Sequence[Case], now: Sequence[Case]) -> None:
    """Set a history entry's ``cause`` and add its line to the entry's reason: ``past`` the entry's unit in each run
    of ``judged_runs`` whose result was read, ``now`` in this run (``history/against_history.py`` finds them by the
    key the store gives each unit, ``records.units``). The change is this run against the prediction, or for a
    change point the level now against the level before it."""
    effect = entry.effect
    ch = entry.began
    if entry.by == "change point" and ch is not None and ch.level_before and ch.level_now:
        ratio = ch.level_now / ch.level_before
        effect = ratio - 1 if DIRECTIONS.get(entry.metric, "higher") == "higher" else 1 / ratio - 1
    found = explain(entry.metric, effect, past, now, ("history", "now"))
    if found is not None:
        entry.cause = found
        entry.reason = f"{entry.reason}; {found.text}"


def _level_units(results: Sequence[Case], users: int) -> list[Case]:
    """Each trial's unit at ``users``: a load sweep's level, or a load case run at that concurrency."""
    out: list[Case] = []
    for r in results:
        if not _errored(r):
            out += [case for _, _, case in sub_cases(r)
                    if isinstance(case, SustainedResult | LoadLevel) and case.concurrency == users]
    return out


def for_arms(t: ArmsTable, results: Mapping[str, Sequence[Case]]) -> None:
    """Set the ``cause`` of each level where the deployed arm is below the best or not shown within it: the best
    arm's trials against the deployed arm's at that level (``results``: each arm's trials). For ``gates.run_arms``."""
    if t.gate is None:
        return
    for lv in t.gate.levels:
        if lv.verdict == "holds" or lv.best is None or lv.best not in results or t.gate.deployed not in results:
            continue
        lv.cause = explain("decode_tps", lv.ratio - 1, _level_units(results[lv.best], lv.users),
                           _level_units(results[t.gate.deployed], lv.users), (lv.best, t.gate.deployed))
