"""Simulator profiles: the validated numbers behind one simulated server.

A profile is a YAML mapping (built in under ``profiles/`` or any file) laid over the defaults
below; every key is checked, and an unknown key is an error that names it. Overrides (from the
CLI ``--set`` or ``SimServer(overrides=...)``) are merged on top, nested mappings key by key.

Batching keys (continuous batching, see ``batch.py`` and ``model.decode_step_ms``): every
request that is past its prefill shares one engine step with the others, and a step costs

    step_ms + draft_ms_per_token * k + step_ms_per_seq * (B - 1)
      + sum over the B sequences of the context and fragmentation terms
      + step_ms_per_token * max(0, T - step_free_tokens)

with ``k`` the longest draft in the step, ``B`` the sequences in it and ``T`` the tokens the
target model verifies (each sequence's drafts plus its bonus token). ``step_free_tokens`` is the
memory-bound region: up to that many tokens cost no more than one, which is why speculation is
almost free alone; past it every verified token costs ``step_ms_per_token``, so verifying
``B x k`` drafts eats the batch's compute and speculation's gain shrinks with load.
``max_batch`` caps the sequences in one step (later arrivals wait for a slot, their wait counts
in their time to first token). ``speculation: false`` is the same deploy with speculative
decoding off: no drafts, one token per step, no drafting or verifying cost. A new request's
prefill runs in the next step that starts after it arrives and lengthens that step for every
sequence in it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from pytest_specperf.prompts.content_kinds import CONTENT_KINDS

KINDS = CONTENT_KINDS
DIALECTS = ("vllm", "sglang", "llamacpp")
ACCEPT_DISTS = ("geometric", "min-variance")
#: Dialects whose servers' prefix caches match token by token (vLLM's, the default, matches blocks of 16).
TOKEN_CACHES = ("sglang", "llamacpp")


class ProfileError(ValueError):
    """A profile (name, file, key or value) is wrong; the message is one line."""


@dataclass(frozen=True)
class AcceptShift:
    """Acceptance changes once ``after_tokens`` tokens have been generated in a request."""

    after_tokens: int
    accept_len: Mapping[str, float]  # kinds not listed keep the profile's accept_len


@dataclass(frozen=True)
class CategoryRule:
    """A prompt category the simulator recognises from the prompt text, with its own acceptance.

    ``match`` is a regular expression searched in the prompt text (chat: the messages joined by
    newlines; ``^`` and ``$`` match at line ends); the first rule that matches, in profile order,
    names the request's category. Its ``accept_len`` replaces the content kind's, and after
    ``shift_after`` generated tokens ``shift_accept_len`` replaces it (the category's drift).
    """

    match: str
    accept_len: float
    shift_after: int | None = None
    shift_accept_len: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The YAML form: ``{match, accept_len, accept_shift: {after_tokens, accept_len}}``."""
        out: dict[str, Any] = {"match": self.match, "accept_len": self.accept_len}
        if self.shift_after is not None:
            out["accept_shift"] = {"after_tokens": self.shift_after, "accept_len": self.shift_accept_len}
        return out


@functools.lru_cache(maxsize=64)
def _pattern(match: str) -> re.Pattern[str]:
    return re.compile(match, re.MULTILINE)


@dataclass(frozen=True)
class Profile:
    """Everything the cost/acceptance model and the routes need; see the package docstring."""

    name: str = "custom"
    description: str = ""
    dialect: str = "vllm"
    model: str = "specperf-sim"
    max_model_len: int = 262144  # a long-context model: ctx sweeps to 128k fit
    prefill_tokens_per_s: float = 20000.0
    step_ms: float = 20.0  # decode step at empty context
    step_ms_per_1k_ctx: float = 0.0  # attention: linear in the current context length
    step_ms_per_1k_ctx_sq: float = 0.0  # attention: quadratic term, ms per (1k ctx)^2
    step_ms_per_1k_generated: float = 0.0  # fragmentation: grows with tokens generated so far
    accept_len: Mapping[str, float] = field(
        default_factory=lambda: {"prose": 3.0, "code": 4.0, "reasoning": 2.9, "repetitive": 6.0})
    accept_shift: AcceptShift | None = None
    # prompt categories recognised from the prompt text, each with its own acceptance (CategoryRule)
    categories: Mapping[str, CategoryRule] = field(default_factory=dict)
    max_accept: int = 8  # most tokens one step emits (drafts + bonus): draft length = max_accept - 1
    # vLLM's num_speculative_tokens (llama.cpp's --draft-max): drafts per step; None = max_accept - 1. The drafter's
    # quality stays the profile's (its per-position acceptance p, solved from accept_len over max_accept - 1 drafts),
    # so a longer draft earns less per token and costs more verified tokens under load.
    num_speculative_tokens: int | None = None
    accept_dist: str = "geometric"  # or "min-variance": every step accepts floor or ceil of the mean
    jitter: float = 0.02  # relative std of step time
    speculation: bool = True  # False: the same deploy without speculative decoding (one token per step)
    draft_ms_per_token: float = 0.0  # drafting: each draft position costs this once per step (batched)
    step_ms_per_seq: float = 1.0  # each sequence in a step beyond the first adds this
    step_ms_per_token: float = 0.0  # compute: each verified token past step_free_tokens adds this
    step_free_tokens: int = 1  # tokens a step verifies for the price of one (memory-bound region)
    max_batch: int = 256  # most sequences in one step; later requests wait for a slot
    # chunked prefill (vLLM's max_num_batched_tokens, llama.cpp's n_batch): most prompt tokens one step prefills, a
    # longer prompt going over several steps beside the running decodes; None: a whole prompt in the step admitting it
    prefill_chunk_tokens: int | None = None
    eos_after_tokens: int | None = None  # natural EOS here unless ignore_eos / min_tokens forbid it
    reasoning_tokens: int = 0  # chat: the first N output tokens go to the dialect's reasoning field
    # reasoning phase (chat, reasoning_tokens > 0): see _reasoning_and_cache
    reasoning_kind: str = ""  # content kind whose acceptance the reasoning phase has; "" = the prompt's
    reasoning_step_ms: float = 0.0  # each sequence in its reasoning phase adds this to a decode step
    reasoning_key: str = ""  # delta/message field of reasoning text; "" = the dialect's
    # prefix cache: LRU over blocks of prompt and output tokens, on by default as vLLM's automatic prefix caching
    prefix_cache_tokens: int = 262144  # capacity in tokens (a KV cache's worth); 0 = no prefix caching
    prefix_cache_block: int = 16  # cache granularity in tokens (vLLM 16; SGLang, llama.cpp 1: their dialects' default)
    cache_report: bool = False  # vllm/sglang: usage.prompt_tokens_details (--enable-prompt-tokens-details,
    #                             --enable-cache-report); llama.cpp always reports cache_n
    faults: str = ""  # fault spec applied to every request, same syntax as the X-Specperf-Fault header
    rng_seed: int = 0  # seeds requests that carry no ``seed`` of their own
    metrics: bool = True  # False: /metrics is off as on a server started without its metrics flag
    spec_metrics: bool = False  # vLLM --per-request-spec-decode-metrics detailed: metrics.speculative_decoding
    stream_interval: int = 1  # vLLM --stream-interval: a chunk once N tokens are pending (vllm/sglang dialects)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON/YAML-safe) that ``profile_from_dict`` turns back into this profile."""
        data = dataclasses.asdict(self)
        data["accept_len"] = dict(self.accept_len)
        if self.accept_shift is not None:
            data["accept_shift"] = {"after_tokens": self.accept_shift.after_tokens,
                                    "accept_len": dict(self.accept_shift.accept_len)}
        data["categories"] = {name: rule.to_dict() for name, rule in self.categories.items()}
        return data

    def to_json(self) -> str:
        """JSON form, used to hand a resolved profile to the simulator subprocess."""
        return json.dumps(self.to_dict())  # unsorted: the first matching category rule wins, so order matters

    @property
    def drafts_per_step(self) -> int:
        """Drafts one step proposes: ``num_speculative_tokens``, else ``max_accept - 1``; 0 without speculation."""
        if not self.speculation:
            return 0
        return self.max_accept - 1 if self.num_speculative_tokens is None else self.num_speculative_tokens

    def category_of(self, text: str) -> str | None:
        """The first category whose ``match`` is found in the prompt text, or None."""
        return next((name for name, rule in self.categories.items() if _pattern(rule.match).search(text)), None)

    def accept_mean(self, kind: str, generated: int, category: str | None = None) -> float:
        """Mean tokens per step (bonus included) after ``generated`` tokens: the category's, else the kind's."""
        rule = self.categories.get(category) if category is not None else None
        if rule is not None:
            if rule.shift_after is not None and rule.shift_accept_len is not None and generated >= rule.shift_after:
                return rule.shift_accept_len
            return rule.accept_len
        shift = self.accept_shift
        if shift is not None and generated >= shift.after_tokens and kind in shift.accept_len:
            return shift.accept_len[kind]
        return self.accept_len[kind]

    def phase_kind(self, kind: str, generated: int, reasoning: int) -> str:
        """The content kind acceptance follows after ``generated`` tokens when the first ``reasoning`` are reasoning."""
        return (self.reasoning_kind or kind) if generated < reasoning else kind


_FIELDS = {f.name: f for f in dataclasses.fields(Profile)}


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped in ``pytest_specperf/sim/profiles/``."""
    folder = resources.files("pytest_specperf.sim") / "profiles"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _close(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _num(key: str, value: Any, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProfileError(f"profile key {key!r}: expected a number, got {value!r}")
    v = float(value)
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ProfileError(f"profile key {key!r}: must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
    if hi is not None and v > hi:
        raise ProfileError(f"profile key {key!r}: must be <= {hi:g}, got {value!r}")
    return v


def _int(key: str, value: Any, *, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileError(f"profile key {key!r}: expected an integer, got {value!r}")
    if value < lo:
        raise ProfileError(f"profile key {key!r}: must be >= {lo}, got {value!r}")
    return value


def _accept_map(key: str, value: Any, max_accept: int, *, complete: bool) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ProfileError(f"profile key {key!r}: expected a mapping of {', '.join(KINDS)} to numbers, got {value!r}")
    out: dict[str, float] = {}
    for kind, mean in value.items():
        if kind not in KINDS:
            raise ProfileError(f"profile key '{key}.{kind}': unknown content kind, use one of {', '.join(KINDS)}"
                               + _close(str(kind), list(KINDS)))
        out[kind] = _num(f"{key}.{kind}", mean, lo=1.0, hi=float(max_accept))
    missing = [k for k in KINDS if k not in out]
    if complete and missing:
        raise ProfileError(f"profile key {key!r}: missing content kind(s) {', '.join(missing)}")
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: nested mappings merge key by key so an override can change one kind."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def _check_keys(keys: Iterable[Any], where: str) -> None:
    for key in keys:
        if key not in _FIELDS:
            raise ProfileError(f"{where}: unknown key {key!r}" + _close(str(key), list(_FIELDS)))


def _one_of(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ProfileError(f"profile key {key!r}: must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _over_defaults(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``data`` laid over the default profile's values."""
    defaults = Profile().to_dict()
    # accept_len is replaced whole when a file gives it, so a file must name every kind
    merged = {**defaults, **{k: v for k, v in data.items() if k != "accept_shift"}}
    merged["accept_shift"] = data.get("accept_shift", defaults["accept_shift"])
    merged["name"] = data.get("name", name)
    if "prefix_cache_block" not in data and merged["dialect"] in TOKEN_CACHES:
        merged["prefix_cache_block"] = 1  # as those servers ship: SGLang's radix cache, llama.cpp's slot match by token
    return merged


def _names(merged: dict[str, Any]) -> dict[str, Any]:
    """The string keys, the dialect and the acceptance distribution."""
    kw: dict[str, Any] = {}
    for key in ("name", "description", "model", "faults"):
        if not isinstance(merged[key], str):
            raise ProfileError(f"profile key {key!r}: expected a string, got {merged[key]!r}")
        kw[key] = merged[key]
    if not kw["model"]:
        raise ProfileError("profile key 'model': must not be empty")
    kw["dialect"] = _one_of("dialect", merged["dialect"], DIALECTS)
    kw["accept_dist"] = _one_of("accept_dist", merged["accept_dist"], ACCEPT_DISTS)
    return kw


def _costs(merged: dict[str, Any]) -> dict[str, Any]:
    """Context, prefill and step costs, batching, jitter and acceptance lengths."""
    kw: dict[str, Any] = {}
    kw["max_model_len"] = _int("max_model_len", merged["max_model_len"], lo=16)
    kw["prefill_tokens_per_s"] = _num("prefill_tokens_per_s", merged["prefill_tokens_per_s"], lo=0, lo_open=True)
    kw["step_ms"] = _num("step_ms", merged["step_ms"], lo=0, lo_open=True)
    for key in ("step_ms_per_1k_ctx", "step_ms_per_1k_ctx_sq", "step_ms_per_1k_generated", "draft_ms_per_token",
                "step_ms_per_seq", "step_ms_per_token"):
        kw[key] = _num(key, merged[key], lo=0)
    kw["step_free_tokens"] = _int("step_free_tokens", merged["step_free_tokens"], lo=1)
    kw["max_batch"] = _int("max_batch", merged["max_batch"], lo=1)
    chunk = merged["prefill_chunk_tokens"]
    kw["prefill_chunk_tokens"] = None if chunk is None else _int("prefill_chunk_tokens", chunk, lo=1)
    kw["jitter"] = _num("jitter", merged["jitter"], lo=0, hi=0.5)
    kw["max_accept"] = _int("max_accept", merged["max_accept"], lo=1)
    k = merged["num_speculative_tokens"]
    kw["num_speculative_tokens"] = None if k is None else _int("num_speculative_tokens", k, lo=0)
    kw["accept_len"] = _accept_map("accept_len", merged["accept_len"], kw["max_accept"], complete=True)
    return kw


def _accept_shift(shift: Any, max_accept: int) -> AcceptShift | None:
    if shift is None:
        return None
    if not isinstance(shift, Mapping):
        raise ProfileError(f"profile key 'accept_shift': expected a mapping with after_tokens and accept_len, "
                           f"got {shift!r}")
    for key in shift:
        if key not in ("after_tokens", "accept_len"):
            raise ProfileError(f"profile key 'accept_shift.{key}': unknown key, use after_tokens and accept_len")
    if "after_tokens" not in shift or "accept_len" not in shift:
        raise ProfileError("profile key 'accept_shift': needs both after_tokens and accept_len")
    return AcceptShift(_int("accept_shift.after_tokens", shift["after_tokens"], lo=0),
                       _accept_map("accept_shift.accept_len", shift["accept_len"], max_accept, complete=False))


def _category_rule(name: str, entry: Any, max_accept: int) -> CategoryRule:
    key = f"categories.{name}"
    if not isinstance(entry, Mapping):
        raise ProfileError(f"profile key {key!r}: expected a mapping with match and accept_len, got {entry!r}")
    for k in entry:
        if k not in ("match", "accept_len", "accept_shift"):
            raise ProfileError(f"profile key '{key}.{k}': unknown key, use match, accept_len and accept_shift"
                               + _close(str(k), ["match", "accept_len", "accept_shift"]))
    if "match" not in entry or "accept_len" not in entry:
        raise ProfileError(f"profile key {key!r}: needs both match (a regular expression) and accept_len")
    match = entry["match"]
    if not isinstance(match, str) or not match:
        raise ProfileError(f"profile key '{key}.match': expected a non-empty regular expression, got {match!r}")
    try:
        _pattern(match)
    except re.error as exc:
        raise ProfileError(f"profile key '{key}.match': not a valid regular expression ({exc})") from None
    accept = _num(f"{key}.accept_len", entry["accept_len"], lo=1.0, hi=float(max_accept))
    shift = entry.get("accept_shift")
    if shift is None:
        return CategoryRule(match, accept)
    if not isinstance(shift, Mapping) or set(shift) != {"after_tokens", "accept_len"}:
        raise ProfileError(f"profile key '{key}.accept_shift': expected a mapping of after_tokens and accept_len, "
                           f"got {shift!r}")
    return CategoryRule(match, accept, _int(f"{key}.accept_shift.after_tokens", shift["after_tokens"], lo=0),
                        _num(f"{key}.accept_shift.accept_len", shift["accept_len"], lo=1.0, hi=float(max_accept)))


def _categories(value: Any, max_accept: int) -> dict[str, CategoryRule]:
    """The ``categories`` mapping: category name -> CategoryRule, in the profile's order."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProfileError(f"profile key 'categories': expected a mapping of category names to "
                           f"{{match, accept_len}}, got {value!r}")
    out: dict[str, CategoryRule] = {}
    for name, entry in value.items():
        if not isinstance(name, str) or not name.strip():
            raise ProfileError(f"profile key 'categories': category names must be non-empty strings, got {name!r}")
        out[name] = _category_rule(name, entry, max_accept)
    return out


def _request_behaviour(merged: dict[str, Any]) -> dict[str, Any]:
    """EOS, reasoning tokens, the seed and the on/off switches."""
    kw: dict[str, Any] = {}
    eos = merged["eos_after_tokens"]
    kw["eos_after_tokens"] = None if eos is None else _int("eos_after_tokens", eos, lo=1)
    kw["reasoning_tokens"] = _int("reasoning_tokens", merged["reasoning_tokens"], lo=0)
    kw["rng_seed"] = _int("rng_seed", merged["rng_seed"], lo=0)
    for key in ("metrics", "speculation", "spec_metrics"):
        if not isinstance(merged[key], bool):
            raise ProfileError(f"profile key {key!r}: expected true or false, got {merged[key]!r}")
        kw[key] = merged[key]
    return kw


def _reasoning_and_cache(merged: dict[str, Any]) -> dict[str, Any]:
    """The reasoning phase's keys and the prefix cache's keys."""
    kw: dict[str, Any] = {}
    kind = merged["reasoning_kind"]
    if kind != "" and kind not in KINDS:
        raise ProfileError(f"profile key 'reasoning_kind': use one of {', '.join(KINDS)} (or \"\" for the "
                           f"prompt's own kind), got {kind!r}")
    kw["reasoning_kind"] = kind
    kw["reasoning_step_ms"] = _num("reasoning_step_ms", merged["reasoning_step_ms"], lo=0)
    kw["reasoning_key"] = _one_of("reasoning_key", merged["reasoning_key"], ("", "reasoning", "reasoning_content"))
    kw["prefix_cache_tokens"] = _int("prefix_cache_tokens", merged["prefix_cache_tokens"], lo=0)
    kw["prefix_cache_block"] = _int("prefix_cache_block", merged["prefix_cache_block"], lo=1)
    if not isinstance(merged["cache_report"], bool):
        raise ProfileError(f"profile key 'cache_report': expected true or false, got {merged['cache_report']!r}")
    kw["cache_report"] = merged["cache_report"]
    kw["stream_interval"] = _int("stream_interval", merged["stream_interval"], lo=1)
    return kw


def _check_faults(faults: str) -> None:
    from pytest_specperf.sim.faults import FaultError, parse_faults  # late import: faults does not need profiles

    try:
        parse_faults(faults)
    except FaultError as exc:
        raise ProfileError(f"profile key 'faults': {exc}") from None


def profile_from_dict(data: Mapping[str, Any], *, name: str = "custom") -> Profile:
    """Validate a mapping laid over the defaults; raise ProfileError naming the first bad key."""
    if not isinstance(data, Mapping):
        raise ProfileError(f"profile {name!r}: expected a mapping of keys to values, got {type(data).__name__}")
    _check_keys(data, f"profile {name!r}")
    merged = _over_defaults(data, name)
    kw = {**_names(merged), **_costs(merged)}
    kw["accept_shift"] = _accept_shift(merged["accept_shift"], kw["max_accept"])
    kw["categories"] = _categories(merged["categories"], kw["max_accept"])
    kw.update(_request_behaviour(merged))
    kw.update(_reasoning_and_cache(merged))
    if kw["faults"]:
        _check_faults(kw["faults"])
    return Profile(**kw)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"profile file {str(path)!r}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile file {str(path)!r}: not valid YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"profile file {str(path)!r}: expected a mapping at the top, got {type(data).__name__}")
    return data


def _raw(spec: str | Path) -> tuple[str, dict[str, Any]]:
    text = str(spec)
    names = builtin_profiles()
    if isinstance(spec, str) and text in names:
        folder = resources.files("pytest_specperf.sim") / "profiles"
        return text, yaml.safe_load((folder / f"{text}.yaml").read_text(encoding="utf-8")) or {}
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ProfileError(f"profile file {text!r} does not exist")
        return path.stem, _read_yaml(path)
    raise ProfileError(f"unknown profile {text!r}: built-in profiles are {', '.join(names)}"
                       f" (or give a path to a .yaml file){_close(text, names)}")


def load_profile(spec: str | Path | Profile | Mapping[str, Any] = "healthy",
                 overrides: Mapping[str, Any] | None = None) -> Profile:
    """Resolve a built-in name, a YAML path, a mapping or a Profile, then apply ``overrides``."""
    if isinstance(spec, Profile):
        name, raw = spec.name, spec.to_dict()
    elif isinstance(spec, Mapping):
        name, raw = str(spec.get("name", "custom")), dict(spec)
    elif isinstance(spec, str | Path):
        name, raw = _raw(spec)
    else:
        raise ProfileError(f"profile: expected a name, a path, a mapping or a Profile, got {type(spec).__name__}")
    if overrides:
        if not isinstance(overrides, Mapping):
            raise ProfileError(f"profile overrides: expected a mapping, got {type(overrides).__name__}")
        _check_keys(overrides, "profile override")
        raw = _merge(raw, overrides)
    return profile_from_dict(raw, name=name)


def parse_assignment(text: str) -> dict[str, Any]:
    """Turn a CLI ``KEY=VALUE`` (VALUE read as YAML, dotted KEY for nesting) into an override mapping."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError(f"--set {text!r}: expected KEY=VALUE, e.g. dialect=llamacpp or accept_len.prose=3.5")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    out: dict[str, Any] = {}
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = parsed
    return out


def merge_overrides(items: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine several ``parse_assignment`` results, later ones winning."""
    out: dict[str, Any] = {}
    for item in items:
        out = _merge(out, item)
    return out
