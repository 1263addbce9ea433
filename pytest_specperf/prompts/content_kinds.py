"""The content kinds a prompt can be built from: one tuple for specs, prompts and the simulator.

Draft acceptance depends on the text a model continues, so every perf case names one of these.
"""

from __future__ import annotations

CONTENT_KINDS: tuple[str, ...] = ("prose", "code", "reasoning", "repetitive")
