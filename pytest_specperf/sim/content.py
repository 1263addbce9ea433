"""Content kind of a prompt, decided from its text alone (a real server gets no hint either).

``classify(text)`` returns ``"repetitive"``, ``"code"``, ``"reasoning"`` or ``"prose"``, tested in
that order; the rules are deterministic and documented here because acceptance depends on them:

1. repetitive: at least ``REPEAT_MIN`` of the word 4-grams (numbers folded to one symbol, so
   counting lists and log lines repeat too) already occurred earlier in the text, or (with 3+
   lines) at least ``LINE_REPEAT_MIN`` of the lines have the shape of one of the two lines
   before (letter runs, digit runs and spaces folded: records, logs, tables, CSV). A passage
   tiled to reach a length is therefore repetitive, which is what an n-gram drafter sees.
2. code: a code score of at least ``CODE_MIN``: the share of non-space characters that are
   code punctuation (``{}[]();_#`` and ``== != -> => :: += <= >= //`` as pairs) plus the share of
   words that are programming keywords (def, return, class, import, const, fn, ...), plus the
   share of lines that are indented or end in ``{ } ; :`` (halved; only with 5+ lines).
3. reasoning: at least ``REASON_MIN`` reasoning connectives per 100 words, with strong markers
   (therefore, thus, hence, wait, step, let's, check, verify, compute, suppose, ...) counting 2
   and weak ones (so, because, since, then, if, first, next, means, ...) counting 1, plus
   arithmetic: each spaced ``a = b`` counts 1 (``key=value`` records do not).
4. prose: everything else, including empty text.

Checked against the shipped corpora (``pytest_specperf/data``): right from about 300 tokens up;
shorter snippets of code or records carry too little structure and may read as prose.
"""

from __future__ import annotations

import functools
import re

REPEAT_MIN = 0.5
LINE_REPEAT_MIN = 0.5
CODE_MIN = 0.3
REASON_MIN = 8.0

_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z_']*|\d+(?:\.\d+)?")
_CODE_CHARS = frozenset("{}[]();_#")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CODE_PAIRS = re.compile(r"==|!=|->|=>|::|\+=|-=|<=|>=|//|&&|\|\|")
_KEYWORDS = _wordset("""
args assert async await bool break case catch char class console const continue cout def dict double
elif enum except extends f64 false final finally float fn from fun function goto i32 i64 impl
implements import include init int interface isinstance kwargs lambda len let list main mut
namespace new nil none np null package print printf println private protected pub public raise range
return self static std str string struct super switch template this throw torch true try tuple
typename typeof u32 u8 undefined unsigned usize val var void yield
""")
_STRONG = _wordset("""
actually answer assume calculate calculating case cases check checking compute computing conclude
conclusion contradiction deduce derive equation hence hmm implies let's recheck simplify solve
solving step steps substitute suppose therefore thus verify verifying wait
""")
_WEAK = _wordset("""
add because consider divide equals finally first get gives if meaning means minus multiply next now
plus result second since so subtract sum then third times total
""")
_EQ_RE = re.compile(r"[\w)\]] = [\w(\[-]")  # spaced like arithmetic, not key=value records
_ALPHA_RUN = re.compile(r"[A-Za-z_]+")
_DIGIT_RUN = re.compile(r"\d+")
_SPACE_RUN = re.compile(r"\s+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def repeat_ratio(words: list[str]) -> float:
    """Share of word 4-grams already seen earlier in the text (numbers folded together)."""
    folded = ["0" if w[0].isdigit() else w for w in words]
    grams = list(zip(folded, folded[1:], folded[2:], folded[3:], strict=False))
    if len(grams) < 8:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for g in grams:
        if g in seen:
            repeats += 1
        else:
            seen.add(g)
    return repeats / len(grams)


def line_shape(line: str) -> str:
    """A line with letter runs as ``a``, digit runs as ``0`` and space runs as one space."""
    return _SPACE_RUN.sub(" ", _DIGIT_RUN.sub("0", _ALPHA_RUN.sub("a", line.strip())))


def line_repeat_ratio(text: str) -> float:
    """Share of lines (3 or more with 10+ shape characters) shaped like one of the 2 lines before.

    Only nearby lines count, so a long file of varied code does not add up to "repetitive"
    the way consecutive records, log lines and table rows do.
    """
    shapes = [sh for sh in map(line_shape, text.splitlines()) if len(sh) >= 10]
    if len(shapes) < 3:
        return 0.0
    hits = sum(1 for i in range(1, len(shapes)) if shapes[i] in shapes[max(0, i - 2):i])
    return hits / (len(shapes) - 1)


def code_score(text: str, words: list[str]) -> float:
    """Code punctuation density + keyword share + half the share of code-shaped lines."""
    chars = [c for c in text if not c.isspace()]
    if not chars or not words:
        return 0.0
    punct = sum(1 for c in chars if c in _CODE_CHARS) + 2 * len(_CODE_PAIRS.findall(text))
    keywords = sum(1 for w in words if w in _KEYWORDS)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    shape = 0.0
    if len(lines) >= 5:  # line shape says nothing about a paragraph or two
        shaped = sum(1 for ln in lines if ln.startswith(("    ", "\t")) or ln.rstrip()[-1] in "{};:")
        shape = 0.5 * shaped / len(lines)
    return punct / len(chars) + keywords / len(words) + shape


def reasoning_score(text: str, words: list[str]) -> float:
    """Reasoning connectives (strong 2, weak 1) and equations per 100 words."""
    if not words:
        return 0.0
    points = sum(2 if w in _STRONG else 1 if w in _WEAK else 0 for w in words)
    points += len(_EQ_RE.findall(text))
    return 100.0 * points / len(words)


@functools.lru_cache(maxsize=256)
def classify(text: str) -> str:
    """Content kind of ``text``: "repetitive", "code", "reasoning" or "prose" (see module docstring)."""
    words = _words(text)
    if repeat_ratio(words) >= REPEAT_MIN or line_repeat_ratio(text) >= LINE_REPEAT_MIN:
        return "repetitive"
    if code_score(text, words) >= CODE_MIN:
        return "code"
    if reasoning_score(text, words) >= REASON_MIN:
        return "reasoning"
    return "prose"
