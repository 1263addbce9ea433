"""Request lengths drawn from a distribution: ``tokens=`` and ``ctx=`` given as a string.

A load or open-loop case (``sustained(concurrency=N)``, ``load_sweep``, ``rate``, ``capacity``) sends one
prompt length and one output length unless its ``tokens=`` or ``ctx=`` is one of these forms:

- ``uniform(a, b)``: whole numbers from ``a`` to ``b``, both included, equally likely;
- ``normal(mu, sigma, min=, max=)``: a normal distribution cut to ``[min, max]`` (values outside are drawn
  again, so the bounds hold no pile of clipped values);
- ``lognormal(median, sigma, min=, max=)``: ``exp`` of a normal of mean ``log(median)`` and spread ``sigma``,
  cut the same way;
- ``mix(0.7 * uniform(100, 400), 0.3 * normal(2000, 300, min=500))``: each request takes one component, drawn
  with the weights (relative; they need not add up to 1), then its length from it;
- ``trace(PATH)``: the lengths of a trace file's rows (``prompts/traces.py`` reads it; a path is relative to the
  case file, ``builtin:NAME`` a shipped one): ``ctx`` takes each row's prompt length, ``tokens`` its output
  length, and where both name the same trace (without max=) each request takes both from one row. ``trace(PATH, max=N)``
  leaves out the rows longer than ``N`` (a long-context trace on a short-context server), ``min=`` raises shorter
  ones to it.

Without ``min=`` a draw is at least the keyword's least value (``MIN_LENGTH``); without ``max=`` a normal is cut
at ``mu + 4 sigma`` and a lognormal at ``median * exp(4 sigma)`` (3 draws in 100,000 lie beyond), so a case
knows its longest request before it sends one. A string is parsed once, when the spec is built, into a typed
``Lengths``; a string that is none of the forms is a one-line error naming them. Draws are seeded by the case's
node id (``Lengths.draw``): a rerun, both sides of an A/B run, every arm and every history run send the same
lengths in the same order.
"""

from __future__ import annotations

import ast
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts import traces

#: The case kinds whose ``tokens=`` and ``ctx=`` may be a distribution (``sustained`` only with several requests).
DRAWN_KINDS = ("sustained", "load_sweep", "rate", "capacity")
#: The least length a draw may take, per keyword and kind (the kinds' own lower bounds on a fixed number).
MIN_LENGTH = {"ctx": {}, "tokens": {"sustained": 16, "load_sweep": 16}}
FORMS = ("uniform(a, b), normal(mu, sigma, min=, max=), lognormal(median, sigma, min=, max=), "
         "mix(w1 * FORM, w2 * FORM, ...) or trace(PATH)")
#: Where a normal or lognormal without ``max=`` is cut: this many sigmas above its centre.
TAIL_SIGMAS = 4.0
#: Field metadata of a spec's parsed distributions (``tokens_dist``, ``ctx_dist``): set from ``tokens=`` and ``ctx=``,
#: never keywords of their own.
DERIVED = {"derived": True}
#: Redraws of values outside a cut distribution's bounds before the rest are clipped to them.
_REDRAWS = 64


@dataclass(frozen=True)
class Uniform:
    """Whole numbers ``low`` to ``high``, both included, equally likely."""

    low: int
    high: int


@dataclass(frozen=True)
class Normal:
    """A normal of mean ``mu`` and spread ``sigma`` cut to ``[low, high]``."""

    mu: float
    sigma: float
    low: int
    high: int


@dataclass(frozen=True)
class LogNormal:
    """``exp`` of a normal of mean ``log(median)`` and spread ``sigma``, cut to ``[low, high]``."""

    median: float
    sigma: float
    low: int
    high: int


@dataclass(frozen=True)
class Empirical:
    """The lengths of a trace file's rows (one per row, in row order), each at least ``low``."""

    path: str
    values: tuple[int, ...]
    low: int
    high: int


@dataclass(frozen=True)
class Mixture:
    """Each draw takes component ``k`` with probability ``weights[k]`` (they add up to 1), then a length from it."""

    weights: tuple[float, ...]
    parts: tuple[Uniform | Normal | LogNormal | Empirical, ...]
    low: int
    high: int


Dist = Uniform | Normal | LogNormal | Empirical | Mixture


@dataclass(frozen=True)
class Lengths:
    """A keyword's distribution of lengths, as written (``text``) and parsed (``dist``)."""

    keyword: str  # "tokens" or "ctx"
    text: str
    dist: Dist

    @property
    def low(self) -> int:
        """The shortest length it draws."""
        return self.dist.low

    @property
    def high(self) -> int:
        """The longest length it draws."""
        return self.dist.high

    def draw(self, n: int, nodeid: str) -> list[int]:
        """``n`` lengths, the same for the same node id (``draw_parts``)."""
        return self.draw_parts(n, nodeid)[0]

    def draw_parts(self, n: int, nodeid: str) -> tuple[list[int], list[int]]:
        """``n`` lengths and, per length, the mixture component it came from (0 outside a mixture).

        The generator is seeded by the node id and the keyword, so ``ctx`` and ``tokens`` draw independently;
        a trace's rows are drawn by the node id and the trace alone, so both keywords naming one trace take
        their two lengths from the same row."""
        d = self.dist
        stream = f"trace\0{d.path}" if isinstance(d, Empirical) else self.keyword
        rng = np.random.default_rng(_seed(nodeid, stream))
        if isinstance(d, Mixture):
            which = rng.choice(len(d.parts), size=n, p=np.array(d.weights))
            out = np.zeros(n, dtype=np.int64)
            for k, part in enumerate(d.parts):
                mine = np.flatnonzero(which == k)
                out[mine] = _sample(part, rng, len(mine))
            return [int(v) for v in out], [int(k) for k in which]
        return [int(v) for v in _sample(d, rng, n)], [0] * n


def _seed(nodeid: str, stream: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{nodeid}\0{stream}".encode()).digest()[:8], "big")


def _sample(d: Uniform | Normal | LogNormal | Empirical, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(d, Uniform):
        return rng.integers(d.low, d.high + 1, size=n)
    if isinstance(d, Empirical):
        return np.array(d.values, dtype=np.int64)[rng.integers(0, len(d.values), size=n)]

    def one(k: int) -> np.ndarray:
        x = rng.normal(d.mu, d.sigma, k) if isinstance(d, Normal) else rng.lognormal(math.log(d.median), d.sigma, k)
        return np.rint(x)

    out = one(n)
    for _ in range(_REDRAWS):  # a cut distribution: values outside the bounds are drawn again
        bad = np.flatnonzero((out < d.low) | (out > d.high))
        if not len(bad):
            break
        out[bad] = one(len(bad))
    clipped: np.ndarray = np.clip(out, d.low, d.high).astype(np.int64)
    return clipped


# -- parsing ------------------------------------------------------------------------------------------

_TRACE = re.compile(r"\btrace\(\s*([^(),]*?)\s*(,[^()]*)?\)")


def least(kind: str, keyword: str) -> int:
    """The least length ``keyword`` may draw in a case of ``kind``."""
    return MIN_LENGTH[keyword].get(kind, 2 if keyword == "tokens" else 1)


def resolve_lengths(kind: str, values: dict[str, Any], base: str | Path | None = None) -> None:
    """Turn a ``tokens=`` or ``ctx=`` string of ``values`` (a spec's keywords) into its ``Lengths``
    (``tokens_dist``, ``ctx_dist``) and the keyword into its longest draw, in place."""
    for name in ("tokens", "ctx"):
        text = values.get(name)
        if not isinstance(text, str) or _plain_number(text):
            continue  # a number in quotes: the kind's own check names it
        if kind not in DRAWN_KINDS:
            raise ConfigError(f"{kind}(): {name}={text!r}: a distribution of lengths applies to "
                              "sustained(concurrency=N), load_sweep, rate and capacity; give this case a number")
        drawn = parse(text, name, kind, base)
        values[name], values[f"{name}_dist"] = drawn.high, drawn


def _plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse(text: str, keyword: str, kind: str, base: str | Path | None = None) -> Lengths:
    """``text`` (one of ``FORMS``) into its ``Lengths``; anything else is a one-line ConfigError naming the forms."""
    floor = least(kind, keyword)
    where = f"{kind}(): {keyword}={text!r}"
    try:
        return _parse(text.strip(), keyword, floor, str(base) if base is not None else None)
    except _Bad as exc:
        raise ConfigError(f"{where}: {exc}; use {FORMS}") from None
    except ConfigError as exc:  # the trace file's own mistake, with its file and row
        raise ConfigError(f"{where}: {exc}") from None


class _Bad(Exception):
    """What is wrong with a distribution string (``parse`` adds the keyword and the forms)."""


@cache
def _parse(text: str, keyword: str, floor: int, base: str | None) -> Lengths:
    quoted = _TRACE.sub(lambda m: f"trace({_quote(m.group(1))}{m.group(2) or ''})", text)
    try:
        tree = ast.parse(quoted, mode="eval").body
    except SyntaxError:
        raise _Bad("not a distribution (a syntax error)") from None
    if isinstance(tree, ast.Constant):
        raise _Bad("a number in quotes: give it without them" if _is_number(tree.value) else "not a distribution")
    if isinstance(tree, ast.Call) and _name(tree) == "mix":
        return Lengths(keyword, text, _mixture(tree, keyword, floor, base))
    return Lengths(keyword, text, _simple(tree, keyword, floor, base))


def _quote(path: str) -> str:
    return path if path[:1] in "'\"" else repr(path)


def _name(node: ast.expr) -> str:
    return node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _args(call: ast.Call, names: tuple[str, ...], keywords: tuple[str, ...]) -> tuple[list[Any], dict[str, Any]]:
    """A call's positional values (exactly ``names``) and keyword values (only ``keywords``), all literals."""
    form = f"{_name(call)}({', '.join(names + tuple(f'{k}=' for k in keywords))})"
    if len(call.args) != len(names):
        raise _Bad(f"{form} takes {len(names)} value{'s' if len(names) > 1 else ''}, got {len(call.args)}")
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kw = {str(k.arg): ast.literal_eval(k.value) for k in call.keywords}
    except ValueError:
        raise _Bad(f"{form} takes plain values") from None
    unknown = [k for k in kw if k not in keywords]
    if unknown:
        raise _Bad(f"{form} has no keyword {unknown[0]!r}")
    return args, kw


def _simple(node: ast.expr, keyword: str, floor: int, base: str | None
            ) -> Uniform | Normal | LogNormal | Empirical:
    name = _name(node)
    if not isinstance(node, ast.Call) or name not in ("uniform", "normal", "lognormal", "trace"):
        raise _Bad(f"unknown form {name or ast.unparse(node)!r}")
    if name == "trace":
        (path,), kw = _args(node, ("PATH",), ("min", "max"))
        low, high = kw.get("min", floor), kw.get("max")
        if not isinstance(low, int) or low < floor or not (high is None or (isinstance(high, int) and high > low)):
            raise _Bad(f"trace(PATH, min=, max=) keeps whole numbers {floor} <= min < max, got min={low!r}, "
                       f"max={high!r}")
        return _empirical(str(path), keyword, low, high, base)
    if name == "uniform":
        (a, b), _ = _args(node, ("a", "b"), ())
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)) or not floor <= a <= b:
            raise _Bad(f"uniform(a, b) takes whole numbers {floor} <= a <= b, got uniform({a!r}, {b!r})")
        return Uniform(a, b)
    (centre, sigma), kw = _args(node, (("mu" if name == "normal" else "median"), "sigma"), ("min", "max"))
    if not _is_number(centre) or not _is_number(sigma) or sigma <= 0 or (name == "lognormal" and centre <= 0):
        what = "mu a number" if name == "normal" else "median a positive number"
        raise _Bad(f"{name}() needs {what} and sigma a positive number, got {centre!r}, {sigma!r}")
    top = centre + TAIL_SIGMAS * sigma if name == "normal" else centre * math.exp(TAIL_SIGMAS * sigma)
    low, high = kw.get("min", floor), kw.get("max", math.floor(top))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or not floor <= low < high:
        raise _Bad(f"{name}() is cut to whole numbers {floor} <= min < max, got min={low!r}, max={high!r}")
    if name == "normal":
        return Normal(float(centre), float(sigma), low, high)
    return LogNormal(float(centre), float(sigma), low, high)


def _mixture(call: ast.Call, keyword: str, floor: int, base: str | None) -> Mixture:
    if call.keywords or len(call.args) < 2:
        raise _Bad("mix() takes two or more weighted forms, e.g. mix(0.7 * uniform(100, 400), 0.3 * "
                   "normal(2000, 300, min=500))")
    weights, parts = [], []
    for arg in call.args:
        weight = arg.left.value if isinstance(arg, ast.BinOp) and isinstance(arg.left, ast.Constant) else None
        if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mult) and isinstance(weight, int | float)
                and _is_number(weight) and weight > 0):
            raise _Bad(f"mix() takes each form as a positive weight times it (0.3 * normal(...)), got "
                       f"{ast.unparse(arg)!r}")
        if _name(arg.right) == "mix":
            raise _Bad("mix() inside mix(): give every component in one mix()")
        weights.append(float(weight))
        parts.append(_simple(arg.right, keyword, floor, base))
    total = sum(weights)
    return Mixture(tuple(w / total for w in weights), tuple(parts), min(p.low for p in parts),
                   max(p.high for p in parts))


def _empirical(path: str, keyword: str, floor: int, top: int | None, base: str | None) -> Empirical:
    """A trace's lengths for ``keyword``, each raised to ``floor``; rows longer than ``top`` are left out."""
    trace = traces.load_trace(traces.resolve(path, base))
    every = [r.input_length if keyword == "ctx" else r.output_length for r in trace.rows]
    values = tuple(max(floor, v) for v in every if top is None or v <= top)
    if not values:
        raise _Bad(f"trace({path}) has no row of {keyword} <= max={top}")
    return Empirical(trace.path, values, min(values), max(values))


def described(dists: Mapping[str, Lengths | None]) -> dict[str, str] | None:
    """``{keyword: the string it was given}`` for the keywords that draw their lengths (None when none does)."""
    out = {k: d.text for k, d in dists.items() if d is not None}
    return out or None


def per_request(dist: Lengths | None, fixed: int, n: int, nodeid: str) -> list[int]:
    """``n`` requests' lengths: ``fixed`` for each, or draws for the node id, none above ``fixed`` (the longest
    draw, or less where the runner sized the case down for a small engine)."""
    if dist is None:
        return [fixed] * n
    return [min(v, fixed) for v in dist.draw(n, nodeid)]


def typical(dist: Lengths | None, fixed: int) -> int:
    """A typical request's length: ``fixed``, or the median of a distribution (of 1,001 draws of a fixed seed), never
    above ``fixed``."""
    if dist is None:
        return fixed
    return min(fixed, int(np.median(dist.draw(1001, "typical"))))
