"""Production traces read into rows a replay case sends: when, how long a prompt, how long an answer, which blocks.

Formats (``format=``; None reads it from the file's own column names, never from its values):

- ``mooncake``: JSONL with ``timestamp`` (integer milliseconds from the trace's start), ``input_length``,
  ``output_length`` and ``hash_ids`` (one id per ``BLOCK_TOKENS``-token block of the prompt).
- ``azure``: the Azure LLM inference CSVs, ``TIMESTAMP`` (wall time: 2023's ``2023-11-16 18:15:46.6805900``, 2024's
  with ``+00:00``), ``ContextTokens``, ``GeneratedTokens``.
- ``burstgpt``: BurstGPT's CSV, ``Timestamp`` (seconds), ``Request tokens``, ``Response tokens``; a failed request
  (0 response tokens) is skipped and counted.
- ``csv`` / ``jsonl``: named columns, ``timestamp``, ``input_length``, ``output_length`` and optionally ``hash_ids``
  by default, or the names ``columns=`` maps them to; numeric timestamps need ``timestamp_unit``.

Timestamp units are read (a format states its own) or given (``timestamp_unit``), never guessed: a file whose
span at that unit is implausible for a serving trace is a one-line error naming the unit that would fit.
Every other mistake is a one-line ``ConfigError`` naming the file, the row and the fix.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_specperf import stopping
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts import exact_length

#: Tokens per ``hash_ids`` block (Mooncake's traces).
BLOCK_TOKENS = 512
FORMATS = ("mooncake", "azure", "burstgpt", "csv", "jsonl")
#: Timestamp units a numeric column may be given in, and how many of each make a second.
UNITS: dict[str, float] = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
#: A serving trace's mean rate lies in this range (requests per second); outside it the unit is wrong.
PLAUSIBLE_RPS = (0.01, 2000.0)
#: Rows needed before the span is judged (a handful of rows says little about a unit).
PLAUSIBLE_MIN_ROWS = 10
BUILTIN_PREFIX = "builtin:"
#: Traces shipped in ``pytest_specperf/data/traces/``.
BUILTIN_TRACES = {"mooncake-conversation": "mooncake_conversation_head400.jsonl",
                  "azure-conv-2023": "azure_llm_conv_2023_head300.csv"}
#: Input-length buckets a replay reports TTFT and decode in (upper bounds in tokens; the last is open).
BUCKETS: tuple[tuple[str, float], ...] = (("<1k", 1024), ("1-4k", 4096), ("4-16k", 16384), (">16k", math.inf))
#: Default column names of each format: role -> column.
_COLUMNS: dict[str, dict[str, str]] = {
    "mooncake": {"timestamp": "timestamp", "input_length": "input_length", "output_length": "output_length",
                 "hash_ids": "hash_ids"},
    "azure": {"timestamp": "TIMESTAMP", "input_length": "ContextTokens", "output_length": "GeneratedTokens"},
    "burstgpt": {"timestamp": "Timestamp", "input_length": "Request tokens", "output_length": "Response tokens"},
    "csv": {"timestamp": "timestamp", "input_length": "input_length", "output_length": "output_length",
            "hash_ids": "hash_ids"},
}
_COLUMNS["jsonl"] = _COLUMNS["csv"]
#: The unit each format states for its timestamps (None: the file must say, through ``timestamp_unit``).
_FORMAT_UNITS = {"mooncake": "ms", "azure": "datetime", "burstgpt": "s", "csv": None, "jsonl": None}
ROLES = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace: its row in the file (1-based, data rows), its time and lengths."""

    row: int
    at_s: float  # seconds after the trace's first row
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] | None = None  # one per BLOCK_TOKENS block, the last one partial


@dataclass(frozen=True)
class Trace:
    """A trace file's rows in time order, with what was read and what was skipped."""

    path: str
    format: str
    unit: str
    rows: tuple[TraceRow, ...]
    skipped: int = 0  # failed requests (BurstGPT: 0 response tokens), not replayed

    @property
    def span_s(self) -> float:
        """First to last row, in the trace's seconds."""
        return self.rows[-1].at_s - self.rows[0].at_s if self.rows else 0.0

    def window(self, start_s: float = 0.0, duration_s: float | None = None) -> list[TraceRow]:
        """Rows with ``start_s <= at_s < start_s + duration_s`` (to the end without a duration)."""
        end = math.inf if duration_s is None else start_s + duration_s
        return [r for r in self.rows if start_s <= r.at_s < end]


def resolve(source: str | Path, base: str | Path | None = None) -> str:
    """A trace's path as a spec keeps it: ``builtin:NAME`` as written, a relative path joined to ``base``."""
    text = str(source)
    if text.startswith(BUILTIN_PREFIX):
        return text
    path = Path(text).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return str(path)


def _open_text(source: str) -> tuple[str, str]:
    """(the file's name for messages, its text)."""
    if source.startswith(BUILTIN_PREFIX):
        name = source[len(BUILTIN_PREFIX):]
        if name not in BUILTIN_TRACES:
            raise ConfigError(f"unknown builtin trace {source!r}; use one of "
                              f"{', '.join(BUILTIN_PREFIX + n for n in BUILTIN_TRACES)}, or a file path")
        res = resources.files("pytest_specperf").joinpath("data", "traces", BUILTIN_TRACES[name])
        return source, res.read_text(encoding="utf-8")
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"trace {source}: no such file; give the trace's path (relative to the case file) or "
                          f"one of {', '.join(BUILTIN_PREFIX + n for n in BUILTIN_TRACES)}")
    return source, path.read_text(encoding="utf-8")


def load_trace(source: str, *, format: str | None = None, timestamp_unit: str | None = None,
               columns: Mapping[str, str] | None = None) -> Trace:
    """Read a trace file (or ``builtin:NAME``) into time-ordered rows; see the module docstring."""
    return _load(source, format, timestamp_unit, tuple(sorted((columns or {}).items())))


@lru_cache(maxsize=8)
def _load(source: str, fmt: str | None, unit: str | None, columns: tuple[tuple[str, str], ...]) -> Trace:
    name, text = _open_text(source)
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"trace {name}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if unit is not None and unit not in (*UNITS, "datetime"):
        raise ConfigError(f"trace {name}: unknown timestamp_unit {unit!r}; use one of {', '.join(UNITS)} or "
                          "'datetime' (wall times such as 2023-11-16 18:15:46.68)")
    for role in dict(columns):
        if role not in ROLES:
            raise ConfigError(f"trace {name}: columns= names unknown role {role!r}; roles: {', '.join(ROLES)}")
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    if not first:
        raise ConfigError(f"trace {name}: the file is empty; give a trace with a header or JSON rows")
    is_json = first.lstrip().startswith("{")
    if is_json:
        records: Iterable[tuple[int, Mapping[str, Any]]] = _json_rows(name, lines)
        header = list(_first_json(name, lines))
    else:
        reader = csv.DictReader(lines)
        header = [h.strip() for h in (reader.fieldnames or [])]
        records = ((i + 2, {k.strip(): v for k, v in rec.items() if k is not None}) for i, rec in enumerate(reader))
    fmt = fmt or _detect(header, is_json, dict(columns))
    if is_json != (fmt in ("mooncake", "jsonl")):
        raise ConfigError(f"trace {name}: format={fmt!r} but the file is {'JSON lines' if is_json else 'CSV'}; "
                          f"give format={'jsonl' if is_json else 'csv'} (or mooncake/azure/burstgpt as it is)")
    cols = {**_COLUMNS[fmt], **dict(columns)}
    for role in ("timestamp", "input_length", "output_length"):
        if cols[role] not in header:
            raise ConfigError(f"trace {name}: no column {cols[role]!r} ({role}) in the header ({', '.join(header)}); "
                              f"name it with columns={{'{role}': 'COLUMN'}} or give the right format=")
    unit = unit or _FORMAT_UNITS[fmt]
    if unit is None:
        raise ConfigError(f"trace {name}: format {fmt!r} does not say its timestamps' unit; give timestamp_unit= "
                          f"one of {', '.join(UNITS)} or 'datetime'")
    has_hash = cols.get("hash_ids") in header
    rows, skipped = _rows(name, records, cols, unit, has_hash, fmt)
    if not rows:
        raise ConfigError(f"trace {name}: no rows to replay ({skipped} failed rows skipped); give a trace with "
                          "answered requests")
    _check_span(name, rows, unit)
    return Trace(path=source, format=fmt, unit=unit, rows=tuple(rows), skipped=skipped)


def _first_json(name: str, lines: list[str]) -> dict[str, Any]:
    for _, rec in _json_rows(name, lines):
        return dict(rec)
    return {}


def _json_rows(name: str, lines: list[str]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"trace {name}: row {i} is not JSON ({exc.msg}); give one JSON object per line") from None
        if not isinstance(rec, dict):
            raise ConfigError(f"trace {name}: row {i} is not a JSON object; give one object per line")
        yield i, rec


def _detect(header: list[str], is_json: bool, columns: Mapping[str, str]) -> str:
    """The format whose column names the header holds (a plain file's when ``columns=`` names its own)."""
    names = set(header)
    if columns:
        return "jsonl" if is_json else "csv"
    if is_json:
        return "mooncake" if {"timestamp", "input_length", "output_length"} <= names else "jsonl"
    for fmt in ("azure", "burstgpt"):
        if {_COLUMNS[fmt][r] for r in ("timestamp", "input_length", "output_length")} <= names:
            return fmt
    return "csv"


def _rows(name: str, records: Iterable[tuple[int, Mapping[str, Any]]], cols: Mapping[str, str], unit: str,
          has_hash: bool, fmt: str) -> tuple[list[TraceRow], int]:
    rows: list[TraceRow] = []
    skipped = 0
    t0: float | None = None
    prev: float | None = None
    for line, rec in records:
        where = f"trace {name}: row {line}"
        ts = _timestamp(where, rec.get(cols["timestamp"]), unit, cols["timestamp"])
        n_in = _length(where, rec.get(cols["input_length"]), cols["input_length"])
        n_out = _length(where, rec.get(cols["output_length"]), cols["output_length"])
        if prev is not None and ts < prev:
            raise ConfigError(f"{where}: timestamp {rec.get(cols['timestamp'])} is earlier than the row before; "
                              "sort the trace by its timestamp")
        prev = ts
        t0 = ts if t0 is None else t0
        if fmt == "burstgpt" and n_out == 0:
            skipped += 1  # a failed request: nothing was generated, so there is nothing to replay
            continue
        if n_in < 1 or n_out < 1:
            role = "input_length" if n_in < 1 else "output_length"
            raise ConfigError(f"{where}: {cols[role]} is 0; a request needs at least 1 prompt and 1 output token "
                              "(drop the row)")
        hashes = _hash_ids(where, rec.get(cols["hash_ids"]), n_in) if has_hash else None
        rows.append(TraceRow(row=line, at_s=ts - t0, input_length=n_in, output_length=n_out, hash_ids=hashes))
    return rows, skipped


def _timestamp(where: str, value: Any, unit: str, col: str) -> float:
    if unit == "datetime":
        try:
            stamp = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise ConfigError(f"{where}: {col} {value!r} is not a wall time such as 2023-11-16 18:15:46.68; give "
                              "timestamp_unit='s' or 'ms' if it is a number") from None
        return stamp.timestamp()
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {col} {value!r} is not a number of {unit}; give timestamp_unit='datetime' for "
                          "wall times, or fix the row") from None
    if not math.isfinite(number):
        raise ConfigError(f"{where}: {col} {value!r} is not a finite number; fix the row")
    return number / UNITS[unit]


def _length(where: str, value: Any, col: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {col} {value!r} is not a number of tokens; fix the row or name the column "
                          "with columns=") from None
    if not math.isfinite(number) or number != int(number) or number < 0:
        raise ConfigError(f"{where}: {col} {value!r} must be a whole, non-negative number of tokens; fix the row")
    return int(number)


def _hash_ids(where: str, value: Any, n_in: int) -> tuple[int, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise ConfigError(f"{where}: hash_ids must be a list of integers, got {value!r}; fix the row")
    need = math.ceil(n_in / BLOCK_TOKENS)
    if len(value) < need:
        raise ConfigError(f"{where}: {len(value)} hash_ids cover {len(value) * BLOCK_TOKENS} tokens, fewer than "
                          f"input_length {n_in} ({need} blocks of {BLOCK_TOKENS}); fix the row or drop hash_ids")
    return tuple(value[:need])


def _check_span(name: str, rows: list[TraceRow], unit: str) -> None:
    """A span implausible for a serving trace at ``unit`` is an error naming the unit that would fit."""
    if len(rows) < PLAUSIBLE_MIN_ROWS or unit == "datetime":
        return
    span = rows[-1].at_s - rows[0].at_s
    rate = (len(rows) - 1) / span if span > 0 else math.inf
    lo, hi = PLAUSIBLE_RPS
    if lo <= rate <= hi:
        return
    raw_span = span * UNITS[unit]  # the span in the file's own numbers

    def fit(u: str) -> float:
        r = (len(rows) - 1) / (raw_span / UNITS[u]) if raw_span > 0 else math.inf
        return abs(math.log(r / math.sqrt(lo * hi))) if lo <= r <= hi else math.inf

    best = min(UNITS, key=fit)
    hint = (f"if its timestamps are {_UNIT_WORDS[best]}, give timestamp_unit='{best}'" if fit(best) < math.inf
            else "check the timestamp column")
    raise ConfigError(f"trace {name}: {len(rows)} rows span {_duration(span)} read as {_UNIT_WORDS[unit]} "
                      f"({rate:.3g} req/s, outside {lo:g}-{hi:g}): implausible for a serving trace; {hint}")


_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def _duration(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.3g} h"
    if s >= 60:
        return f"{s / 60:.3g} min"
    return f"{s:.3g} s"


def bucket_of(prompt_tokens: int) -> str:
    """The input-length bucket (``BUCKETS``) a prompt of ``prompt_tokens`` falls in."""
    return next(name for name, top in BUCKETS if prompt_tokens < top)


def reusable_tokens(rows: Iterable[TraceRow]) -> list[int]:
    """Per row (in order), the prompt tokens a prefix cache holding every earlier row's blocks could serve.

    A row's leading run of blocks that earlier rows of the window sent, in tokens, at most its prompt less one
    token (a server always computes one); 0 for rows without ``hash_ids``.
    """
    seen: set[int] = set()
    out = []
    for r in rows:
        run = 0
        for h in r.hash_ids or ():
            if h not in seen:
                break
            run += 1
        out.append(min(run * BLOCK_TOKENS, r.input_length - 1) if r.hash_ids else 0)
        seen.update(r.hash_ids or ())
    return out


def reusable_share(rows: list[TraceRow]) -> float | None:
    """The trace's own reusable share: blocks seen before (in a leading run) over all blocks; None without hashes."""
    if not rows or any(r.hash_ids is None for r in rows):
        return None
    seen: set[int] = set()
    reused = total = 0
    for r in rows:
        hashes = r.hash_ids or ()
        run = 0
        for h in hashes:
            if h not in seen:
                break
            run += 1
        reused += run
        total += len(hashes)
        seen.update(hashes)
    return reused / total if total else 0.0


# -- prompts ------------------------------------------------------------------------------------------


#: Sample blocks one count measures the corpus's tokens per piece over (one server count before the prompts).
_CALIBRATION_BLOCKS = 16
#: A block's text ends with this, so the next block's first word does not merge into its last.
_BLOCK_END = "\n"


class _Blocks:
    """Each ``hash_ids`` id's text, about ``BLOCK_TOKENS`` server tokens: equal ids give equal text."""

    def __init__(self, kind: str, pieces: int, salt: int) -> None:
        self.kind, self.pieces, self.salt = kind, pieces, salt
        self._text: dict[int, str] = {}

    def body(self, h: int) -> exact_length._Body:
        """The corpus text block ``h`` is cut from (its own start point in the corpus)."""
        corpus = exact_length._corpus(self.kind)
        return exact_length._Body(corpus, (self.salt + h) % (1 << 30), int(self.pieces * 8) + 256)

    def text(self, h: int) -> str:
        """Block ``h``'s whole text (cached: a block shared by many rows is cut once)."""
        out = self._text.get(h)
        if out is None:
            body = self.body(h)
            out = self._text[h] = body.text[:body.cut(self.pieces)] + _BLOCK_END
        return out


def build_trace_prompts(rows: list[TraceRow], count_tokens: Callable[[str], int], *, kind: str = "prose",
                        head: str = "", salt: int = 0, workers: int = exact_length.COUNT_WORKERS) -> list[str]:
    """Each row's prompt, of exactly its ``input_length`` tokens as ``count_tokens`` (the server) counts them.

    Rows with ``hash_ids`` share text as their blocks do: a row's prompt is ``head``, then the texts of its
    blocks but the last (each about ``BLOCK_TOKENS`` tokens, the same text wherever the id recurs), then the
    last block's text cut where the whole prompt counts ``input_length`` (``exact_length``'s search, with
    everything before the cut as its head). So two rows whose leading ids agree share that prefix text. Rows
    without ``hash_ids`` get a prompt of their own (``build_prompt``, variant ``salt`` + row). Three counts
    of sample blocks size a block first; each prompt then takes two counts of its whole text (its prefix, then
    the whole to confirm) and a few of its last block alone, ``workers`` in flight.
    ``salt`` picks the corpus start points, so a case's blocks differ from another case's.
    """
    if not rows:
        return []
    pieces, overhead = _calibrate(kind, count_tokens, salt)
    blocks = _Blocks(kind, pieces, salt)
    ratio = BLOCK_TOKENS / pieces
    stop = threading.Event()  # Ctrl-C or another row's error: each running row ends at its next count
    count_tokens = stopping.unless_stopped(count_tokens, stop)

    def one(r: TraceRow) -> str:
        if not r.hash_ids:
            # build_prompt settles for 1% after a few counts; a replay checks each length, so another start
            # point is tried where a tokenizer's flat spot kept the first from landing exactly.
            best = None
            for shift in (0, 1 << 20, 1 << 21):
                p = exact_length.build_prompt(kind, r.input_length, count_tokens, variant=salt + r.row + shift,
                                              instruction="", tokens_per_piece=ratio, head=head)
                if p.tokens == r.input_length:
                    return p.text
                best = best if best is not None and abs(best.tokens - r.input_length) <= abs(
                    p.tokens - r.input_length) else p
            assert best is not None
            return best.text
        return _hashed(r, blocks, count_tokens, head, ratio, overhead)

    for r in rows:  # blocks are cut once, before the threads (their cache is a plain dict)
        for h in r.hash_ids or ():
            blocks.text(h)
    return stopping.thread_map(one, rows, min(workers, len(rows)), stop=stop)


def _calibrate(kind: str, count_tokens: Callable[[str], int], salt: int) -> tuple[int, int]:
    """(pieces of corpus text per ``BLOCK_TOKENS`` server tokens, tokens any text costs on top: a BOS, a
    template), from three counts of sample blocks."""
    guess = round(BLOCK_TOKENS / 1.1)
    sample = _Blocks(kind, guess, salt + (1 << 29))
    half = _CALIBRATION_BLOCKS // 2
    a = "".join(sample.text(i) for i in range(half))
    b = "".join(sample.text(i) for i in range(half, _CALIBRATION_BLOCKS))
    n_a, n_b, n_ab = count_tokens(a), count_tokens(b), count_tokens(a + b)
    overhead = max(0, n_a + n_b - n_ab)
    pieces = max(1, round(guess * BLOCK_TOKENS * _CALIBRATION_BLOCKS / max(1, n_ab - overhead)))
    return pieces, overhead


#: Tries of the split search (the last block sized alone, the whole prompt counted once) before the whole search.
_SPLIT_TRIES = 3


def _hashed(r: TraceRow, blocks: _Blocks, count_tokens: Callable[[str], int], head: str, ratio: float,
            overhead: int) -> str:
    """A hashed row's prompt: its shared leading blocks, then its last block cut to the exact length.

    The prefix is counted once and the last block is sized alone (small texts, cheap counts), taking the
    prefix's count off the target; one count of the whole prompt confirms it, or moves the target by what
    the join cost (a tokenizer merging across it) and tries again. Where the shared blocks alone count
    ``input_length`` or more (a last block of a few tokens after blocks that came out long), fewer blocks are
    kept whole and the cut moves into an earlier block, sized the same way (one more prefix count; searching
    the whole prompt instead took up to a dozen counts of it, a tenth of a replay's rows and a third of the text
    counted). Where that does not land, the whole prompt is searched (``exact_length``'s search, everything
    before the cut as its head)."""
    hashes = r.hash_ids or ()
    n = r.input_length
    for keep in range(len(hashes) - 1, -1, -1):
        prefix = head + "".join(blocks.text(h) for h in hashes[:keep])  # the blocks kept whole
        p_tokens = count_tokens(prefix) if prefix else overhead
        target = n - p_tokens + overhead
        if target <= overhead:
            continue  # the kept blocks reach the length by themselves: cut into the one before
        # The block's own text first; where no cut of it lands exactly (a tokenizer's flat spot) and it is the
        # row's last block, text from another start point: the prompt's last, partial block, so no shared
        # prefix changes.
        for shift in (0, 1 << 20, 1 << 21) if keep == len(hashes) - 1 else (0,):
            body = blocks.body(hashes[keep] + shift)
            for _ in range(_SPLIT_TRIES):
                if target <= overhead:
                    break
                counter = exact_length._Counter(body, target, count_tokens, exact_length.MAX_CALLS)
                with contextlib.suppress(exact_length._OutOfCalls):
                    exact_length._search(body, target, counter.count, overhead=overhead, first_ratio=ratio)
                if counter.best is None or counter.best[0] != target:
                    break
                text = prefix + counter.best[1]
                got = count_tokens(text)
                if got == n:
                    return text
                target += n - got
        break
    return _whole(r, blocks, count_tokens, head, ratio)


def _whole(r: TraceRow, blocks: _Blocks, count_tokens: Callable[[str], int], head: str, ratio: float) -> str:
    """``_hashed``'s fallback: the whole prompt counted at each step of the search."""
    hashes = r.hash_ids or ()
    best: tuple[int, str] | None = None
    for keep in range(len(hashes) - 1, -1, -1):
        prefix = head + "".join(blocks.text(h) for h in hashes[:keep])
        body = blocks.body(hashes[keep])
        counter = exact_length._Counter(body, r.input_length, count_tokens, exact_length.MAX_CALLS, prefix)
        with contextlib.suppress(exact_length._OutOfCalls):
            exact_length._search(body, r.input_length, counter.count, overhead=keep * BLOCK_TOKENS + 1,
                                 first_ratio=ratio)
        best = counter.best
        if best is not None and best[0] == r.input_length:
            return best[1]
        if best is not None and best[0] < r.input_length:
            break  # the prefix fits and the search ran out: keep the closest text
    if best is None:
        raise ValueError(f"trace row {r.row}: no prompt of {r.input_length} tokens could be built")
    return best[1]
