"""Deterministic output text: a seeded stream of token ids that reads like the prompt's kind."""

from __future__ import annotations

import random
from collections.abc import Iterator

from pytest_specperf.sim.tokenizer import tokenize

_PROSE = ("the", "a", "river", "city", "morning", "old", "house", "light", "people", "walked", "along", "quiet",
          "street", "and", "of", "in", "with", "under", "garden", "window", "story", "long", "evening", "small",
          "boat", "harbour", "children", "market", "road", "stone", "bridge", "winter", "summer", "was", "were",
          "had", "their", "near", "across", "slowly", "bright", "green", "village", "after", "before", "library")
_REASONING = ("so", "then", "therefore", "because", "we", "check", "step", "the", "total", "is", "wait", "let's",
              "verify", "that", "means", "next", "value", "gives", "answer", "case", "if", "compute", "sum")
_IDENTS = ("total", "count", "value", "items", "result", "buffer", "index", "limit", "offset", "node", "cache",
           "key", "name", "path", "size", "left", "right", "queue", "state", "config", "data", "row", "col", "token")
_CODE_TEMPLATES = ("def {f}({a}, {b}):", "    return {a} + {b} * {n}", "for {a} in range({b}):",
                   "    {a} += {b}[{n}]", "if {a} > {b}:", "    {a} = {f}({b})", "{a} = {f}({b}, {n})",
                   "print({a}, {b})", "class {F}:", "    def __init__(self, {a}):", "        self.{a} = {a}",
                   "while {a} < {n}:", "    {a}.append({b})", "return {a}", "{a} = [{b} for {b} in {c} if {b}]")


def _prose(rng: random.Random) -> str:
    words = [rng.choice(_PROSE) for _ in range(rng.randint(6, 14))]
    return " " + " ".join(words).capitalize() + rng.choice((".", ".", ",", ";"))


def _reasoning(rng: random.Random) -> str:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    words = " ".join(rng.choice(_REASONING) for _ in range(rng.randint(4, 9)))
    return f" {words.capitalize()}: {a} + {b} = {a + b}."


def _code(rng: random.Random) -> str:
    a, b, c = rng.sample(_IDENTS, 3)
    f = f"{rng.choice(_IDENTS)}_{rng.choice(_IDENTS)}"
    line = rng.choice(_CODE_TEMPLATES).format(a=a, b=b, c=c, f=f, F=f.title().replace("_", ""), n=rng.randint(0, 99))
    if rng.random() < 0.6:  # comments of varying length keep line shapes from repeating like records
        line += "  # " + " ".join(rng.choice(_PROSE) for _ in range(rng.randint(1, 7)))
    return line + "\n"


def _repetitive(rng: random.Random) -> str:
    return " the same line again and again."


_KINDS = {"prose": _prose, "reasoning": _reasoning, "code": _code, "repetitive": _repetitive}


def token_stream(kind: str, seed: int) -> Iterator[int]:
    """Endless token ids of text of ``kind`` ("prose", "code", "reasoning", "repetitive"), fixed by ``seed``."""
    rng = random.Random(seed)
    make = _KINDS.get(kind, _prose)
    while True:
        yield from tokenize(make(rng), parse_special=False)


def prompt_text(kind: str, prompt_tokens: int, seed: int = 0) -> str:
    """A completions prompt of ``kind`` whose ``usage.prompt_tokens`` (BOS included) is exactly ``prompt_tokens``."""
    from pytest_specperf.sim.tokenizer import completion_prompt_ids, detokenize  # late: keep the module import light

    if prompt_tokens < 2:
        raise ValueError("prompt_tokens must be >= 2 (the BOS and at least one text token)")
    stream = token_stream(kind, seed)
    pool = [next(stream) for _ in range(prompt_tokens + 64)]
    k = prompt_tokens - 1
    for _ in range(50):
        while k > len(pool):
            pool.append(next(stream))
        text = detokenize(pool[:k]).strip(" ") or "a"
        n = len(completion_prompt_ids(text))
        if n == prompt_tokens:
            return text
        k = max(1, k + (prompt_tokens - n))
    # re-tokenizing at the cut can oscillate by one: pad with single-token words instead
    text = detokenize(pool[: max(1, k - 8)]).strip(" ")
    while len(completion_prompt_ids(text)) < prompt_tokens:
        text += " a"
    return text
