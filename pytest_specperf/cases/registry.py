"""Case kinds by name, and keywords from a marker, a YAML case or a direct call validated into a spec."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_specperf.cases.base import CaseSpec, is_number
from pytest_specperf.cases.closed_loop import CtxSweepSpec, LoadSweepSpec, SustainedSpec, TwoPointSpec
from pytest_specperf.cases.lengths import resolve_lengths
from pytest_specperf.cases.open_loop import CapacitySpec, RateSpec
from pytest_specperf.cases.prompt_cases import resolve_keywords
from pytest_specperf.cases.replay import ReplaySpec
from pytest_specperf.cases.session import SessionSpec
from pytest_specperf.cases.units import check_units
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts import traces

#: Every case kind: its marker name and the spec class its keywords build (one explicit map).
SPECS: dict[str, type[CaseSpec]] = {s.KIND: s for s in (SustainedSpec, TwoPointSpec, CtxSweepSpec, LoadSweepSpec,
                                                        RateSpec, CapacitySpec, SessionSpec, ReplaySpec)}


def marker_help() -> dict[str, str]:
    """Marker registration lines with their signatures, for ``pytest --markers``."""
    out = {}
    for kind, cls in SPECS.items():
        args = ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(cls) if not f.metadata.get("derived"))
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        out[kind] = f"{kind}({args}): specperf perf case. {doc}"
    return out


def build_spec(kind: str, kwargs: Mapping[str, Any], args: tuple[Any, ...] = (), *, base: str | Path | None = None,
               default_prompts: str | None = None) -> CaseSpec:
    """Validate marker/YAML keywords into a spec; unknown or misspelt keywords are a ConfigError.

    ``base``: the case file's folder, which a relative ``prompts=`` path is read from; ``default_prompts``:
    the run's prompt file (``--specperf-prompts``) for cases that ask for no prompts of their own.
    """
    if kind not in SPECS:
        raise ConfigError(f"unknown specperf case kind {kind!r}; use one of {', '.join(SPECS)}")
    cls = SPECS[kind]
    if args:
        raise ConfigError(f"{kind}() takes keyword arguments only, e.g. {kind}(ctx=1000); got positional {args!r}")
    names = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("derived")]
    for key in kwargs:
        if key not in names:
            near = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; valid keywords: {', '.join(names)}"
            raise ConfigError(f"{kind}(): unknown keyword {key!r}{hint}")
    values = resolve_keywords(kind, kwargs, base, default_prompts)
    resolve_lengths(kind, values, base)  # tokens="uniform(100, 400)": parsed once, here
    if kind == "replay" and isinstance(values.get("trace"), str | Path):
        values["trace"] = traces.resolve(values["trace"], base)  # relative to the case file, as prompts= is
    for name in ("ctxs", "concurrency"):
        if kind != "sustained" and isinstance(values.get(name), list | tuple):
            values[name] = tuple(values[name])
    if kind == "load_sweep" and isinstance(values.get("concurrency"), int) and not isinstance(
            values["concurrency"], bool):
        values["concurrency"] = (values["concurrency"],)
    spec = cls(**values)
    check_units(spec)  # a value in the wrong unit named as such, before the kind's own range checks
    spec.validate()
    return spec


def fit_spec(spec: CaseSpec, max_ctx: int, max_tokens: int, max_floor: float | None = None) -> CaseSpec:
    """The same case sized down (for a small local engine): ctx, tokens and floors capped, a sweep scaled whole."""
    changes: dict[str, Any] = {}
    if isinstance(spec, CtxSweepSpec):
        top = max(spec.ctxs)
        if top > max_ctx:
            scaled = sorted({max(16, round(c * max_ctx / top)) for c in spec.ctxs})
            changes["ctxs"] = tuple(scaled)
        if spec.tokens > max_tokens:
            changes["tokens"] = max_tokens
    else:
        if spec.ctx > max_ctx:
            changes["ctx"] = max_ctx
        for name in ("tokens", "long"):
            if getattr(spec, name, 0) > max_tokens:
                changes[name] = max_tokens
    if max_floor is not None and is_number(spec.min_tps) and spec.min_tps > max_floor:
        changes["min_tps"] = max_floor
    return dataclasses.replace(spec, **changes) if changes else spec
