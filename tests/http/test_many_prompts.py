"""Many users' prompts: exact by the server's count, few counts each, built side by side; bounds fail fast."""

from __future__ import annotations

import threading

import httpx
import pytest

from pytest_specperf.cases.closed_loop import MAX_CONCURRENCY
from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.errors import ConfigError
from pytest_specperf.prompts.exact_length import build_prompt, build_prompts
from pytest_specperf.sim import SimServer
from pytest_specperf.sim.tokenizer import tokenize

CTX = 300
VARIANTS = range(40, 88)  # 48 users


def sim_count(text: str) -> int:
    """The simulator's own count of a completions prompt: its tokenizer, plus the BOS it adds."""
    return len(tokenize(text, add_bos=True))


def test_many_prompts_are_exact_and_cost_fewer_counts_in_flight_together(healthy_sim: SimServer) -> None:
    lock = threading.Lock()
    state = {"calls": 0, "open": 0, "peak": 0}
    with Client(healthy_sim.url, timeout=30) as client:
        client.detect()

        def count(text: str) -> int:
            with lock:
                state["calls"] += 1
                state["open"] += 1
                state["peak"] = max(state["peak"], state["open"])
            try:
                return client.count_tokens(text)
            finally:
                with lock:
                    state["open"] -= 1

        prompts = build_prompts("prose", CTX, count, VARIANTS)
        # the server's own accounting of one of them, as a request reports it
        usage = httpx.post(healthy_sim.url + "/v1/completions", json={"prompt": prompts[-1].text, "max_tokens": 1},
                           timeout=30).json()["usage"]
    assert [p.variant for p in prompts] == list(VARIANTS)
    assert usage["prompt_tokens"] == prompts[-1].tokens
    assert all(sim_count(p.text) == p.tokens and abs(p.tokens - CTX) <= 3 for p in prompts)
    assert sum(p.tokens == CTX for p in prompts) >= 0.9 * len(prompts)
    assert len({p.text[:40] for p in prompts}) == len(prompts)  # every user its own text from the start
    # counts: fewer than building them one at a time (same variants, the same counter, locally)
    alone = [0]

    def counted(text: str) -> int:
        alone[0] += 1
        return sim_count(text)

    for v in VARIANTS:
        build_prompt("prose", CTX, counted, variant=v)
    assert state["calls"] <= 0.85 * alone[0], (state["calls"], alone[0])
    assert state["peak"] > 1  # the counts of different users were in flight together


def test_one_variant_is_build_prompt_itself() -> None:
    [p] = build_prompts("code", 120, sim_count, [5])
    assert p == build_prompt("code", 120, sim_count, variant=5)
    assert build_prompts("code", 120, sim_count, []) == []


@pytest.mark.parametrize(("kind", "kw"), [
    ("sustained", {"concurrency": 10**9}),
    ("sustained", {"concurrency": 20_000}),  # past the bound over all workers (10,000; issue 44 moved it from 512)
    ("load_sweep", {"concurrency": [1, 64, MAX_CONCURRENCY + 1]}),
])
def test_a_concurrency_past_the_bound_is_a_one_line_usage_error(kind: str, kw: dict) -> None:
    # raised while the spec is validated: no server, no prompt, nothing sent
    with pytest.raises(ConfigError) as err:
        build_spec(kind, kw)
    text = str(err.value)
    assert "\n" not in text and f"lower it to {MAX_CONCURRENCY} or less" in text
    assert build_spec(kind, {"concurrency": MAX_CONCURRENCY if kind == "sustained" else [1, MAX_CONCURRENCY]})
