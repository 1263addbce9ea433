"""The content classifier recognises each kind from text alone, deterministically."""

from __future__ import annotations

import pytest
from support.sim_samples import ALL

from pytest_specperf.sim import classify
from pytest_specperf.sim.textgen import prompt_text

CASES = [(kind, name, text) for kind, texts in ALL.items() for name, text in texts.items()]


@pytest.mark.parametrize(("kind", "name", "text"), CASES, ids=[f"{k}-{n}" for k, n, _ in CASES])
def test_hand_written_samples(kind: str, name: str, text: str) -> None:
    assert classify(text) == kind


@pytest.mark.parametrize("kind", sorted(ALL))
@pytest.mark.parametrize("tokens", [300, 1024, 5120, 12000])
def test_generated_prompts_of_every_length(kind: str, tokens: int) -> None:
    assert classify(prompt_text(kind, tokens, seed=tokens)) == kind


def test_empty_and_tiny_text_is_prose() -> None:
    assert classify("") == "prose"
    assert classify("Hi.") == "prose"


def test_tiled_prose_is_repetitive_but_one_copy_is_not() -> None:
    one = ALL["prose"]["news"]
    assert classify(one) == "prose"
    assert classify((one + "\n") * 4) == "repetitive"


def test_shipped_corpora_from_300_tokens() -> None:
    """Windows of the prompt corpora (when present) are recognised from 300 tokens up."""
    import random
    from pathlib import Path

    from pytest_specperf.sim.tokenizer import detokenize, tokenize

    data = Path(__file__).resolve().parents[2] / "pytest_specperf" / "data"
    if not (data / "prose.txt").is_file():
        pytest.skip("no prompt corpora in this checkout")
    rng = random.Random(7)
    misses = []
    for kind in sorted(ALL):
        ids = tokenize((data / f"{kind}.txt").read_text(encoding="utf-8").replace("\n%%\n", "\n\n"))
        for n in (300, 1000, 3000, 5000):
            for _ in range(8):
                start = rng.randrange(0, max(1, len(ids) - n))
                got = classify(detokenize(ids[start:start + n]))
                if got != kind:
                    misses.append((kind, n, got))
    assert len(misses) <= 2, misses
