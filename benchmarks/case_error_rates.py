"""False alarms per case: identical arms or sides, counted over everything a case judges (docs/statistics.md).

A case fails when any of its levels, categories or metrics fails, so the stated rate (``ALPHA``, 1 %) must hold
for the case, not for each comparison in it. Seeded simulations of the project's own functions, nothing changed
between the sides, per condition:

* ``crossover``: a load sweep of L levels in A/B with ``min_speedup=1.0`` (``crossover.crossover``): some
  level ``below``;
* ``categories``: an A/B case over a prompt file of K categories (``categories.apply``): some category's
  speedup interval wholly under 1;
* ``arms``: N identical arms over L levels with ``max_loss_vs_best=0.05`` (``arms.table``): the deployed arm
  ``below`` at some level; and the share of runs the gate is inconclusive (fixed 5 trials) or, with
  ``repeat="auto"`` (``interleaved.run_arms``), holds within ``max_repeat``;
* ``regression``: a load sweep of L levels in A/B through the regression gate (``samples.per_trial`` and
  ``trials.compare_ab``, every level x decode_tps, ttft_s, total_tps): some comparison ``regressed``;
* ``trials``: one metric, 5, 10 and 20 trials a side (``trials.compare_case``), trials lognormal, two-group
  (40 % of trials 10 % slower) or skewed (1 + 5 % x exponential): ``regressed``;
* ``load trials``: a case that sends at once (``sustained(concurrency=8)``, a 4-level ``load_sweep``, a ``rate``
  case, a ``session`` of 4 users, a ``replay`` built request by request, ``replay_short``: a replay whose
  candidate server is not sent the longest rows) saved with ``repeat=N`` (its trials combined as the plugin saves
  them, ``combine.aggregate``), then a candidate run through the plugin's whole-case trial loop and gate
  (``repeats.run_trials``, ``gates.against_baseline``; ``repeat=N`` or ``"auto"``): the case ``failed``. Identical
  deploys (false alarms), and a deploy 6 % slower (detections; decode, aggregate and goodput x0.94, TTFT and the
  other times /0.94). A rate case's and a replay's trials give each compared figure once (``case_trial``).

A trial's streams share an offset (between-trial sd 3 %, within 1 %, 8 users). Run:
``python benchmarks/case_error_rates.py`` (4,000 comparisons per condition, about 25 minutes on 2 busy cores, the
load-trials rows 11 of them;
``--quick``: 100 per condition, under a minute; ``--load-trials``: only the load-trials rows; ``--kinds rate
session``: only those kinds' load-trials rows). The ± is one binomial standard error.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from typing import Any

import numpy as np

from pytest_specperf.cases import figures
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.cases.results import LoadSweepResult, Result
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.compare import arms, categories, crossover, gates, samples
from pytest_specperf.compare import trials as compare
from pytest_specperf.measure import combine, interleaved, repeats

USERS = 8

#: What a result record requires besides the figures this simulation draws (the gates read records).
_RESULT = {"endpoint": "", "model": "sim", "server": "sim", "ctx": 0, "prompt_tokens": None}
_STREAM = {"prompt_tokens": None, "completion_tokens": 0, "ttft_s": 0.0, "total_s": 0.0, "decode_tps": 0.0,
           "client_tps": 0.0, "window_tokens": None, "window_tps": [], "early_tps": None, "late_tps": None,
           "drift": None, "trend_p": None, "stalls": [], "tokens_per_chunk": 0.0, "count_source": "",
           "counts_exact": True}


def _streams(data: dict[str, Any]) -> dict[str, Any]:
    return {"streams": [{**_STREAM, **s} for s in data["streams"]]} if "streams" in data else {}


def record(data: dict[str, Any]) -> Result:
    """A simulated trial (the figures the gates read, as its JSON) as its result record, loaded as a saved run's
    results are (``saved_results.load_record``); the seeded benchmarks share it (they run as scripts, with this
    folder on the path)."""
    levels = {"levels": [{**lv, **_streams(lv)} for lv in data["levels"]]} if "levels" in data else {}
    r = load_record({**_RESULT, **data, **_streams(data), **levels})
    assert isinstance(r, Result), "a simulated trial is measured, never an error"
    return r


def level_row(rng: np.random.Generator, users: int, between: float = 0.03, within: float = 0.01,
              factor: float = 1.0) -> dict[str, Any]:
    """One level of one trial: every user's decode and TTFT share the trial's offset (``factor`` as fast)."""
    off = rng.normal(0, between)
    tps = 100 * factor * np.exp(off + rng.normal(0, within, USERS))
    ttft = 0.2 / factor * np.exp(-off + rng.normal(0, within, USERS))
    streams = [{"decode_tps": float(v), "ttft_s": float(t)} for v, t in zip(tps, ttft, strict=True)]
    return {"concurrency": users, "streams": streams,
            "decode_tps": float(np.median(tps)), "ttft_s": float(np.median(ttft)), "total_tps": float(tps.sum())}


def sweep(rng: np.random.Generator, levels: list[int], trials: int = 5) -> list[Result]:
    """One arm's load-sweep results, one record per trial."""
    return [record({"kind": "load_sweep", "nodeid": "t", "concurrency": levels, "endpoint": "", "verdict": "passed",
                    "levels": [level_row(rng, u) for u in levels]}) for _ in range(trials)]


def crossover_fails(rng: np.random.Generator, n_levels: int) -> bool:
    lv = list(range(1, n_levels + 1))
    return any(x.verdict == "below" for x in crossover.crossover(sweep(rng, lv), sweep(rng, lv), 1.0).levels)


def category_arm(rng: np.random.Generator, k: int, trials: int = 5) -> list[Result]:
    out = []
    for _ in range(trials):
        off = rng.normal(0, 0.03)
        out.append(record({"kind": "sustained", "categories": {f"c{i}": {"n": 3, "decode_tps_p50": float(np.median(
            100 * np.exp(off + rng.normal(0, 0.02, 3))))} for i in range(k)}}))
    return out


def categories_fail(rng: np.random.Generator, k: int) -> bool:
    summary = record({"kind": "sustained"})
    a, b = category_arm(rng, k), category_arm(rng, k)
    summary.categories = combine.combine_categories(b)  # B's trials combined, as measuring hands them over
    categories.apply(summary, a, b)
    return any(f.speedup_interval[1] < 1 for f in summary.categories.values())  # type: ignore[attr-defined]


def arms_gate(rng: np.random.Generator, n_arms: int, n_levels: int) -> str:
    lv = list(range(1, n_levels + 1))
    t = arms.table({name: sweep(rng, lv) for name in "abcd"[:n_arms]}, baseline="a", max_loss=0.05)
    vs = [x.verdict for x in t.gate.levels] if t.gate is not None else []
    return "below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"


def arms_auto(rng: np.random.Generator, n_arms: int, n_levels: int) -> str:
    lv = list(range(1, n_levels + 1))

    def measure(name: str, levels: list[int] | None) -> Any:
        return sweep(rng, levels or lv, 1)[0]

    row, _ = interleaved.run_arms(measure, list("abcd"[:n_arms]), 20, gates.Gate(), baseline="a", max_loss=0.05,
                            auto=True)
    assert row.arms is not None and row.arms.gate is not None
    vs = [x.verdict for x in row.arms.gate.levels]
    return "below" if "below" in vs else "inconclusive" if "inconclusive" in vs else "holds"


def regression_fails(rng: np.random.Generator, n_levels: int) -> bool:
    lv = list(range(1, n_levels + 1))
    a, b = samples.per_trial(sweep(rng, lv)), samples.per_trial(sweep(rng, lv))
    return any(cc.verdict == "regressed" for cc in compare.compare_ab(a, b, metrics=figures.METRICS))


_LOAD = record({"kind": "sustained", "nodeid": "t", "concurrency": USERS, "verdict": "passed"})
_SWEEP = record({"kind": "load_sweep", "nodeid": "t", "concurrency": [1, 2, 3, 4], "verdict": "passed",
                 "levels": [{"concurrency": u, "verdict": "passed"} for u in (1, 2, 3, 4)]})


def load_trial(rng: np.random.Generator, sweep_levels: bool, factor: float, between: float) -> Result:
    """One trial of a load case as its record: one value per level and metric (a trial's users are one sample)."""
    def figures(users: int) -> dict[str, Any]:
        row = level_row(rng, users, between, factor=factor)
        return {k: row[k] for k in ("decode_tps", "ttft_s", "total_tps")}

    if sweep_levels:
        assert isinstance(_SWEEP, LoadSweepResult)
        return dataclasses.replace(_SWEEP, levels=[dataclasses.replace(lv, **figures(lv.concurrency))
                                                   for lv in _SWEEP.levels])
    return dataclasses.replace(_LOAD, **figures(USERS))


#: A rate case's (and a replay's) compared figures per trial, unchanged deploy: what a few dozen requests at a
#: steady rate give (each trial's median and p90s; attainment and goodput under an SLO most requests meet).
RATE_FIGURES = {"goodput_rps": 9.0, "attainment": 0.9, "ttft_p90_s": 0.3, "tpot_p90_ms": 25.0, "e2e_p90_s": 2.0,
                "decode_tps": 40.0, "ttft_s": 0.15}
#: A session's per trial (its median turn's decode and TTFT, the aggregate of its users).
SESSION_FIGURES = {"decode_tps": 100.0, "ttft_s": 0.2, "total_tps": 400.0}
_RATE = record({"kind": "rate", "nodeid": "t", "verdict": "passed", "rps": 10.0, "requests": 40,
                "slo": {"e2e_s": 2.5}, **RATE_FIGURES})
_SESSION = record({"kind": "session", "nodeid": "t", "verdict": "passed", "users": 4, "turns": 3,
                   **SESSION_FIGURES})
_REPLAY = record({"kind": "replay", "nodeid": "t", "verdict": "passed", "rps": 10.0, "requests": 40,
                  "trace": "builtin:mooncake-conversation", "slo": {"e2e_s": 2.5}, **RATE_FIGURES})
_CASE_RECORDS = {"rate": _RATE, "session": _SESSION, "replay": _REPLAY}
#: The kinds of the load-trials rows and their specs (``repeat`` added per row).
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "sustained": ("sustained", {"concurrency": USERS, "tokens": 64}),
    "load_sweep": ("load_sweep", {"concurrency": [1, 2, 3, 4]}),
    "rate": ("rate", {"rps": 10, "requests": 40, "slo": {"e2e_s": 2.5}, "min_attainment": 0.5}),
    "session": ("session", {"users": 4, "turns": 3}),
    "replay": ("replay", {"trace": "builtin:mooncake-conversation", "speed": 4, "duration_s": 3}),
}
KINDS["replay_short"] = KINDS["replay"]
#: A kind whose baseline was saved as another: a replay whose candidate server cannot take the longest rows.
SAVED_KIND = {"replay_short": "replay"}
#: The shorter context of ``replay_short``'s candidate: the rows over it (5 of the 40) are not sent.
SHORT_CONTEXT = 3000


#: A replay's trace rows (prompt tokens; the same rows on both sides, every trial), a long-tailed mix as a
#: conversation trace has: median 2,000, the longest over 15,000.
TRACE_ROWS = [int(x) for x in np.random.default_rng(7).lognormal(math.log(2000), 1.0, 40).clip(100, 30_000)]
#: A request's own noise on top of its trial's offset (requests vary more than a trial's percentiles).
ROW_NOISE = 0.05


def replay_trial(rng: np.random.Generator, factor: float, between: float, longest: int | None = None) -> Result:
    """One trial of a replay as its record, request by request: each row's TTFT (prefill of its prompt), TPOT and
    e2e (64 tokens) and decode share the trial's offset (``between``) with ``ROW_NOISE`` of their own, and the
    case's figures are their percentiles, as ``rate.summarize`` takes them. ``factor`` as fast; ``longest``: rows
    with more prompt tokens are not sent (a server with a shorter context)."""
    off = rng.normal(0, between)
    requests, met = [], 0
    for i, n in enumerate(TRACE_ROWS):
        if longest is not None and n > longest:
            continue
        slow = math.exp(-off + rng.normal(0, ROW_NOISE)) / factor
        ttft, tpot = (0.03 + n / 20_000) * slow, 25.0 * (1 + n / 10_000) * slow
        e2e = ttft + 64 * tpot / 1000
        met += e2e <= 2.5
        requests.append({"at_s": i * 0.1, "sent_s": i * 0.1, "late_s": 0.0, "status": 200, "row": i + 1,
                         "ttft_s": ttft, "tpot_ms": tpot, "e2e_s": e2e, "decode_tps": 1000 / tpot, "met": e2e <= 2.5})
    pct: Any = lambda key, q: float(np.percentile([r[key] for r in requests], q))  # noqa: E731
    duration = 4.0 + max(r["e2e_s"] for r in requests)
    return record({**_REPLAY.as_dict(), "per_request": requests, "requests": len(requests),
                   "ttft_s": pct("ttft_s", 50), "ttft_p90_s": pct("ttft_s", 90), "tpot_p90_ms": pct("tpot_ms", 90),
                   "e2e_p90_s": pct("e2e_s", 90), "decode_tps": pct("decode_tps", 50),
                   "attainment": met / len(requests), "goodput_rps": met / duration})


def case_trial(rng: np.random.Generator, kind: str, factor: float, between: float,
               within: float = 0.01) -> Result:
    """One trial of a rate case, a session or a replay as its record: each compared figure once, all sharing the
    trial's offset (``between``; a busy host slows every figure of a trial together) with ``within`` of its own on
    top. ``factor`` as fast: every figure that many times better or worse (0.94: rates x0.94, times /0.94)."""
    base = RATE_FIGURES if kind in ("rate", "replay") else SESSION_FIGURES
    off = rng.normal(0, between)
    changes: dict[str, Any] = {}
    for m, v in base.items():
        up = figures.DIRECTIONS[m] == "higher"
        x = v * (factor if up else 1 / factor) * math.exp((off if up else -off) + rng.normal(0, within))
        changes[m] = min(x, 1.0) if m == "attainment" else x  # a share of requests
    return dataclasses.replace(_CASE_RECORDS[kind], **changes)


def kind_trial(rng: np.random.Generator, kind: str, factor: float, between: float) -> Result:
    """One trial of a case of ``kind`` (a load case's, or ``case_trial``'s)."""
    if kind in ("sustained", "load_sweep"):
        return load_trial(rng, kind == "load_sweep", factor, between)
    if kind == "replay":
        return replay_trial(rng, factor, between)
    if kind == "replay_short":  # a server with a shorter context: the longest rows are not sent
        return replay_trial(rng, factor, between, SHORT_CONTEXT)
    return case_trial(rng, kind, factor, between)


def load_trials_fail(rng: np.random.Generator, kind: str, saved: int, repeat: int | str, factor: float,
                     between: float) -> tuple[bool, int]:
    """(failed, candidate trials): a case of ``kind`` (``KINDS``) saved with ``saved`` trials, then judged as the
    plugin judges it."""
    name, keywords = KINDS[kind]
    spec = build_spec(name, {**keywords, "repeat": repeat})
    saved_kind = SAVED_KIND.get(kind, kind)
    base = combine.aggregate([kind_trial(rng, saved_kind, 1.0, between) for _ in range(saved)]) if saved > 1 else \
        kind_trial(rng, saved_kind, 1.0, between)
    gate = gates.Gate(0.05)
    if repeat == 1:
        row = kind_trial(rng, kind, factor, between)
    else:
        row = repeats.run_trials(lambda _: kind_trial(rng, kind, factor, between), spec, gate,
                               baseline=[base], nodeid="t")
    gates.against_baseline(gate, row, [base], auto=repeat == "auto")
    return row.verdict == "failed", int(getattr(row, "repeat", None) or 1)


def draw(rng: np.random.Generator, shape: str, n: int) -> np.ndarray:
    if shape == "two-group":
        x = 100 * np.exp(rng.normal(0, 0.01, n))
        x[rng.random(n) < 0.4] *= 0.9
        return x
    if shape == "skewed":
        return 100 * (1 + 0.05 * rng.exponential(1, n))
    return 100 * np.exp(rng.normal(0, 0.03, n))


def trials_fail(rng: np.random.Generator, shape: str, n: int) -> bool:
    return compare.compare_case(draw(rng, shape, n), draw(rng, shape, n), direction="higher").verdict == "regressed"


def rate(hits: int, n: int) -> str:
    p = hits / n
    return f"{p:6.2%} ± {math.sqrt(max(p, 1 / n) * (1 - p) / n):.2%}"


def main() -> None:
    """Print one row per condition."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comparisons", type=int, default=4000, help="seeded comparisons per condition (default 4000)")
    ap.add_argument("--quick", action="store_true", help="100 comparisons per condition: a check that it runs")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--load-trials", action="store_true", help="only the load-trials rows")
    ap.add_argument("--kinds", nargs="+", choices=list(KINDS), help="only the load-trials rows of these kinds")
    args = ap.parse_args()
    n = 100 if args.quick else args.comparisons
    t0 = time.perf_counter()
    if not args.load_trials and not args.kinds:
        other_conditions(args, n)
    load_trials_rows(args, n)
    print(f"({time.perf_counter() - t0:.0f} s)")


def other_conditions(args: argparse.Namespace, n: int) -> None:
    """The rows of every gate but load trials."""
    print(f"{n} seeded comparisons per condition, nothing changed; stated rate {compare.ALPHA:.0%} per case")
    conditions: list[tuple[str, Any]] = [
        *((f"crossover, {k} levels, min_speedup 1.0", lambda r, k=k: crossover_fails(r, k)) for k in (1, 4, 6)),
        *((f"categories, {k}, some below 1", lambda r, k=k: categories_fail(r, k)) for k in (3, 4, 6)),
        *((f"regression gate A/B, {k} levels x 3 metrics", lambda r, k=k: regression_fails(r, k)) for k in (1, 4)),
        *((f"trials, {s}, {k} vs {k}", lambda r, s=s, k=k: trials_fail(r, s, k))
          for s in ("lognormal", "two-group", "skewed") for k in (5, 10, 20)),
        *((f"arms, {a} arms x {k} levels, max_loss 0.05: below", lambda r, a=a, k=k: arms_gate(r, a, k) == "below")
          for a, k in ((3, 1), (3, 4))),
    ]
    for i, (name, fails) in enumerate(conditions):
        rng = np.random.default_rng([args.seed, i])
        hits = sum(bool(fails(rng)) for _ in range(n))
        print(f"{name:<52} false alarms {rate(hits, n)}", flush=True)
    for a, k in ((2, 1), (3, 1), (3, 4)):
        rng = np.random.default_rng([args.seed, 100 + a * 10 + k])
        fixed = [arms_gate(rng, a, k) for _ in range(n)]
        auto = [arms_auto(rng, a, k) for _ in range(max(20, n // 10))]
        print(f"arms, {a} identical x {k} levels, max_loss 0.05: 5 trials inconclusive "
              f"{fixed.count('inconclusive') / n:.1%}; repeat=\"auto\" holds {auto.count('holds') / len(auto):.1%}, "
              f"below {auto.count('below') / len(auto):.1%} ({len(auto)} runs)", flush=True)


#: The load-trials rows: (what, kind, saved trials, candidate's repeat, factor, between trials).
LOAD_ROWS: tuple[tuple[str, str, int, int | str, float, float], ...] = (
    ("sustained(concurrency=8), identical", "sustained", 5, 5, 1.0, 0.03),
    ("sustained(concurrency=8), identical", "sustained", 10, 10, 1.0, 0.02),
    ("sustained(concurrency=8), identical", "sustained", 10, "auto", 1.0, 0.02),
    ("load_sweep 4 levels, identical", "load_sweep", 5, 5, 1.0, 0.03),
    ("load_sweep 4 levels, identical", "load_sweep", 5, 5, 1.0, 0.06),
    ("sustained(concurrency=8), 6 % slower", "sustained", 1, 1, 0.94, 0.02),
    ("sustained(concurrency=8), 6 % slower", "sustained", 5, 5, 0.94, 0.02),
    ("sustained(concurrency=8), 6 % slower", "sustained", 10, 10, 0.94, 0.02),
    ("sustained(concurrency=8), 6 % slower", "sustained", 10, 10, 0.94, 0.03),
    ("sustained(concurrency=8), 6 % slower", "sustained", 10, "auto", 0.94, 0.02),
    ("load_sweep 4 levels, 6 % slower", "load_sweep", 10, 10, 0.94, 0.02))
#: Rows of the other kinds that take whole-case trials, each at the same conditions (seeded apart from the above).
CASE_ROWS: tuple[tuple[str, int, int | str, float, float], ...] = (
    ("identical", 5, 5, 1.0, 0.03),
    ("identical", 10, 10, 1.0, 0.02),
    ("identical", 10, "auto", 1.0, 0.02),
    ("identical", 5, 5, 1.0, 0.06),
    ("6 % slower", 5, 5, 0.94, 0.02),
    ("6 % slower", 10, 10, 0.94, 0.02),
    ("6 % slower", 10, 10, 0.94, 0.03),
    ("6 % slower", 10, "auto", 0.94, 0.02))
CASE_KINDS = {"rate": "rate (5 metrics)", "session": "session(users=4)",
              "replay": "replay (5 metrics, 40 rows, 3 taken row by row)",
              "replay_short": "replay, the candidate's longest rows not sent"}


def load_trials_rows(args: argparse.Namespace, n: int) -> None:
    """Cases saved with repeat=N and judged against it: false alarms and detections per case."""
    print("load trials against a saved baseline, 5 % threshold, 8 users, 1 % within a trial:")
    rows = [*LOAD_ROWS, *((f"{CASE_KINDS[k]}, {what}", k, saved, repeat, factor, between)
                          for k in CASE_KINDS for what, saved, repeat, factor, between in CASE_ROWS)]
    for j, (what, kind, saved, repeat, factor, between) in enumerate(rows):
        if args.kinds and kind not in args.kinds:
            continue  # seeded by its place in the list, so a row reads the same run alone or with the others
        rng = np.random.default_rng([args.seed, 200 + j])
        runs = [load_trials_fail(rng, kind, saved, repeat, factor, between) for _ in range(n)]
        hits = sum(f for f, _ in runs)
        label = f"{what}, {saved} saved vs {repeat}, {between:.0%} between"
        print(f"  {label:<72} failed {rate(hits, n)} (mean trials {np.mean([k for _, k in runs]):.1f})", flush=True)


if __name__ == "__main__":
    main()
