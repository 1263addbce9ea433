"""JUnit XML properties: ``specperf_<field>`` pairs per case, for ``record_property``/``user_properties``.

All values are strings: verdict, decode_tps, ttft_s, drift, ...; a load sweep adds ``specperf_users<N>_<field>``
per level, and each comparison ``specperf_cmp_<metric>[_ctx<N>][_users<N>]_{verdict,change,ci,p}``. Added to
each case as it ends (not a file of its own: pytest's ``--junitxml`` writes them). Never imports pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_specperf.cases.result_parts import CaseComparison, CategoryFigures, Crossover
from pytest_specperf.cases.results import LoadLevel, Recorded, Result, StreamResult
from pytest_specperf.report.table import Row, as_case
from pytest_specperf.report.table import finite_number as _num

#: result fields carried as specperf_<field>
JUNIT_FIELDS = ("verdict", "decode_tps", "ttft_s", "drift", "drift_verdict", "client_tps", "early_tps", "late_tps",
                "burst_tps", "prompt_tokens", "completion_tokens", "repeat", "concurrency", "decode_p10_tps",
                "total_tps", "common_window_s", "ttft_p50_s", "ttft_p90_s", "step_ms", "knee",
                # open-loop cases (rate, capacity)
                "achieved_rps", "attainment", "goodput_rps", "refused", "tpot_p90_ms", "e2e_p90_s", "max_rps",
                # reasoning phases; sessions
                "ttft_content_s", "reasoning_tokens", "content_tokens", "reasoning_tps", "content_tps",
                "turns", "users", "cache_hit", "ttft_growth_ms_per_1k")
#: per level of a load sweep, as specperf_users<N>_<field>
JUNIT_LEVEL_FIELDS = ("verdict", "decode_tps", "decode_p10_tps", "total_tps", "ttft_p50_s", "ttft_p90_s",
                      "accept_len", "step_ms", "drift")


def _s(v: Any) -> str:
    x = _num(v)
    if x is not None:
        return str(int(x)) if isinstance(v, int) else f"{x:.6g}"
    return str(v)


def junit_properties(result: Recorded | Mapping[str, Any], comparisons: Iterable[CaseComparison] | None = None
                     ) -> list[tuple[str, str]]:
    """``(name, value)`` string pairs for JUnit XML properties."""
    r = as_case(result)  # an error record: the fields it has
    # each field only where the case's kind has it and it was measured
    props = [(f"specperf_{k}", _s(v)) for k in JUNIT_FIELDS if (v := getattr(r, k, None)) is not None]
    props += [(f"specperf_{k}", " | ".join(texts)) for k, texts in (("warnings", r.warnings), ("notes", r.notes))
              if texts]
    concurrency = getattr(r, "concurrency", None)
    if isinstance(concurrency, list):  # a load sweep: its levels' list
        props[[k for k, _ in props].index("specperf_concurrency")] = (
            "specperf_concurrency", ",".join(str(c) for c in concurrency))
    if (_num(concurrency) or 1) > 1:
        props += _stream_props("specperf", getattr(r, "streams", None) or [])
    levels: list[LoadLevel] = getattr(r, "levels", None) or []
    for lv in levels:
        props += [(f"specperf_users{lv.concurrency}_{k}", _s(v)) for k in JUNIT_LEVEL_FIELDS
                  if (v := getattr(lv, k)) is not None]
        props += _stream_props(f"specperf_users{lv.concurrency}", lv.streams)
    props += _category_props(r)
    cross = getattr(r, "crossover", None)  # a load sweep's, or an error record's row's
    if isinstance(cross, Crossover):
        props.append(("specperf_crossover", cross.text))
    ccs = [cc for cc in comparisons if cc.nodeid == r.nodeid] if comparisons is not None else (r.comparisons or [])
    for cc in ccs:
        at = (f"_ctx{cc.ctx}" if cc.ctx is not None else "") + (f"_users{cc.users}" if cc.users is not None else "")
        if not cc.metric:
            props.append(("specperf_cmp" + at, str(cc.verdict)))
            continue
        name = f"specperf_cmp_{cc.metric}" + at
        props.append((f"{name}_verdict", str(cc.verdict)))
        c = cc.comparison
        if c is None:
            continue
        if c.change is not None:
            props.append((f"{name}_change", _s(c.change)))
        if c.change_ci:
            props.append((f"{name}_ci", ",".join(_s(x) for x in c.change_ci)))
        if c.p is not None:
            props.append((f"{name}_p", _s(c.p)))
    return props


#: per category of a case over a prompt file, as specperf_cat_<category>_<field>
JUNIT_CATEGORY_FIELDS = ("n", "n_prompts", "decode_tps_p50", "decode_tps_p10", "ttft_p50_s", "accept_len",
                         "accept_rate", "drift", "attainment", "speedup")


def category_props(result: Recorded | Mapping[str, Any]) -> list[tuple[str, str]]:
    """A prompt file's figures per category (only those the server showed)."""
    return _category_props(as_case(result))


def _category_props(result: Result | Row) -> list[tuple[str, str]]:
    cats: dict[str, CategoryFigures] | None = getattr(result, "categories", None)
    if cats is None:
        return []
    return [(f"specperf_cat_{name}_{k}", _s(v)) for name, f in cats.items()
            for k in JUNIT_CATEGORY_FIELDS if (v := getattr(f, k)) is not None]


def _stream_props(prefix: str, streams: list[StreamResult]) -> list[tuple[str, str]]:
    """A load case's per-stream decode and ttft, comma-separated in stream order."""
    return [(f"{prefix}_stream_{k}", ",".join(_s(getattr(x, k)) for x in streams)) for k in ("decode_tps", "ttft_s")
            if streams]
