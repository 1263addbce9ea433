"""A deterministic, reversible tokenizer with roughly 4 characters per token on English.

Text is first split GPT-2 style (a word with its leading space, up to 3 digits, a run of
punctuation, a run of whitespace), then each piece's UTF-8 bytes are cut into tokens of at
most ``MAX_TOKEN_BYTES`` bytes. A token's id encodes its bytes directly
(``int.from_bytes(b"\\x01" + piece)``), so no vocabulary file is needed, the same text gives
the same ids in every process, and ``detokenize(tokenize(t)) == t`` for any text.
Ids below 256 are special tokens (``SPECIAL_TOKENS``); no text token is below 256.

BOS: a prompt as the server counts it (``usage.prompt_tokens``) starts with one BOS token
(id 1), as most chat models' tokenizers add it. The chat template below renders the BOS as
``<s>`` text, so chat prompts are counted by tokenizing the rendered template with special
tokens parsed and no extra BOS.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MAX_TOKEN_BYTES = 5  # ids stay below 2**48, safe as JSON numbers everywhere

BOS_ID = 1
EOS_ID = 2
IM_START_ID = 3
IM_END_ID = 4
SPECIAL_TOKENS: dict[str, int] = {"<s>": BOS_ID, "</s>": EOS_ID, "<|im_start|>": IM_START_ID,
                                  "<|im_end|>": IM_END_ID}
_SPECIAL_TEXT = {v: k for k, v in SPECIAL_TOKENS.items()}
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_TOKENS) + ")")
_PRETOKEN_RE = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]+|\s+(?!\S)|\s+")


class TokenError(ValueError):
    """A token id that this tokenizer never produces."""


@functools.lru_cache(maxsize=512)
def _encode_plain(text: str) -> tuple[int, ...]:
    ids: list[int] = []
    for match in _PRETOKEN_RE.finditer(text):
        raw = match.group().encode("utf-8")
        for i in range(0, len(raw), MAX_TOKEN_BYTES):
            ids.append(int.from_bytes(b"\x01" + raw[i:i + MAX_TOKEN_BYTES], "big"))
    return tuple(ids)


def tokenize(text: str, *, add_bos: bool = False, parse_special: bool = True) -> list[int]:
    """Token ids of ``text``; with ``parse_special`` the strings in SPECIAL_TOKENS become their ids."""
    ids = [BOS_ID] if add_bos else []
    if not parse_special:
        ids.extend(_encode_plain(text))
        return ids
    for part in _SPECIAL_RE.split(text):
        if part in SPECIAL_TOKENS:
            ids.append(SPECIAL_TOKENS[part])
        elif part:
            ids.extend(_encode_plain(part))
    return ids


def token_bytes(token_id: int) -> bytes:
    """The bytes a token stands for (special tokens give their text form)."""
    if isinstance(token_id, bool) or not isinstance(token_id, int):
        raise TokenError(f"token ids must be integers, got {token_id!r}")
    if token_id in _SPECIAL_TEXT:
        return _SPECIAL_TEXT[token_id].encode()
    if token_id < 256:
        raise TokenError(f"unknown token id {token_id}")
    raw = token_id.to_bytes((token_id.bit_length() + 7) // 8, "big")
    if raw[0] != 1 or len(raw) > MAX_TOKEN_BYTES + 1:
        raise TokenError(f"unknown token id {token_id}")
    return raw[1:]


def detokenize(ids: Iterable[int], *, skip_special: bool = False) -> str:
    """Text of a token sequence; the exact inverse of ``tokenize``."""
    out = bytearray()
    for token_id in ids:
        if skip_special and token_id in _SPECIAL_TEXT:
            continue
        out += token_bytes(token_id)
    return out.decode("utf-8", errors="replace")


def token_piece(token_id: int) -> str:
    """One token's text (a token that splits a multi-byte character shows replacement marks)."""
    return token_bytes(token_id).decode("utf-8", errors="replace")


def _content_text(content: Any) -> str:
    """Message content as text: a string, or OpenAI content parts of type text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError("message content parts must be objects like {\"type\": \"text\", \"text\": \"...\"}")
            parts.append(part["text"])
        return "".join(parts)
    raise ValueError(f"message content must be a string or a list of text parts, got {type(content).__name__}")


def check_messages(messages: Any) -> list[tuple[str, str]]:
    """Validate OpenAI chat messages into (role, text) pairs; ValueError with a one-line reason."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise ValueError(f"messages[{i}] must be an object")
        role = msg.get("role")
        if role not in ("system", "user", "assistant", "tool", "developer"):
            raise ValueError(f"messages[{i}].role must be system, user, assistant, tool or developer, got {role!r}")
        out.append((role, _content_text(msg.get("content"))))
    return out


def render_chat(messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool = True) -> str:
    """ChatML-style template text, starting with the BOS as ``<s>``."""
    text = "<s>" + "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages)
    if add_generation_prompt:
        text += "<|im_start|>assistant\n"
    return text


def chat_prompt_ids(messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool = True) -> list[int]:
    """Prompt ids of a chat request, as counted in ``usage.prompt_tokens``."""
    return tokenize(render_chat(messages, add_generation_prompt=add_generation_prompt), parse_special=True)


def completion_prompt_ids(prompt: str) -> list[int]:
    """Prompt ids of a completions request: BOS + the text, as counted in ``usage.prompt_tokens``."""
    return tokenize(prompt, add_bos=True, parse_special=True)
