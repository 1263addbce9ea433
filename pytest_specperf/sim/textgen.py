"""Deterministic output text: a seeded stream of token ids that reads like the prompt's kind."""

from __future__ import annotations

import random
from collections.abc import Iterator

from .tokenizer import tokenize

_PROSE = ("the", "a", "river", "city", "morning", "old", "house", "light", "people", "walked", "along", "quiet",
          "street", "and", "of", "in", "with", "under", "garden", "window", "story", "long", "evening", "small",
          "boat", "harbour", "children", "market", "road", "stone", "bridge", "winter", "summer", "was", "were",
          "had", "their", "near", "across", "slowly", "bright", "green", "village", "after", "before", "library")
_REASONING = ("so", "then", "therefore", "because", "we", "check", "step", "the", "total", "is", "wait", "let's",
              "verify", "that", "means", "next", "value", "gives", "answer", "case", "if", "compute", "sum")
_CODE_LINES = ("def step(x):", "    return x + 1", "for i in range(n):", "    total += values[i]",
               "if total > limit:", "    break", "result = compute(a, b)", "print(result)", "class Node:",
               "    def __init__(self, value):", "        self.value = value", "return None")


def _prose(rng: random.Random) -> str:
    words = [rng.choice(_PROSE) for _ in range(rng.randint(6, 14))]
    return " " + " ".join(words).capitalize() + rng.choice((".", ".", ",", ";"))


def _reasoning(rng: random.Random) -> str:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    words = " ".join(rng.choice(_REASONING) for _ in range(rng.randint(4, 9)))
    return f" {words.capitalize()}: {a} + {b} = {a + b}."


def _code(rng: random.Random) -> str:
    return rng.choice(_CODE_LINES) + "\n"


def _repetitive(rng: random.Random) -> str:
    return " the same line again and again."


_KINDS = {"prose": _prose, "reasoning": _reasoning, "code": _code, "repetitive": _repetitive}


def token_stream(kind: str, seed: int) -> Iterator[int]:
    """Endless token ids of text of ``kind`` ("prose", "code", "reasoning", "repetitive"), fixed by ``seed``."""
    rng = random.Random(seed)
    make = _KINDS.get(kind, _prose)
    while True:
        yield from tokenize(make(rng), parse_special=False)
