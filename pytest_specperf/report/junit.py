"""JUnit XML properties: ``specperf_<field>`` pairs per case, for ``record_property``/``user_properties``.

All values are strings: verdict, decode_tps, ttft_s, drift, ...; a load sweep adds ``specperf_users<N>_<field>``
per level, and each comparison ``specperf_cmp_<metric>[_ctx<N>][_users<N>]_{verdict,change,ci,p}``. Added to
each case as it ends (not a file of its own: pytest's ``--junitxml`` writes them). Never imports pytest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_specperf.cases.result_parts import CaseComparison
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
    props += category_props(result)
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


#: per category of a case over a prompt file, as specperf_cat_<category>_<field>
JUNIT_CATEGORY_FIELDS = ("n", "n_prompts", "decode_tps_p50", "decode_tps_p10", "ttft_p50_s", "accept_len",
                         "accept_rate", "drift", "attainment", "speedup")


def category_props(result: dict[str, Any]) -> list[tuple[str, str]]:
    """A prompt file's figures per category (only those the server showed)."""
    cats = result.get("categories")
    if not isinstance(cats, dict):
        return []
    return [(f"specperf_cat_{name}_{k}", _s(f[k])) for name, f in cats.items() if isinstance(f, dict)
            for k in JUNIT_CATEGORY_FIELDS if f.get(k) is not None]


def _stream_props(prefix: str, case: dict[str, Any]) -> list[tuple[str, str]]:
    """A load case's per-stream decode and ttft, comma-separated in stream order."""
    streams = [x for x in case.get("streams") or [] if isinstance(x, dict)]
    return [(f"{prefix}_stream_{k}", ",".join(_s(x.get(k)) for x in streams)) for k in ("decode_tps", "ttft_s")
            if streams]
