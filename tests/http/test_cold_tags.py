"""Cold prompts on a server that takes no cache salt (SGLang's dialect: the prompt itself opens with a fresh tag),
judged on the server's own record of the tokens its token-by-token prefix cache served.

A prompt file's record with a long system message is where a tag matters most: a tag on its last message only
leaves the template and the system message a cached prefix; and a request whose cached tokens are exactly those a
tag alone can share is as cold as a request can be on such a server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_specperf.cases.registry import build_spec
from pytest_specperf.endpoint.client import Client
from pytest_specperf.prompts import cold
from pytest_specperf.run import cached_share
from pytest_specperf.run.runner import Runner
from pytest_specperf.sim import SimServer

# SGLang with --enable-cache-report: a token-by-token cache, and no salt the client could send
TAGGED = {"cache_report": True, "jitter": 0.0, "dialect": "sglang"}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("healthy", speed=10, in_process=True, overrides=TAGGED) as s:
        yield s


@pytest.fixture(scope="module")
def long_system(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One OpenAI-format record: a long system message (most of the prompt) and a short question."""
    rule = "answer in plain words, cite the section, and keep each line short."
    system = " ".join(f"Rule {i}: {rule}" for i in range(60))
    path = tmp_path_factory.mktemp("prompts") / "system.jsonl"
    record = {"id": "sys-1", "category": "support", "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": "Which rule says how long a line may be?"}]}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_records_every_send_is_cold_from_its_first_message(sim: SimServer, long_system: Path, api: str) -> None:
    with Client(sim.url, timeout=30) as client:
        runner = Runner(client)
        r = runner.run(build_spec("sustained", {"tokens": 16, "prompts": str(long_system), "repeat": 3,
                                                "api": api}), f"t::tags_{api}")
        allowance = runner.context.cold_allowance(api)
    truth = [sim.truth(s.response_id) for s in r.streams]
    assert len(truth) == 3 and all(t["prompt_tokens"] > (800 if api == "chat" else 10) for t in truth), truth
    # the server's record: of the same record sent three times, no more than what precedes a tag's digits came
    # from the cache (a tag on the last message only: 850 of 884 chat tokens cached; no tag: the whole prompt)
    assert max(t["cached_tokens"] for t in truth) <= allowance, [t["cached_tokens"] for t in truth]
    assert [s.cached_tokens for s in r.streams] == [t["cached_tokens"] for t in truth]
    assert r.ttft_cache == "" and r.cached_share is not None


def test_a_request_cached_exactly_as_far_as_a_tag_is_cold(sim: SimServer) -> None:
    # Three prompts under one tag; the server's cache serves the second the tag alone (its words differ from the
    # first's at once) and the third one token more (its first word is the first's). The plugin's allowance is
    # what a tag alone can share; a request at it is cold, one token past it was served by the cache.
    tag = cold.head(cold.new_tag())
    texts = [tag + " oak walls keep the apples warm in spring", tag + " zebra crossings are painted white",
             tag + " oak gates open to the east at noon"]
    with Client(sim.url, timeout=30) as client:
        client.detect()
        client.cold = False  # a plain client: the prompts as written, no salt
        sent = [client.stream(text, 4) for text in texts]
        allowance = Runner(client).context.cold_allowance("completions")
    truth = [sim.truth(t.response_id) for t in sent]
    at, past = (truth[1]["prompt_tokens"], truth[1]["cached_tokens"]), (truth[2]["prompt_tokens"],
                                                                         truth[2]["cached_tokens"])
    assert truth[0]["cached_tokens"] < allowance  # the first: only the BOS and what an earlier tag's digits share
    assert at[1] == allowance and past[1] == allowance + 1, (at, past, allowance)  # the premise, on the server
    assert cached_share.verdict([at, at], allowance) == ""
    assert cached_share.verdict([at, past], allowance).startswith(
        f"ttft inconclusive: 1 of 2 requests meant to be cold came back from the server's prefix cache (up to "
        f"{allowance + 1} of {past[0]} prompt tokens cached)")
