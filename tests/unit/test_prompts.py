"""Prompts of a content kind and an exact length: the cut search, variants, and the corpora."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import zlib
from collections.abc import Callable
from importlib import resources

import pytest

from pytest_specperf.prompts import exact_length as prompts
from pytest_specperf.prompts.exact_length import DEFAULT_INSTRUCTIONS, KINDS, MAX_CALLS, Prompt, build_prompt
from pytest_specperf.sim import classify as sim_classify
from pytest_specperf.sim import tokenize as sim_tokenize

_WORDS = re.compile(r"\w+|[^\w\s]")
_BPE_LIKE = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]+|\s+(?!\S)|\s+")


def words(text: str) -> int:
    """A word-level stand-in tokenizer: each word and each punctuation mark is a token."""
    return len(_WORDS.findall(text))


def words_bos(text: str) -> int:
    """The same with a BOS token, as vLLM and SGLang count a completions prompt."""
    return 1 + words(text)


def bpe_like(text: str) -> int:
    """A lumpy BPE-like counter: GPT-2 style pieces cut into tokens of at most 4 bytes, plus BOS."""
    return 1 + sum(-(-len(p.encode()) // 4) for p in _BPE_LIKE.findall(text))


class Counting:
    """Wraps a counter and records how often it was called (each call is a server round trip)."""

    def __init__(self, counter: Callable[[str], int]) -> None:
        self.counter = counter
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return self.counter(text)


def tolerance(ctx: int) -> float:
    return max(1.0, 0.01 * ctx)


@pytest.mark.parametrize("counter", [words, words_bos], ids=["words", "words+bos"])
@pytest.mark.parametrize("ctx", [16, 64, 1000, 5000, 12000])
@pytest.mark.parametrize("kind", KINDS)
def test_prompt_hits_ctx_with_few_calls(kind: str, ctx: int, counter: Callable[[str], int]) -> None:
    counting = Counting(counter)
    p = build_prompt(kind, ctx, counting, variant=3)
    assert isinstance(p, Prompt)
    assert (p.kind, p.ctx, p.variant) == (kind, ctx, 3)
    assert p.tokens == counter(p.text)
    # A word-level counter moves one token per cut step, so the search lands exactly.
    assert p.tokens == ctx
    assert counting.calls <= 5
    # Completions prompts of record kinds end with the records (see the test below).
    assert p.text.endswith(DEFAULT_INSTRUCTIONS[kind]) != (kind in prompts.RAW_ON_COMPLETIONS)


@pytest.mark.parametrize("ctx", [16, 64, 300, 1000, 5000, 12000])
@pytest.mark.parametrize("kind", KINDS)
def test_prompt_within_tolerance_with_a_lumpy_tokenizer(kind: str, ctx: int) -> None:
    counting = Counting(bpe_like)
    p = build_prompt(kind, ctx, counting, variant=11)
    assert p.tokens == bpe_like(p.text)
    assert abs(p.tokens - ctx) <= tolerance(ctx)
    assert counting.calls <= prompts.EXACT_CALLS + 1


def test_lumpy_tokenizer_is_usually_exact_in_few_calls() -> None:
    calls = []
    exact = 0
    for kind, ctx, variant in itertools.product(KINDS, (100, 700, 2500, 6000), range(3)):
        counting = Counting(bpe_like)
        p = build_prompt(kind, ctx, counting, variant=variant)
        calls.append(counting.calls)
        exact += p.tokens == ctx
    calls.sort()
    assert calls[len(calls) // 2] <= 5, calls
    assert max(calls) <= MAX_CALLS
    assert exact >= 0.8 * len(calls)


@pytest.mark.parametrize("kind", KINDS)
def test_variants_differ_from_the_first_characters(kind: str) -> None:
    built = [build_prompt(kind, 500, words_bos, variant=v) for v in range(10)]
    for a, b in itertools.combinations(built, 2):
        assert a.text[:8] != b.text[:8]
        # Not even the first token is shared, so a prefix cache has nothing to reuse.
        assert _WORDS.match(a.text).group().lower() != _WORDS.match(b.text).group().lower()
    assert {p.tokens for p in built} == {500}
    assert {p.kind for p in built} == {kind}


@pytest.mark.parametrize("kind", KINDS)
def test_variants_past_the_start_points_still_differ(kind: str) -> None:
    n = len(prompts._corpus(kind).starts)
    # The runner draws variants from a stable hash of the case id; record blocks start only at
    # their headings, and variants past those begin a few characters in.
    assert n == 24 if kind in prompts.BLOCK_STARTS_ONLY else n > 10_000
    texts = [build_prompt(kind, 200, words, variant=v).text for v in (7, 7 + n, 7 + 2 * n, 99_999, 100_003)]
    assert len(set(texts)) == len(texts)
    assert texts[0][0] != texts[1][0] and texts[1][:2] != texts[2][:2]


def test_same_arguments_give_the_same_prompt() -> None:
    assert build_prompt("code", 777, words_bos, variant=5) == build_prompt("code", 777, words_bos, variant=5)


def test_unknown_kind_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown prompt kind 'poetry'") as info:
        build_prompt("poetry", 100, words)
    for kind in KINDS:
        assert kind in str(info.value)


@pytest.mark.parametrize("ctx", [0, -5, 2.5, True])
def test_bad_ctx_is_rejected(ctx: object) -> None:
    with pytest.raises(ValueError, match="ctx must be a positive int"):
        build_prompt("prose", ctx, words)  # type: ignore[arg-type]


def test_bad_variant_is_rejected() -> None:
    with pytest.raises(ValueError, match="variant"):
        build_prompt("prose", 100, words, variant=-1)


def test_tiny_ctx_drops_to_a_shorter_instruction() -> None:
    p = build_prompt("reasoning", 6, words_bos)
    assert p.tokens == 6
    assert p.text.endswith(prompts.SHORT_INSTRUCTIONS["reasoning"])
    bare = build_prompt("prose", 2, words_bos)
    assert bare.tokens == 2 and "Continue" not in bare.text


def test_ctx_too_small_for_anything_is_a_clear_error() -> None:
    def heavy(text: str) -> int:
        return 10 + words(text)  # e.g. a chat template's fixed overhead

    with pytest.raises(ValueError, match="too small"):
        build_prompt("prose", 3, heavy)


def test_custom_instruction_ends_the_prompt_and_is_counted() -> None:
    p = build_prompt("prose", 300, words, instruction="Now write the next chapter.")
    assert p.text.endswith("\n\nNow write the next chapter.")
    assert p.tokens == words(p.text) == 300
    bare = build_prompt("code", 300, words, instruction="")
    assert not bare.text.endswith(DEFAULT_INSTRUCTIONS["code"])
    assert bare.tokens == 300


def test_counter_must_return_an_int() -> None:
    with pytest.raises(TypeError, match="non-negative int"):
        build_prompt("prose", 100, lambda text: "12")  # type: ignore[arg-type,return-value]


def test_impossible_counter_is_a_value_error_after_the_budget() -> None:
    counting = Counting(lambda text: 7 if len(text) < 2000 else 9000)  # jumps straight over ctx
    with pytest.raises(ValueError, match="could not build a prose prompt of 500 tokens"):
        build_prompt("prose", 500, counting)
    assert counting.calls <= MAX_CALLS


@pytest.mark.parametrize("kind", ["prose", "code", "reasoning"])
def test_corpus_fills_16k_tokens_without_repeating(kind: str) -> None:
    p = build_prompt(kind, 16_000, bpe_like, variant=1)
    assert abs(p.tokens - 16_000) <= tolerance(16_000)
    units = prompts._corpus(kind).units
    # Each unit (an essay, a file, a problem) appears at most once: the text never wraps around.
    for unit in units:
        assert p.text.count(unit[:120]) <= 1
    if kind == "prose":
        sentences = re.findall(r"[A-Z][^.!?]{40,}[.!?]", p.text)
        assert len(sentences) == len(set(sentences))


def test_repetitive_corpus_repeats_by_design() -> None:
    p = build_prompt("repetitive", 16_000, bpe_like)
    assert abs(p.tokens - 16_000) <= tolerance(16_000)


def _stats(text: str) -> dict[str, float]:
    chars = [c for c in text if not c.isspace()]
    tokens = _WORDS.findall(text.lower())
    markers = sum(tokens.count(w) for w in ("so", "therefore", "step", "check", "wait", "verify", "let"))
    return {
        "compression": len(text.encode()) / len(zlib.compress(text.encode(), 9)),
        "punct": sum(1 for c in chars if not c.isalnum()) / len(chars),
        "alpha_words": sum(1 for t in tokens if t.isalpha() and len(t) > 2) / len(tokens),
        "reasoning": (markers + text.count(" = ")) / len(tokens),
    }


@pytest.mark.parametrize("variant", [0, 2, 31_337])
def test_kinds_are_distinguishable_by_simple_statistics(variant: int) -> None:
    stats = {kind: _stats(build_prompt(kind, 3000, words, variant=variant).text) for kind in KINDS}
    others = lambda kind, key: max(stats[k][key] for k in KINDS if k != kind)  # noqa: E731
    assert stats["repetitive"]["compression"] > 1.3 * others("repetitive", "compression")
    assert stats["code"]["punct"] > 1.3 * max(stats[k]["punct"] for k in ("prose", "reasoning"))
    assert stats["reasoning"]["reasoning"] > 2 * others("reasoning", "reasoning")
    assert stats["prose"]["alpha_words"] > others("prose", "alpha_words")
    assert stats["prose"]["punct"] < others("prose", "punct")


def test_package_data_is_small_and_flat() -> None:
    data = resources.files("pytest_specperf").joinpath("data")
    sizes = {f.name: len(f.read_bytes()) for f in data.iterdir() if f.name.endswith(".txt")}
    assert set(sizes) == {f"{kind}.txt" for kind in KINDS}
    assert sum(sizes.values()) < 400_000
    # flat but for the shipped prompt sets (prompts="builtin:..."), one folder of JSON lines files, and the shipped
    # trace excerpts (replay cases' trace="builtin:..."), one folder of trace files and their licence notes
    assert all(f.is_file() for f in data.iterdir() if not f.name.startswith("__") and f.name not in ("prompts",
                                                                                                        "traces"))
    assert all(f.is_file() and f.name.endswith(".jsonl") for f in data.joinpath("prompts").iterdir())
    assert {f.name.rsplit(".", 1)[-1] for f in data.joinpath("traces").iterdir()} == {"jsonl", "csv", "md"}


def test_module_is_pure_and_loads_corpora_lazily() -> None:
    code = (
        "import sys, pytest_specperf.prompts.exact_length as p\n"
        "assert 'pytest' not in sys.modules, 'prompts imports pytest'\n"
        "assert p._corpus.cache_info().currsize == 0, 'corpora loaded at import'\n"
        "p.build_prompt('code', 50, lambda t: len(t.split()))\n"
        "assert p._corpus.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# Variants 0-5 start at unit, paragraph or line starts; the large ones (as the runner draws them
# from a hash of the case id) start anywhere in the corpus, some of them mid-line.
_SIM_VARIANTS = (0, 1, 2, 5, 4242, 57_301, 99_999)


@pytest.mark.parametrize("ctx", [256, 1000, 3000])
@pytest.mark.parametrize("kind", KINDS)
def test_simulator_tokenizer_and_classifier_agree(kind: str, ctx: int) -> None:
    def sim_count(text: str) -> int:
        return len(sim_tokenize(text, add_bos=True))  # as usage.prompt_tokens counts it

    for variant in _SIM_VARIANTS:
        counting = Counting(sim_count)
        p = build_prompt(kind, ctx, counting, variant=variant)
        assert p.tokens == sim_count(p.text)
        assert abs(p.tokens - ctx) <= tolerance(ctx)
        assert counting.calls <= prompts.EXACT_CALLS + 1
        assert sim_classify(p.text) == kind, (variant, p.text[:200])


def test_repetitive_prompts_begin_at_a_block_heading() -> None:
    corpus = prompts._corpus("repetitive")
    headings = [u.split("\n", 1)[0] for u in corpus.units]
    for v in (0, 5, 23, 24, 12_345, 99_999):
        first = build_prompt("repetitive", 300, words, variant=v).text.split("\n", 1)[0]
        # A later variant begins a few characters into the heading, never in the records.
        assert any(h.endswith(first) and len(first) > len(h) - 40 for h in headings), first


def test_repetitive_completions_prompts_end_with_the_records() -> None:
    # A raw continuation of records copies them; chat still needs to be asked.
    completions = build_prompt("repetitive", 300, words, variant=3)
    chat = build_prompt("repetitive", 300, words, variant=3, api="chat")
    assert not completions.text.endswith(prompts.DEFAULT_INSTRUCTIONS["repetitive"])
    assert chat.text.endswith(prompts.DEFAULT_INSTRUCTIONS["repetitive"])
    assert build_prompt("prose", 300, words, variant=3).text.endswith(prompts.DEFAULT_INSTRUCTIONS["prose"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_bodys_cuts_are_the_ends_of_its_pieces_but_the_last(kind: str) -> None:
    # Cut points are counted in the regex engine (strides of pieces), not listed from every piece's match: each must
    # still be where the k-th piece (``_PIECE``) of the text ends, past the stream's start and its growth, and never
    # the text's last piece (the stream's end may have cut it short).
    corpus = prompts._corpus(kind)
    for variant in (0, 3, 17_999, 123_456_789):
        body = prompts._Body(corpus, variant, 200)  # short: asking far cuts makes it grow
        ends = [m.end() for m in prompts._PIECE.finditer(corpus.stream(variant, 30_000))]
        for k in (1, 2, 7, 8, 9, 63, 64, 65, 500, 511, 512, 513, 1000, 4001, 1234):
            assert body.cut(k) == ends[k - 1], (variant, k)
        text = body.text
        here = [m.end() for m in prompts._PIECE.finditer(text)]
        last = len(here)
        assert body.cut(last - 1) == here[-2] and body.text == text  # the last-but-one piece: no growth
        body.cut(last)
        assert len(body.text) > len(text)  # the last piece is no cut point: the text grew to find one after it
