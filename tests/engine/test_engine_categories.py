"""Per-category acceptance on a real engine: n-gram speculation pays on a repetitive category, not on reasoning."""

from __future__ import annotations

import json
from pathlib import Path

from support.engine_threads import THREADS

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.run.runner import Runner

# Sampling at 0.7, as in test_engine_content: greedy SmolLM2-135M loops on any text, and an n-gram drafter
# accepts a loop whole, which would make reasoning look repetitive too.
TEMPERATURE = 0.7
_BOARD = "\n".join(f"Platform {p}: train {800 + 7 * p} to Northgate, on time, coach {p % 4 + 1} quiet"
                   for p in range(1, 13))
PROMPTS = [
    *({"category": "repetitive", "prompt": f"Departure board, shift {i}. Repeat the board line by line, "
                                           f"unchanged, then once more:\n{_BOARD}\n{_BOARD}\nPlatform 1:"}
      for i in range(3)),
    *({"category": "math_reasoning", "prompt": q} for q in (
        "Solve step by step: a tank fills in 6 hours and drains in 9. Both open, how long to fill it?",
        "Solve step by step: what is the smallest number that leaves remainder 1 when divided by 2, 3 and 5?",
        "Solve step by step: a price rises 20% and then falls 20%. What is the net change, and why?")),
]


def test_ngram_accepts_more_on_a_repetitive_category_than_on_reasoning(llama_engine, tmp_path: Path) -> None:
    path = tmp_path / "cats.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    binary, model = llama_engine
    spec = build_spec("sustained", {"prompts": str(path), "tokens": 128, "temperature": TEMPERATURE})
    with LlamaServer(model, preset="ngram", binary=binary, ctx_size=1024, threads=THREADS) as server, \
            Client(server.url, timeout=120) as client:
        client.detect()
        r = Runner(client).run(spec, "engine-categories")
    cats = r.categories
    assert cats is not None and set(cats) == {"repetitive", "math_reasoning"}
    # the server's own per-response counts (llama.cpp timings), per category: share of output that was drafts
    share = {c: (f.accepted or 0) / f.completion_tokens for c, f in cats.items()}
    detail = f"accepted share {share}, figures {cats}"
    assert all(f.n == 3 and f.accept_source == "response" for f in cats.values()), detail
    assert share["repetitive"] > share["math_reasoning"] + 0.2, detail
