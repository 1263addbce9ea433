"""Prompts of a named content kind and an exact server-counted length.

Speculative-decoding acceptance depends on what text the model sees, so a perf case asks for
``ctx`` prompt tokens of one kind (prose, code, reasoning, repetitive). The text comes from the
corpora shipped in ``pytest_specperf/data/`` and is cut to length with the server's own
tokenizer, which is an HTTP round trip per call: the search below takes few calls.

Many prompts at once (a load case's users): :func:`build_prompts` builds the first one, takes
its tokens per piece of text as the length model for the rest, so each later search starts a
few tokens from ``ctx`` and ends in two or three counts instead of about four, and runs those
searches side by side, ``COUNT_WORKERS`` counts in flight. Every prompt is still counted by the
server (an opaque tokenizer gives no other exact length), but the counts overlap.
"""

from __future__ import annotations

import bisect
import contextlib
import random
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from pytest_specperf import stopping
from pytest_specperf.prompts.content_kinds import CONTENT_KINDS

KINDS = CONTENT_KINDS

#: Each prompt ends with this (after a blank line) unless ``instruction`` is given: it invites a
#: long continuation of the same kind, so the generation keeps the prompt's character.
DEFAULT_INSTRUCTIONS: dict[str, str] = {
    "prose": "Continue the text above in the same style, at length.",
    "code": "Continue this code with more functions in the same style.",
    "reasoning": "Continue the reasoning step by step.",
    "repetitive": "Continue the records above in exactly the same format.",
}

#: Used instead when ``ctx`` is too small for the default (then no instruction at all).
SHORT_INSTRUCTIONS: dict[str, str] = {
    "prose": "Continue the text.",
    "code": "Continue the code.",
    "reasoning": "Continue the reasoning.",
    "repetitive": "Continue the records.",
}

#: Kinds whose completions prompts end with the corpus text itself: a raw continuation of records
#: copies them, while an instruction line invites small instruct models to answer it instead.
RAW_ON_COMPLETIONS: frozenset[str] = frozenset({"repetitive"})

#: Kinds whose prompts begin at a block start, header included: records make sense to a model
#: only with their heading, and one cut mid-block is continued as a different table. Later
#: variants still differ (they begin a few characters into the block, see ``_Corpus.stream``).
BLOCK_STARTS_ONLY: frozenset[str] = frozenset({"repetitive"})

#: Most calls of ``count_tokens`` one build may make (each is a server round trip).
MAX_CALLS = 12
#: After this many calls, a count within tolerance ends the search for an exact one.
EXACT_CALLS = 6
#: Token counts ``build_prompts`` keeps in flight at once (each a short request to the server).
COUNT_WORKERS = 8

_UNIT_SEPARATOR = "\n%%\n"  # separates units (pieces, files, problems, blocks) in the data files
_JOIN = "\n\n"  # how units follow each other in a prompt
# Cut points: after a run of letters and digits (at most 10, and underscores apart, since BPE
# splits long words and identifiers) or after one punctuation character, so that one step on
# this grid is about one token for word-level and BPE tokenizers alike.
_PIECE = re.compile(r"[^\W_]{1,10}|[^\w\s]|_")
_WORD_START = re.compile(r"(?<![\w])\w|(?<=\s)[^\w\s]")
_SENTENCE_START = re.compile(r"(?<=[.!?] )[A-Z]")
_TOKENS_PER_PIECE = 1.1  # first guess (word-level counters: 1; BPE: 1.0-1.5); then measured
_CHARS_PER_TOKEN = {"prose": 4.5, "code": 3.3, "reasoning": 3.0, "repetitive": 2.4}  # to size the first body


@dataclass(frozen=True)
class Prompt:
    """A prompt of ``kind``; ``tokens`` is ``count_tokens(text)``, within 1% of the asked ``ctx``."""

    text: str
    kind: str
    ctx: int
    tokens: int
    variant: int
    head: str = ""  # the text's leading tag, counted in ``tokens`` ("" = none; prompts/cold.py)


class _Corpus:
    """One kind's text: units joined in order, and the start points variants use."""

    def __init__(self, units: list[str], *, block_starts_only: bool = False) -> None:
        self.units = units
        self.block_starts_only = block_starts_only
        self.text = _JOIN.join(units)
        self.unit_starts: list[int] = []
        pos = 0
        for unit in units:
            self.unit_starts.append(pos)
            pos += len(unit) + len(_JOIN)
        self.starts = self._variant_starts()

    def _variant_starts(self) -> list[int]:
        """Every word start: natural starts first, those with distinct first words first of all.

        Servers cache prompt prefixes, so the first variants begin at unit, paragraph, line or
        sentence starts whose first words differ; the rest follow, spread over the corpus.
        """
        text = self.text
        if self.block_starts_only:
            return _spread(self.unit_starts)
        paragraphs = [m.end() for m in re.finditer(r"\n\n[ \t]*(?=\S)", text)]
        lines = [m.end() for m in re.finditer(r"\n[ \t]*(?=\S)", text)]
        sentences = [m.start() for m in _SENTENCE_START.finditer(text)]
        seen: set[int] = set()
        ordered: list[int] = []
        for tier in (self.unit_starts, paragraphs, lines, sentences):
            for pos in _spread(tier):
                if pos not in seen:
                    seen.add(pos)
                    ordered.append(pos)
        first_words: set[str] = set()
        distinct: list[int] = []
        repeated: list[int] = []
        for pos in ordered:
            m = _PIECE.match(text, pos)
            word = m.group().lower() if m else ""
            (repeated if word in first_words else distinct).append(pos)
            first_words.add(word)
        rest = [m.start() for m in _WORD_START.finditer(text) if m.start() not in seen]
        return distinct + repeated + _spread(rest)

    def stream(self, variant: int, min_chars: int) -> str:
        """At least ``min_chars`` of text for ``variant``, starting at its own start point.

        There are as many start points as word starts (over ten thousand per kind). Variants past
        that reuse one, begin inside a word just after it instead (so the first characters still differ from
        the variant that starts on the word) and take the later units in a variant-seeded order.
        """
        start = self.starts[variant % len(self.starts)]
        cycle = variant // len(self.starts)
        if cycle:
            # Inside-word positions are no variant's start point, so none of them collides with one.
            # Record blocks stay whole below their heading, so only the heading line is cut into.
            stop = self.text.find("\n", start) if self.block_starts_only else start + 200
            inside = [m.start() for m in re.finditer(r"(?<=\w)\w", self.text[start:stop])]
            if inside:
                start += inside[(cycle - 1) % len(inside)]
        unit = bisect.bisect_right(self.unit_starts, start) - 1
        end = self.unit_starts[unit] + len(self.units[unit])
        parts = [self.text[start:end]]
        size = len(parts[0])
        n = len(self.units)
        if cycle == 0:
            order = [(unit + 1 + i) % n for i in range(n)]
        else:
            order = [i for i in range(n) if i != unit]
            random.Random(cycle).shuffle(order)
            order.append(unit)
        i = 0
        while size < min_chars:
            piece = self.units[order[i % len(order)]]
            parts.append(piece)
            size += len(_JOIN) + len(piece)
            i += 1
        return _JOIN.join(parts)


def _spread(positions: list[int]) -> list[int]:
    """``positions`` reordered so that neighbours in the result lie far apart in the corpus."""
    n = len(positions)
    if n < 3:
        return list(positions)
    step = max(1, round(n * 0.6180339887))
    while _gcd(step, n) != 1:
        step += 1
    return [positions[(i * step) % n] for i in range(n)]


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


@cache
def _corpus(kind: str) -> _Corpus:
    """The parsed corpus of ``kind``, read from package data once."""
    raw = resources.files("pytest_specperf").joinpath("data", f"{kind}.txt").read_text(encoding="utf-8")
    units = [u.strip("\n").rstrip() for u in raw.replace("\r\n", "\n").split(_UNIT_SEPARATOR)]
    return _Corpus([u for u in units if u.strip()], block_starts_only=kind in BLOCK_STARTS_ONLY)


#: ``n`` pieces from a position, for n in powers of 8 (largest first): each skips the whitespace before a piece as
#: ``_PIECE.finditer`` does and takes the piece as it does (possessive: never a shorter run of letters), so ``n`` of
#: them end where finditer's n-th does, and a stride that runs out of text fails at once (backtracking into words
#: took minutes). Counted in the regex engine, with no match object per piece, a trace's thousands of blocks take
#: a tenth of the CPU that listing every piece's end took (1.1 s for 162 Mooncake rows).
_STRIDES = tuple((n, re.compile(rf"(?:\s*+(?:[^\W_]{{1,10}}+|[^\w\s]|_)){{{n}}}")) for n in (512, 64, 8, 1))
#: Another piece follows (every character but whitespace begins one).
_MORE = re.compile(r"\s*+\S")


class _Body:
    """A variant's text and its cut points (ends of pieces), grown on demand."""

    def __init__(self, corpus: _Corpus, variant: int, chars: int) -> None:
        self.corpus = corpus
        self.variant = variant
        self.text = corpus.stream(variant, chars)
        self._cuts = {0: 0}  # pieces -> where they end, for those asked (a search asks a few)

    def cut(self, k: int) -> int:
        """End of the ``k``-th piece (1-based): the body is ``text[:cut(k)]``.

        The last piece of the text may be cut short by the stream's end, so a cut needs a piece after it; the text
        grows until there is one (the stream of a variant keeps its start as it grows, so known cuts stay)."""
        end = self._cuts.get(k)
        if end is not None:
            return end
        base = max(j for j in self._cuts if j < k)
        while True:
            end = self._advance(self._cuts[base], k - base)
            if end is not None and _MORE.match(self.text, end):
                self._cuts[k] = end
                return end
            self.text = self.corpus.stream(self.variant, 2 * len(self.text) + 1024)

    def _advance(self, pos: int, n: int) -> int | None:
        """Where ``n`` more pieces from ``pos`` end; None when the text ends first."""
        for size, stride in _STRIDES:
            while n >= size:
                m = stride.match(self.text, pos)
                if m is None:
                    return None
                pos, n = m.end(), n - size
        return pos


class _OutOfCalls(Exception):
    """The call budget is spent; the closest text counted so far is the answer."""


class _Counter:
    """Counts ``body[:length] + tail`` with the server's tokenizer within a call budget, keeping the closest text."""

    def __init__(self, body: _Body, ctx: int, count_tokens: Callable[[str], int], max_calls: int,
                 head: str = "") -> None:
        self.body = body
        self.head = head
        self.ctx = ctx
        self.count_tokens = count_tokens
        self.max_calls = max_calls
        self.tol = max(1.0, 0.01 * ctx)
        self.calls = 0
        self.best: tuple[int, str] | None = None  # (tokens, text) closest to ctx so far
        self.tail = ""
        self.counted: dict[int, int] = {}  # body length in chars -> tokens of body[:length] + tail

    def start(self, tail: str) -> None:
        """Count with a new tail from now on (the calls and the closest text carry over)."""
        self.tail = tail
        self.counted = {}

    def close_enough(self) -> bool:
        """Whether the closest text so far is within tolerance of ctx."""
        return self.best is not None and abs(self.best[0] - self.ctx) <= self.tol

    def count(self, length: int) -> int:
        """Tokens of ``body[:length] + tail``; raises _OutOfCalls when the budget is spent."""
        ctx = self.ctx
        if length not in self.counted:
            # Exactness is worth a few calls, not many: past EXACT_CALLS a count within
            # tolerance is kept (neighbouring cuts can straddle ctx, e.g. a split number).
            if self.calls >= self.max_calls or (self.calls >= EXACT_CALLS and self.close_enough()):
                raise _OutOfCalls
            self.calls += 1
            text = self.head + self.body.text[:length] + self.tail
            n = self.count_tokens(text)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise TypeError(f"count_tokens must return a non-negative int, got {n!r}")
            self.counted[length] = n
            best = self.best
            if best is None or (abs(n - ctx), n > ctx) < (abs(best[0] - ctx), best[0] > ctx):
                self.best = (n, text)
        return self.counted[length]


def _check_args(kind: str, ctx: int, variant: int, max_calls: int, api: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown prompt kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx < 1:
        raise ValueError(f"ctx must be a positive int, got {ctx!r}")
    if isinstance(variant, bool) or not isinstance(variant, int) or variant < 0:
        raise ValueError(f"variant must be a non-negative int, got {variant!r}")
    if max_calls < 1:
        raise ValueError(f"max_calls must be >= 1, got {max_calls}")
    if api not in ("completions", "chat"):
        raise ValueError(f"api must be 'completions' or 'chat', got {api!r}")


def _instructions(kind: str, instruction: str | None, api: str) -> list[str]:
    """The instructions to try in turn, longest first ("" = none)."""
    if instruction is None and api == "completions" and kind in RAW_ON_COMPLETIONS:
        return [""]
    if instruction is None:
        return [DEFAULT_INSTRUCTIONS[kind], SHORT_INSTRUCTIONS[kind], ""]
    return [instruction.strip()]


def build_prompt(
    kind: str,
    ctx: int,
    count_tokens: Callable[[str], int],
    *,
    variant: int = 0,
    instruction: str | None = None,
    api: str = "completions",
    max_calls: int = MAX_CALLS,
    tokens_per_piece: float | None = None,
    head: str = "",
) -> Prompt:
    """A ``kind`` prompt of ``ctx`` tokens as ``count_tokens`` (the server's tokenizer) counts them.

    The text is corpus text followed by a blank line and ``instruction``, all counted. With
    ``instruction=None`` the kind's default is used, or, when ``ctx`` is too small for it, a shorter
    one or none; ``instruction=""`` means none (the default on ``api="completions"`` for the kinds in
    ``RAW_ON_COMPLETIONS``). Distinct ``variant`` values start at distinct points
    of the corpus, so their texts differ from the first characters on. ``tokens_per_piece``: the
    first guess of the search, measured on another prompt of the kind (``build_prompts``). ``head``: text
    before the corpus text, counted in ``ctx`` (a cold prompt's tag, ``prompts/cold.py``). Raises
    ValueError for an unknown kind or a bad argument, or when no text within max(1, 1% of ctx)
    tokens was found in ``max_calls`` calls of ``count_tokens``.
    """
    _check_args(kind, ctx, variant, max_calls, api)
    instructions = _instructions(kind, instruction, api)
    body = _Body(_corpus(kind), variant, int(ctx * _CHARS_PER_TOKEN[kind] * 1.5) + 512)
    counter = _Counter(body, ctx, count_tokens, max_calls, head)
    shortest = 0
    for instr in instructions:
        tail = _JOIN + instr if instr else ""
        counter.start(tail)
        with contextlib.suppress(_OutOfCalls):
            _search(body, ctx, counter.count, overhead=len(_PIECE.findall(head + tail)) + 1,
                    first_ratio=tokens_per_piece or _TOKENS_PER_PIECE)
        if counter.best is not None and counter.close_enough():
            return Prompt(text=counter.best[1], kind=kind, ctx=ctx, tokens=counter.best[0], variant=variant,
                          head=head)
        shortest = counter.counted.get(body.cut(1), 0)
        if counter.calls >= max_calls or shortest <= ctx:
            break  # out of calls, or the instruction fits and the search failed: a shorter one won't help
    if shortest > ctx:
        raise ValueError(
            f"ctx={ctx} is too small for a {kind} prompt: the shortest text tried (one word"
            f"{' and the instruction' if instructions[-1] else ''}) already takes {shortest} tokens"
        )
    got = "nothing" if counter.best is None else f"{counter.best[0]} tokens"
    raise ValueError(
        f"could not build a {kind} prompt of {ctx} tokens (within {counter.tol:g}) in {counter.calls} count_tokens "
        f"calls; closest was {got}"
    )


def build_prompts(
    kind: str,
    ctx: int,
    count_tokens: Callable[[str], int],
    variants: Iterable[int],
    *,
    instruction: str | None = None,
    api: str = "completions",
    workers: int = COUNT_WORKERS,
    head: str = "",
) -> list[Prompt]:
    """:func:`build_prompt` for each of ``variants``, in order: the first alone, then the rest side by side.

    The first prompt's tokens per piece (its server count over its pieces) is the length model the
    others start from; their searches run ``workers`` at a time, so ``count_tokens`` must be safe
    to call from several threads (an ``httpx.Client`` is). The first error, by variant order, is raised.
    """
    todo = list(variants)
    if not todo:
        return []
    first = build_prompt(kind, ctx, count_tokens, variant=todo[0], instruction=instruction, api=api, head=head)
    ratio = first.tokens / max(1, len(_PIECE.findall(first.text)))

    stop = threading.Event()  # Ctrl-C or another search's error: each running search ends at its next count
    count = stopping.unless_stopped(count_tokens, stop)

    def one(variant: int) -> Prompt:
        return build_prompt(kind, ctx, count, variant=variant, instruction=instruction, api=api,
                            tokens_per_piece=ratio, head=head)

    if len(todo) == 1:
        return [first]
    return [first, *stopping.thread_map(one, todo[1:], min(workers, len(todo) - 1), stop=stop)]


def _search(body: _Body, ctx: int, count: Callable[[int], int], *, overhead: int,
            first_ratio: float = _TOKENS_PER_PIECE) -> None:
    """Count cuts of ``body`` until one gives exactly ``ctx`` tokens (or the budget runs out).

    Steps are sized in pieces (a word or one punctuation mark): for word-level counters a piece is
    one token, and for BPE tokenizers tokens per piece vary less than tokens per character. A
    secant step while ``ctx`` is not bracketed, then secant steps kept inside the bracket, then a
    bisection on characters when two neighbouring cuts straddle ``ctx`` (a word that BPE splits).
    """
    tokens_at: dict[int, int] = {}  # piece count k -> tokens
    k = max(1, round((ctx - overhead) / first_ratio))
    prev: int | None = None
    while True:
        t = tokens_at[k] = count(body.cut(k))
        if t == ctx:
            return
        lo = max((j for j, v in tokens_at.items() if v < ctx), default=None)
        hi = min((j for j, v in tokens_at.items() if v > ctx), default=None)
        if lo is not None and hi is not None and lo < hi:
            if hi - lo == 1:
                _split_piece(body, ctx, count, tokens_at, lo, hi)
                return
            nxt = _step_inside(tokens_at, lo, hi, k, prev, ctx)
        else:
            nxt = _step_outside(tokens_at, k, ctx, overhead)
            if nxt < 1:
                return
        prev, k = k, nxt


def _step_inside(tokens_at: dict[int, int], lo: int, hi: int, k: int, prev: int | None, ctx: int) -> int:
    """The next piece count inside the bracket ``lo < k < hi``: a secant step, else interpolation."""
    t = tokens_at[k]
    x = lo + (ctx - tokens_at[lo]) * (hi - lo) / (tokens_at[hi] - tokens_at[lo])
    if prev is not None and tokens_at[prev] != t:
        # Secant through the last two counts: the local ratio. Interpolating from a stale
        # far end of the bracket converges from one side only.
        secant = k + (ctx - t) * (k - prev) / (t - tokens_at[prev])
        if lo < secant < hi:
            x = secant
    return min(hi - 1, max(lo + 1, round(x)))


def _step_outside(tokens_at: dict[int, int], k: int, ctx: int, overhead: int) -> int:
    """The next piece count while ctx is not bracketed; below 1 when there is none left to count."""
    t = tokens_at[k]
    nxt = max(1, k + round((ctx - t) / _tokens_per_piece(tokens_at, k, overhead)))
    if nxt in tokens_at:
        # A flat spot of the tokenizer: walk to the next uncounted cut in the wanted direction.
        step = 1 if tokens_at[nxt] < ctx else -1
        while nxt in tokens_at:
            nxt += step
    return nxt


def _split_piece(body: _Body, ctx: int, count: Callable[[int], int], tokens_at: dict[int, int], lo: int,
                 hi: int) -> None:
    """Neighbouring cuts ``lo`` and ``hi`` straddle ctx: bisect on characters inside the piece between them."""
    a, b = body.cut(lo), body.cut(hi)
    t_a, t_b = tokens_at[lo], tokens_at[hi]
    while b - a > 1:
        mid = min(b - 1, max(a + 1, round(a + (ctx - t_a) * (b - a) / (t_b - t_a))))
        t = count(mid)
        if t == ctx:
            return
        a, b, t_a, t_b = (mid, b, t, t_b) if t < ctx else (a, mid, t_a, t)


def _tokens_per_piece(tokens_at: dict[int, int], k: int, overhead: int) -> float:
    """Average tokens per piece: over the widest span counted, else from the origin.

    Per-piece token counts are lumpy, so a ratio between close cuts is noise; the widest span
    averages it out.
    """
    if len(tokens_at) >= 2:
        lo, hi = min(tokens_at), max(tokens_at)
        ratio = (tokens_at[hi] - tokens_at[lo]) / (hi - lo)
    else:
        ratio = (tokens_at[k] - overhead) / k
    return ratio if 0.05 < ratio < 20 else _TOKENS_PER_PIECE
