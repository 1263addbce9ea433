"""Cold prompts: each request's prefill is one no prefix cache holds, with the prompt's length unchanged.

Where the server can keep a request out of its cache with the prompt unchanged, the client does so
(``Client.body``: vLLM's ``cache_salt``, llama.cpp's ``cache_prompt: false``), which keeps the prompt
text, and so the generated text, the same in every run (trials of a saved run and of a later one
pair). Elsewhere each request opens with a tag no earlier request sent, built here.

Servers with automatic prefix caching (vLLM by default, SGLang's radix cache, llama-server's slot
cache) skip the prefill of any leading tokens they have seen. A perf case's prompts are the same
text in every trial, repeat, A/B arm and later run, so without a tag the second send of a prompt
is a cached prefill and its TTFT measures the cache. The tag is one short line of digits at the
very start of the text: a different tag differs from the first tokens on, so a block cache (vLLM,
blocks of 16) holds none of the prompt and a token cache (llama.cpp) at most the tokens before the
digits that differ. A built prompt keeps its exact server-counted length: its tag is counted in
``ctx`` (``builder.build_prompt(head=...)``), and a new tag of the same shape is checked by one
count (rebuilt around the new tag on the rare tokenizer that counts it otherwise).
"""

from __future__ import annotations

import dataclasses
import secrets

from pytest_specperf.prompts.files import PromptRecord, Turn

#: Digits of a tag: 10**12 tags, drawn at random per request, so two runs (or xdist workers) never share one.
TAG_DIGITS = 12
#: The tag of a prompt built once and reused (``prefix_cache="warm"``, and the shape every tag is counted in).
FIXED_TAG = "0" * TAG_DIGITS


def cold_salt() -> str:
    """A prefix-cache salt no earlier request sent (vLLM ``cache_salt``; see ``Client.body``)."""
    return secrets.token_hex(8)


def head(tag: str) -> str:
    """The line a cold prompt opens with."""
    return f"{tag}\n\n"


def new_tag() -> str:
    """A tag no earlier request sent (random: unique across runs and processes without coordination)."""
    return f"{secrets.randbelow(10 ** TAG_DIGITS):0{TAG_DIGITS}d}"


def retag(text: str, old_head: str, new_head: str) -> str:
    """``text`` (which opens with ``old_head``) opening with ``new_head`` instead."""
    if not text.startswith(old_head):
        raise ValueError("retag: the text does not open with its head")
    return new_head + text[len(old_head):]


def tag_record(record: PromptRecord, tag: str) -> PromptRecord:
    """A prompt file's record whose sent text opens with ``tag`` (the file's text follows unchanged).

    Chat sends ``turns[:send]`` (tagged in its first message); completions sends the last of them.
    A file's prompt is not built to a length, so it grows by the tag's few tokens.
    """
    turns = list(record.turns)
    for i in dict.fromkeys((0, record.send - 1)):
        turns[i] = Turn(turns[i].role, head(tag) + turns[i].content)
    return dataclasses.replace(record, turns=tuple(turns), cold=False)


def fresh_record(record: PromptRecord) -> PromptRecord:
    """What one request sends of ``record``: under a new tag where it is marked ``cold``, else as written."""
    return tag_record(record, new_tag()) if record.cold else record
