"""The simulator's prefix cache: which leading prompt tokens a server already holds, with LRU eviction.

Modelled on vLLM's automatic prefix caching: token sequences are cut into blocks of
``prefix_cache_block`` tokens, each block keyed by a hash chained over every block before it, so
a block matches only where the whole prefix up to it matches. A request's cached tokens are its
leading run of known blocks, never the whole prompt (one token is always computed, as vLLM and
llama.cpp do, so there is a logit to sample from). ``capacity`` tokens' worth of blocks are kept;
the least recently used go first. Prompts are stored when admitted, prompt + output when done,
so a conversation's next turn finds the previous turn's prompt and answer. A ``salt`` (vLLM's
``cache_salt``) starts the hash chain, so requests share blocks only with requests of the same salt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    """Blocks of token ids by chained hash, least recently used first; ``capacity`` in tokens."""

    def __init__(self, capacity: int, block: int = 1) -> None:
        if capacity < 0 or block < 1:
            raise ValueError(f"prefix cache: capacity must be >= 0 and block >= 1, got {capacity}, {block}")
        self.block = block
        self.max_blocks = capacity // block
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def _keys(self, ids: Sequence[int], salt: str = "") -> list[int]:
        """The chained key of every whole block of ``ids`` (the chain starts from ``salt``)."""
        keys: list[int] = []
        prev = hash(salt) if salt else 0
        b = self.block
        for i in range(0, len(ids) - b + 1, b):
            prev = hash((prev, tuple(ids[i:i + b])))
            keys.append(prev)
        return keys

    def match(self, prompt: Sequence[int], salt: str = "") -> int:
        """Tokens of ``prompt`` the cache holds (whole blocks, at most ``len(prompt) - 1``); touches them."""
        if self.max_blocks == 0:
            return 0
        hit = 0
        for key in self._keys(prompt[:max(0, len(prompt) - 1)], salt):
            if key not in self._blocks:
                break
            self._blocks.move_to_end(key)
            hit += 1
        return hit * self.block

    def store(self, ids: Sequence[int], salt: str = "") -> None:
        """Keep the blocks of ``ids`` (most recently used), evicting the least recently used past capacity."""
        if self.max_blocks == 0:
            return
        for key in self._keys(ids, salt):
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self.max_blocks:
            self._blocks.popitem(last=False)

    def admit(self, prompt: Sequence[int], salt: str = "", *, reuse: bool = True) -> int:
        """A new request: its cached tokens (looked up before its own prompt is stored; 0 without ``reuse``)."""
        cached = self.match(prompt, salt) if reuse else 0
        self.store(prompt, salt)
        return cached

    @property
    def tokens(self) -> int:
        """Tokens held now."""
        return len(self._blocks) * self.block

    def clear(self) -> None:
        """Drop everything (``POST /sim/reset?cache=1``)."""
        self._blocks.clear()
