"""Cases over a prompt file (``prompts=``): which kinds take one, the keywords' checks, and the file's prompts.

A file is read when its case's spec is built, so a bad file, an unknown category or a ``sample``
larger than the file is a collection error naming the file and line. A relative path is resolved
against the case file's folder there (``resolve_keywords``), and the spec keeps the absolute path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.files import BUILTIN_PREFIX, PromptSet, load_prompts

#: Kinds that run over a prompt file; the others build prompts of an exact length (two_point, ctx_sweep).
PROMPT_KINDS = ("sustained", "load_sweep", "rate", "capacity")
#: Kinds a case may give a prompt file (``session`` takes its user turns from one; the run's default is not
#: applied to it, as a conversation's turns are asked for, not implied).
FILE_KINDS = (*PROMPT_KINDS, "session")
#: Keywords that only mean something with ``prompts=``.
PROMPT_KEYWORDS = ("prompts_format", "sample", "categories")
#: Floors that take {category: value} with a prompt file.
CATEGORY_FLOORS = ("min_tps", "min_accept_len")
#: The key of a per-category floor mapping that stands for every category the mapping does not name.
ANY = "*"
#: A case over a prompt file without ``sample=`` that would run more trials than this says so at collection.
MANY_TRIALS = 200
#: A prompt file's prompts are sampled with this seed: every run, arm and baseline sends the same ones.
SAMPLE_SEED = 0


#: Most requests one load case sends: each is built (an exact-length prompt) and kept (its stream) before the
#: figures are computed, so a larger count is a long wait or a memory problem, known before anything is sent
#: (``requests=``, or a whole prompt file under load without it).
MAX_REQUESTS = 10_000

def resolve_keywords(kind: str, kwargs: Mapping[str, Any], base: str | Path | None,
                     default: str | None) -> dict[str, Any]:
    """The keywords with ``prompts`` resolved against ``base`` (the case file's folder), or the run's default.

    The default (``--specperf-prompts``) applies to the kinds that take a prompt file when the case asks for
    no prompts of its own (none of ``prompts``, ``ctx``, ``content``). ``ctx`` or ``content`` beside
    ``prompts`` is a usage error: a real prompt's length and kind are what they are.
    """
    values = dict(kwargs)
    if "prompts" not in values and default is not None and kind in PROMPT_KINDS and not (
            {"ctx", "content"} & set(values)):
        values["prompts"] = default  # already absolute, or builtin:
    source = values.get("prompts")
    if source is None or kind not in FILE_KINDS:
        return values  # the spec's validate says the kind takes no prompt file
    given = [k for k in ("ctx", "content") if k in kwargs]
    if given:
        raise ConfigError(f"{kind}(): {given[0]}= with prompts=: a prompt file's prompts have their own length "
                          f"and kind (each request records its server-counted tokens); drop {given[0]} or prompts")
    if not isinstance(source, str | Path) or not str(source).strip():
        raise ConfigError(f"{kind}(): prompts must be a file path or {BUILTIN_PREFIX}NAME, got {source!r}")
    text = str(source)
    if not text.startswith(BUILTIN_PREFIX):
        path = Path(text).expanduser()
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        values["prompts"] = str(path)
    else:
        values["prompts"] = text
    cats = values.get("categories")
    if isinstance(cats, list | tuple):
        values["categories"] = tuple(cats)
    elif isinstance(cats, str):
        values["categories"] = (cats,)
    if kind == "sustained" and not {"repeat", "requests"} & set(kwargs) and int(values.get("concurrency", 1) or 1) == 1:
        values["repeat"] = len(prompt_set_of(values["prompts"], values.get("prompts_format"),
                                             values.get("categories"), values.get("sample")))
    return values


@functools.lru_cache(maxsize=64)
def prompt_set_of(source: str, fmt: str | None, categories: tuple[str, ...] | None, sample: int | None) -> PromptSet:
    """The prompts a case over ``source`` sends (read once per run)."""
    return load_prompts(source, fmt=fmt, categories=categories, sample=sample, seed=SAMPLE_SEED)


def prompt_set(spec: Any) -> PromptSet | None:
    """The prompt file's prompts of a spec, or None for a case of built prompts."""
    if spec.prompts is None:
        return None
    return prompt_set_of(spec.prompts, spec.prompts_format, spec.categories, spec.sample)


def check_prompts(spec: Any) -> None:
    """A spec's prompt keywords: a kind that takes a file, a readable file, floors by its categories."""
    k = spec.KIND
    if spec.prompts is None:
        for name in PROMPT_KEYWORDS:
            if getattr(spec, name) is not None:
                raise ConfigError(f"{k}(): {name} needs prompts= (a prompt file); add prompts or drop {name}")
        return
    if k not in FILE_KINDS:
        raise ConfigError(f"{k}(): prompts= does not apply to {k}, which builds prompts of exact lengths to time; "
                          f"use a prompt file with {', '.join(FILE_KINDS)}, or drop prompts")
    if getattr(spec, "max_burst_gap", None) is not None:
        raise ConfigError(f"{k}(): max_burst_gap compares with a two-point burst at a constructed ctx, which a prompt "
                          "file has none of; drop max_burst_gap or prompts")
    if isinstance(spec.categories, str):
        raise ConfigError(f"{k}(): categories must be a list of category names, got {spec.categories!r}")
    found = prompt_set(spec)
    assert found is not None
    under_load = k == "load_sweep" or (k == "sustained" and getattr(spec, "concurrency", 1) > 1)
    if under_load and getattr(spec, "requests", None) is None and len(found) > MAX_REQUESTS:
        raise ConfigError(f"{k}(): prompts file {found.path} has {len(found)} prompts and no requests=, so this case "
                          f"would send every one at each level, above {MAX_REQUESTS}, the most one case sends; give "
                          f"sample=N (N prompts, stratified by category) or requests=K")
    names = found.categories()
    for name in CATEGORY_FLOORS:
        floors = getattr(spec, name, None)
        if not isinstance(floors, Mapping) or (k == "load_sweep" and name == "min_tps"):
            continue  # a load sweep's min_tps mapping is by level
        for cat, value in floors.items():
            if cat not in names and cat != ANY:
                kept = " (after sample/categories)" if spec.sample is not None or spec.categories else ""
                raise ConfigError(f"{k}(): {name} names category {cat!r}, which is not in {found.path}{kept}; "
                                  f"its categories are {', '.join(names)}")
            accept = name == "min_accept_len"
            number = not isinstance(value, bool) and isinstance(value, int | float)
            if not number or (value < 1 if accept else value <= 0):
                raise ConfigError(f"{k}(): {name}[{cat!r}] must be a number "
                                  f"{'>= 1 (tokens per step)' if accept else '> 0 (tokens/s)'}, got {value!r}")


def many_trials(spec: Any) -> str | None:
    """What a single-user sustained case over a whole large prompt file should hear before it runs, else None.

    Without ``sample=`` such a case sends every prompt once, one trial after another: a 48,215-prompt file is
    48,215 trials, which nobody means to wait for unwarned.
    """
    if spec.KIND != "sustained" or spec.prompts is None or spec.sample is not None:
        return None
    found = prompt_set(spec)
    assert found is not None
    n = len(found)
    if n <= MANY_TRIALS or spec.repeat != n:
        return None
    return (f"sustained(): prompts file {found.path} has {n} prompts and no sample=, so this case runs {n} trials, "
            f"one per prompt, one after another; give sample=N to run N prompts (stratified by category), or "
            f"measure the file under load in the closed-loop mode, sustained(concurrency=N, requests=K)")


def floor_for(floors: float | Mapping[str, float | None] | None, category: str) -> float | None:
    """One category's floor from a number (every category) or a ``{category: value}`` mapping."""
    if isinstance(floors, Mapping):
        return floors.get(category, floors.get(ANY))
    return floors
