"""Perf cases from ``*.specperf.yaml`` files, validated into the same specs as the markers.

Each top-level key names a case; its value holds exactly one case kind with its keywords,
and optionally ``marks`` (extra marker names), e.g.::

    long_reasoning_holds:
      sustained: {tokens: 1500, ctx: 5000, content: reasoning, min_tps: 60}
      marks: [slow]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.registry import SPECS, build_spec
from pytest_specperf.errors import ConfigError

SUFFIXES = (".specperf.yaml", ".specperf.yml")


def is_case_file(path: Path) -> bool:
    """True for files this plugin collects."""
    return path.name.endswith(SUFFIXES)


def load_cases(path: Path, default_prompts: str | None = None) -> list[tuple[str, CaseSpec, dict[str, Any], list[str]]]:
    """(name, spec, raw keywords, extra marks) per case; a bad file or case raises ConfigError naming file and case."""
    out = []
    for name, spec, kwargs, marks in load_entries(path, default_prompts):
        if isinstance(spec, ConfigError):
            raise spec
        out.append((name, spec, kwargs, marks))
    return out


#: what the YAML parser was reading when a file ended early: the opener the user left unclosed
_OPENERS = {"while parsing a flow mapping": "'{'", "while parsing a flow sequence": "'['",
            "while scanning a quoted scalar": "quote"}


def yaml_error(name: str, exc: yaml.YAMLError) -> str:
    """One line for a YAML error, on the line the user has to fix: an unclosed '{', '[' or quote is reported where
    it was opened (the parser notices only where the next line begins), other errors where the parser stopped."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None) or exc
    opened, context = getattr(exc, "context_mark", None), str(getattr(exc, "context", "") or "")
    opener = _OPENERS.get(context)
    if opener and opened is not None and mark is not None and opened.line != mark.line:
        return (f"{name}: line {opened.line + 1} is not valid YAML: the {opener} opened there is not closed "
                f"({problem} on line {mark.line + 1})")
    where = f" line {mark.line + 1}" if mark is not None else ""
    return f"{name}:{where} is not valid YAML ({problem})"


def load_entries(path: Path, default_prompts: str | None = None
                 ) -> list[tuple[str, CaseSpec | ConfigError, dict[str, Any], list[str]]]:
    """Every case of the file, a bad one as the ConfigError that says why (so it fails alone, the rest run).

    Only a file that cannot be read as cases at all (not YAML, not a mapping) raises.
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error(path.name, exc)) from None
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise ConfigError(f"{path.name}: the top level must map case names to cases, e.g. 'my_case: "
                          "{sustained: {tokens: 500}}'")
    out: list[tuple[str, CaseSpec | ConfigError, dict[str, Any], list[str]]] = []
    for name, body in raw.items():
        try:
            spec, kwargs, marks = _entry(path, name, body, default_prompts)
        except ConfigError as exc:
            out.append((str(name), exc, {}, []))
            continue
        out.append((str(name), spec, kwargs, marks))
    return out


def _entry(path: Path, name: Any, body: Any, default_prompts: str | None
           ) -> tuple[CaseSpec, dict[str, Any], list[str]]:
    if not isinstance(body, dict):
        raise ConfigError(f"{path.name}: case {name!r} must be a mapping with one of {', '.join(SPECS)}")
    kinds = [k for k in body if k in SPECS]
    unknown = [k for k in body if k not in SPECS and k != "marks"]
    if unknown:
        raise ConfigError(f"{path.name}: case {name!r} has unknown key {unknown[0]!r}; use one of "
                          f"{', '.join(SPECS)} (and optionally marks)")
    if len(kinds) != 1:
        raise ConfigError(f"{path.name}: case {name!r} needs exactly one of {', '.join(SPECS)}, found "
                          f"{len(kinds)}")
    kind = kinds[0]
    kwargs = body[kind] or {}
    if not isinstance(kwargs, dict):
        raise ConfigError(f"{path.name}: case {name!r}: {kind} takes a mapping of keywords, got {kwargs!r}")
    marks = body.get("marks") or []
    if not isinstance(marks, list) or not all(isinstance(m, str) for m in marks):
        raise ConfigError(f"{path.name}: case {name!r}: marks must be a list of marker names")
    try:
        spec = build_spec(kind, kwargs, base=path.parent, default_prompts=default_prompts)
    except ConfigError as exc:
        raise ConfigError(f"{path.name}: case {name!r}: {exc}") from None
    return spec, kwargs, marks
