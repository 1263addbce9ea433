"""Prompt files: the prompts users really send, in the formats datasets come in, with their categories.

``load_prompts(source, ...)`` reads one file (or a shipped set named ``builtin:NAME``) into a
``PromptSet`` of frozen ``PromptRecord`` s. One JSON object a line (``.jsonl``), or one JSON
array of objects. Four formats, detected from each record's fields or named with ``fmt``:

- ``specbench`` (Spec-Bench / MT-bench ``question.jsonl``): ``turns`` (user messages), optional
  ``question_id`` and ``category``;
- ``sharegpt``: ``conversations`` of ``{"from": "human"|"gpt"|"system", "value": ...}``, optional
  ``id`` and ``category``;
- ``openai``: ``messages`` of ``{"role", "content"}``, optional ``id`` and ``category``;
- ``plain``: ``prompt`` or ``text``, optional ``id`` and ``category``; or a plain-text file (named
  ``*.txt``, or any file with ``prompts_format="plain"`` whose first line is not JSON), one prompt a
  line, each uncategorized with its line number as id.

What is sent before sessions exist (a request is one turn, and a later user turn only makes
sense after the model's own answer to the earlier ones): Spec-Bench and ShareGPT records send
their first user turn (a leading system message kept); the other turns stay in ``turns`` for
sessions. An OpenAI ``messages`` list is a conversation its author composed, history included,
so it is sent up to and including its last user message (a trailing assistant message is a
reference answer and is dropped). ``/v1/completions`` has no roles, so it gets the text of the
user message the request answers, without system or history.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_specperf.errors import ConfigError

FORMATS: tuple[str, ...] = ("specbench", "sharegpt", "openai", "plain")
BUILTIN_PREFIX = "builtin:"
UNCATEGORIZED = "uncategorized"  # the category of records that carry none

# The field that marks each format, in the order a record is tested
_MARKERS: tuple[tuple[str, str], ...] = (("turns", "specbench"), ("conversations", "sharegpt"),
                                         ("messages", "openai"), ("prompt", "plain"), ("text", "plain"))
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
          "bard": "assistant", "model": "assistant", "system": "system"}


@dataclass(frozen=True)
class Turn:
    """One message of a record's conversation."""

    role: str  # "system", "user" or "assistant"
    content: str


@dataclass(frozen=True)
class PromptRecord:
    """One prompt of a file: its whole conversation as written, and what a request sends of it."""

    id: str
    category: str
    turns: tuple[Turn, ...]  # everything the record holds, for sessions later
    send: int  # how many of ``turns`` one request sends (see the module docstring)
    where: str  # "FILE line N" (or "item N" in a JSON array), for messages
    cold: bool = False  # each request sends it under a fresh tag (``cold.fresh_record``; prefix_cache="cold")

    def messages(self) -> list[dict[str, str]]:
        """The chat messages one ``/v1/chat/completions`` request sends."""
        return [{"role": t.role, "content": t.content} for t in self.turns[: self.send]]

    @property
    def text(self) -> str:
        """The text one ``/v1/completions`` request sends: the user message the request answers."""
        return self.turns[self.send - 1].content

    @property
    def user_turns(self) -> tuple[str, ...]:
        """Every user message of the record, in order (Spec-Bench ``turns``)."""
        return tuple(t.content for t in self.turns if t.role == "user")


@dataclass(frozen=True)
class PromptSet:
    """The prompts a case runs over, after ``categories`` and ``sample``."""

    source: str  # as the user wrote it (a path or builtin:NAME)
    path: str  # the file read
    format: str
    records: tuple[PromptRecord, ...]

    def categories(self) -> tuple[str, ...]:
        """The categories present, in the order they first appear in the file."""
        return tuple(dict.fromkeys(r.category for r in self.records))

    def __len__(self) -> int:
        return len(self.records)


def builtin_sets() -> list[str]:
    """Names of the prompt sets shipped in ``pytest_specperf/data/prompts``."""
    folder = resources.files("pytest_specperf") / "data" / "prompts"
    return sorted(p.name[: -len(".jsonl")] for p in folder.iterdir() if p.name.endswith(".jsonl"))


def _close(word: str, choices: Sequence[str]) -> str:
    near = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _resolve(source: str | Path, base: Path | None) -> tuple[str, str]:
    """(display name, file text) of a path or ``builtin:NAME``."""
    text = str(source)
    if text.startswith(BUILTIN_PREFIX):
        name = text[len(BUILTIN_PREFIX):]
        names = builtin_sets()
        if name not in names:
            raise ConfigError(f"prompts={text!r}: no such shipped set; use one of "
                              f"{', '.join(BUILTIN_PREFIX + n for n in names)}{_close(name, names)}")
        member = resources.files("pytest_specperf") / "data" / "prompts" / f"{name}.jsonl"
        return text, member.read_text(encoding="utf-8")
    path = Path(text).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    try:
        return str(path), path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"prompts file {str(path)!r} does not exist; give a path relative to the case file "
                          f"or an absolute one, or {BUILTIN_PREFIX}NAME for a shipped set") from None
    except UnicodeDecodeError:
        raise ConfigError(f"prompts file {str(path)!r} is not UTF-8 text; save it as UTF-8 JSON lines") from None
    except OSError as exc:
        raise ConfigError(f"prompts file {str(path)!r}: cannot read it ({exc.strerror or exc})") from None


def _objects(name: str, text: str) -> list[tuple[str, Any]]:
    """(where, parsed object) of each record: JSON lines, or the items of one JSON array."""
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"prompts file {name!r} line {exc.lineno}: not valid JSON ({exc.msg}); "
                              "give one JSON array of objects or one JSON object a line") from None
        return [(f"{name!r} item {i}", obj) for i, obj in enumerate(items, 1)]
    out: list[tuple[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"{name!r} line {lineno}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"prompts file {name!r} line {lineno}: not valid JSON ({exc.msg}); "
                              "write one JSON object a line (JSON lines) or one JSON array") from None
    return out


def _plain_text(text: str) -> bool:
    """True for a file of one prompt a line rather than JSON: its first line is not a JSON object or array."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first.startswith(("{", "[")):
        return True
    try:
        json.loads(first)
    except json.JSONDecodeError:
        return not text.lstrip().startswith("[")  # a JSON array spans lines; its first line alone is not JSON
    return False


def _text_lines(name: str, text: str) -> list[PromptRecord]:
    """A plain-text file's records: each non-blank line one prompt, its id the line number, uncategorized."""
    records = [PromptRecord(id=str(n), category=UNCATEGORIZED, turns=(Turn("user", line.strip()),), send=1,
                            where=f"{name!r} line {n}")
               for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not records:
        raise ConfigError(f"prompts file {name!r} holds no prompts; write one prompt a line")
    return records


def detect_format(obj: Mapping[str, Any]) -> str | None:
    """The format a record's fields mark, or None when it has none of them."""
    found = [fmt for key, fmt in _MARKERS if key in obj]
    return found[0] if found else None


def _str(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"prompts file {where}: {key!r} must be a non-empty string, got {value!r}")
    return value


def _content(where: str, value: Any) -> str:
    """An OpenAI message content: a string, or a list of parts whose text parts are joined."""
    if isinstance(value, list):
        value = "".join(p.get("text", "") for p in value if isinstance(p, Mapping) and p.get("type") == "text")
    return _str(where, "content", value)


def _specbench(where: str, obj: Mapping[str, Any]) -> tuple[tuple[Turn, ...], int]:
    turns = obj["turns"]
    if not isinstance(turns, list) or not turns:
        raise ConfigError(f"prompts file {where}: 'turns' must be a non-empty list of user messages, got {turns!r}")
    return tuple(Turn("user", _str(where, "turns[]", t)) for t in turns), 1


def _sharegpt(where: str, obj: Mapping[str, Any]) -> tuple[tuple[Turn, ...], int]:
    conv = obj["conversations"]
    if not isinstance(conv, list) or not conv:
        raise ConfigError(f"prompts file {where}: 'conversations' must be a non-empty list of "
                          f"{{'from': 'human'|'gpt', 'value': ...}}, got {conv!r}")
    turns: list[Turn] = []
    for msg in conv:
        role = _ROLES.get(str(msg.get("from", "")).lower()) if isinstance(msg, Mapping) else None
        if role is None:
            raise ConfigError(f"prompts file {where}: each conversation entry needs 'from' (human, gpt or system) "
                              f"and 'value', got {msg!r}")
        turns.append(Turn(role, _str(where, "value", msg.get("value"))))
    first_user = next((i for i, t in enumerate(turns) if t.role == "user"), None)
    if first_user is None:
        raise ConfigError(f"prompts file {where}: the conversation has no 'human' turn to send; add one")
    # the first human turn, with the system message before it: later turns answer another model's replies
    kept = [t for t in turns[:first_user] if t.role == "system"] + turns[first_user:]
    return tuple(kept), len([t for t in turns[:first_user] if t.role == "system"]) + 1


def _openai(where: str, obj: Mapping[str, Any]) -> tuple[tuple[Turn, ...], int]:
    msgs = obj["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise ConfigError(f"prompts file {where}: 'messages' must be a non-empty list of "
                          f"{{'role', 'content'}}, got {msgs!r}")
    turns: list[Turn] = []
    for msg in msgs:
        role = msg.get("role") if isinstance(msg, Mapping) else None
        if role not in ("system", "developer", "user", "assistant"):
            raise ConfigError(f"prompts file {where}: each message needs 'role' (system, user or assistant) "
                              f"and 'content', got {msg!r}")
        turns.append(Turn("system" if role == "developer" else role, _content(where, msg.get("content"))))
    last_user = max((i for i, t in enumerate(turns) if t.role == "user"), default=None)
    if last_user is None:
        raise ConfigError(f"prompts file {where}: 'messages' has no user message to answer; add one")
    return tuple(turns), last_user + 1


def _plain(where: str, obj: Mapping[str, Any]) -> tuple[tuple[Turn, ...], int]:
    key = "prompt" if "prompt" in obj else "text"
    return (Turn("user", _str(where, key, obj[key])),), 1


_PARSERS = {"specbench": _specbench, "sharegpt": _sharegpt, "openai": _openai, "plain": _plain}
_ID_KEYS = {"specbench": "question_id", "sharegpt": "id", "openai": "id", "plain": "id"}


def _record(where: str, obj: Any, fmt: str, index: int) -> PromptRecord:
    turns, send = _PARSERS[fmt](where, obj)
    category = obj.get("category", UNCATEGORIZED)
    if category is None:
        category = UNCATEGORIZED
    if not isinstance(category, str) or not category.strip():
        raise ConfigError(f"prompts file {where}: 'category' must be a non-empty string, got {category!r}")
    raw_id = obj.get(_ID_KEYS[fmt])
    rid = str(raw_id) if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else str(index)
    return PromptRecord(id=rid, category=category.strip(), turns=turns, send=send, where=where)


def parse_records(name: str, text: str, fmt: str | None = None) -> tuple[str, list[PromptRecord]]:
    """(format, records) of a prompt file's text; ``name`` is used in messages."""
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"prompts_format={fmt!r}: use one of {', '.join(FORMATS)}{_close(str(fmt), FORMATS)}")
    if (fmt == "plain" and _plain_text(text)) or (fmt is None and name.endswith(".txt")):
        return "plain", _text_lines(name, text)
    try:
        objects = _objects(name, text)
    except ConfigError as exc:
        if fmt is None and not text.lstrip().startswith(("[", "{")):  # likely a prompt a line, as plain text
            raise ConfigError(f"{exc}; for a plain-text file, one prompt a line, give prompts_format='plain'") from None
        raise
    if not objects:
        raise ConfigError(f"prompts file {name!r} holds no prompts; add one JSON object a line")
    records: list[PromptRecord] = []
    first: tuple[str, str] | None = None  # (format, where) of the first record, for mixed files
    hint = "; name the format with prompts_format= or fix the record"
    for index, (where, obj) in enumerate(objects, 1):
        if not isinstance(obj, Mapping):
            raise ConfigError(f"prompts file {where}: expected a JSON object, got {type(obj).__name__}")
        seen = detect_format(obj)
        if fmt is not None and seen != fmt and not (fmt == "plain" and ("prompt" in obj or "text" in obj)):
            field = {"specbench": "turns", "sharegpt": "conversations", "openai": "messages",
                     "plain": "prompt or text"}[fmt]
            raise ConfigError(f"prompts file {where}: prompts_format={fmt!r} but the record has no {field!r}"
                              f" (keys: {', '.join(map(str, obj)) or 'none'}); fix the record or the format")
        this = fmt or seen
        if this is None:
            raise ConfigError(f"prompts file {where}: no prompt field; give 'turns' (Spec-Bench), 'conversations' "
                              f"(ShareGPT), 'messages' (OpenAI chat), or 'prompt'/'text' (plain)")
        if first is None:
            first = (this, where)
        elif this != first[0]:
            raise ConfigError(f"prompts file {where}: a {this} record in a {first[0]} file (first record at "
                              f"{first[1]}); keep one format a file{hint}")
        records.append(_record(where, obj, this, index))
    assert first is not None
    return first[0], records


def _sample_key(seed: int, position: int, record: PromptRecord) -> str:
    # a hash, not random.sample: the same seed picks the same prompts on every Python version
    return hashlib.sha256(f"{seed}\0{position}\0{record.id}".encode()).hexdigest()


def select(records: Sequence[PromptRecord], *, name: str, categories: Sequence[str] | None = None,
           sample: int | None = None, seed: int = 0) -> list[PromptRecord]:
    """Records of ``categories`` (all when None), then ``sample`` of them picked by ``seed``, in file order."""
    chosen = list(records)
    if categories is not None:
        if isinstance(categories, str) or not all(isinstance(c, str) for c in categories) or not categories:
            raise ConfigError(f"categories={categories!r}: give a non-empty list of category names")
        known = list(dict.fromkeys(r.category for r in records))
        for cat in categories:
            if cat not in known:
                raise ConfigError(f"categories: {cat!r} is not in prompts file {name!r}; its categories are "
                                  f"{', '.join(known)}{_close(cat, known)}")
        wanted = set(categories)
        chosen = [r for r in chosen if r.category in wanted]
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
            raise ConfigError(f"sample={sample!r}: give a whole number of prompts >= 1")
        if sample > len(chosen):
            raise ConfigError(f"sample={sample} but prompts file {name!r} has {len(chosen)} prompts"
                              f"{' in those categories' if categories else ''}; lower sample or drop it")
        keep = _stratified(chosen, sample, seed)
        chosen = [chosen[i] for i in sorted(keep)]
    return chosen


def _stratified(records: Sequence[PromptRecord], sample: int, seed: int) -> list[int]:
    """Indices of ``sample`` records, every category's share as in the file (largest remainder).

    With at least one pick per category to give, each category gets one first, so ``sample=5`` over five
    categories runs all five; fewer picks than categories go to the largest ones (ties: the seed's hash).
    Within a category the seed's hash picks, as for an unstratified draw.
    """
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.category, []).append(i)
    cats = list(groups)
    tie = {c: hashlib.sha256(f"{seed}\0{c}".encode()).hexdigest() for c in cats}
    quota = dict.fromkeys(cats, 0)
    if sample >= len(cats):
        quota = dict.fromkeys(cats, 1)
    else:
        for c in sorted(cats, key=lambda c: (-len(groups[c]), tie[c]))[:sample]:
            quota[c] = 1
    left = sample - sum(quota.values())
    spare = {c: len(groups[c]) - quota[c] for c in cats}
    total = sum(spare.values())
    if left > 0 and total > 0:
        share = {c: left * spare[c] / total for c in cats}
        for c in cats:
            quota[c] += int(share[c])
        rest = left - sum(int(share[c]) for c in cats)
        for c in sorted(cats, key=lambda c: (-(share[c] - int(share[c])), tie[c]))[:rest]:
            quota[c] += 1
    keep: list[int] = []
    for c in cats:
        ranked = sorted(groups[c], key=lambda i: _sample_key(seed, i, records[i]))
        keep.extend(ranked[:quota[c]])
    return keep


def load_prompts(source: str | Path, *, base: str | Path | None = None, fmt: str | None = None,
                 categories: Sequence[str] | None = None, sample: int | None = None, seed: int = 0) -> PromptSet:
    """Read a prompt file (relative to ``base``) or ``builtin:NAME``; filter by category, then sample."""
    if not str(source).strip():
        raise ConfigError("prompts='': give a prompt file path or builtin:NAME")
    name, text = _resolve(source, Path(base) if base is not None else None)
    found, records = parse_records(name, text, fmt)
    chosen = select(records, name=name, categories=categories, sample=sample, seed=seed)
    return PromptSet(source=str(source), path=name, format=found, records=tuple(chosen))
