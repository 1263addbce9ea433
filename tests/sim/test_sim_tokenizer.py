"""Tokenizer: deterministic, reversible, ~4 chars/token, and the server counts agree exactly."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from support.sim_samples import ALL, PROSE

from pytest_specperf.sim import SimServer, detokenize, tokenize
from pytest_specperf.sim.tokenizer import BOS_ID, MAX_TOKEN_BYTES, TokenError, token_bytes


@pytest.mark.parametrize("text", [t for kind in ALL.values() for t in kind.values()]
                         + ["", " ", "héllo wörld ✓ 日本語", "a\n\n  b\t\tc", "<s>x</s><|im_start|>"])
def test_roundtrip_is_exact(text: str) -> None:
    assert detokenize(tokenize(text)) == text
    assert detokenize(tokenize(text, parse_special=False)) == text


def test_english_is_3_to_5_chars_per_token() -> None:
    text = " ".join(PROSE.values())
    ratio = len(text) / len(tokenize(text))
    assert 3.0 <= ratio <= 5.0, ratio


def test_deterministic_across_processes() -> None:
    text = PROSE["news"]
    code = f"from pytest_specperf.sim import tokenize; print(tokenize({text!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(tokenize(text))


def test_special_tokens_and_bos() -> None:
    assert tokenize("hi", add_bos=True)[0] == BOS_ID
    assert tokenize("<s>", parse_special=True) == [BOS_ID]
    assert BOS_ID not in tokenize("<s>", parse_special=False)
    assert all(len(token_bytes(t)) <= MAX_TOKEN_BYTES for t in tokenize(PROSE["fiction"]))
    with pytest.raises(TokenError):
        token_bytes(200)
    with pytest.raises(TokenError):
        detokenize([12345678901234567890])


def _tokenize_count(c: httpx.Client, dialect: str, text: str) -> int:
    if dialect == "llamacpp":
        return len(c.post("/tokenize", json={"content": text, "add_special": True}).json()["tokens"])
    body = c.post("/tokenize", json={"prompt": text}).json()
    assert body["count"] == len(body["tokens"])
    return body["count"]


@pytest.mark.parametrize("kind", sorted(ALL))
def test_tokenize_route_equals_completion_usage(sim: SimServer, client: httpx.Client, kind: str) -> None:
    text = next(iter(ALL[kind].values()))
    usage = client.post("/v1/completions", json={"prompt": text, "max_tokens": 2}).json()["usage"]
    assert usage["prompt_tokens"] == _tokenize_count(client, sim.dialect, text) == len(tokenize(text)) + 1


def test_tokenize_route_equals_chat_usage(sim: SimServer, client: httpx.Client) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROSE["letter"]}]
    usage = client.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 2}).json()["usage"]
    if sim.dialect == "llamacpp":
        count = client.post("/v1/chat/completions/input_tokens", json={"messages": messages}).json()["input_tokens"]
        rendered = client.post("/apply-template", json={"messages": messages}).json()["prompt"]
        # the rendered template holds the BOS as text: tokenizing it without add_special counts the same
        assert len(client.post("/tokenize", json={"content": rendered}).json()["tokens"]) == count
    else:
        count = client.post("/tokenize", json={"messages": messages}).json()["count"]
    assert usage["prompt_tokens"] == count


def test_llamacpp_tokenize_defaults_leave_bos_out(dialect_sims: dict[str, SimServer]) -> None:
    url = dialect_sims["llamacpp"].url
    plain = httpx.post(url + "/tokenize", json={"content": "hello world"}).json()["tokens"]
    special = httpx.post(url + "/tokenize", json={"content": "hello world", "add_special": True}).json()["tokens"]
    assert special == [BOS_ID, *plain]
    pieces = httpx.post(url + "/tokenize", json={"content": "hello world", "with_pieces": True}).json()["tokens"]
    assert "".join(p["piece"] for p in pieces) == "hello world"


def test_detokenize_route_roundtrip(sim: SimServer, client: httpx.Client) -> None:
    ids = tokenize(PROSE["fiction"])
    key = {"vllm": "prompt", "sglang": "text", "llamacpp": "content"}[sim.dialect]
    assert client.post("/detokenize", json={"tokens": ids}).json()[key] == PROSE["fiction"]
    assert client.post("/detokenize", json={"tokens": [7]}).status_code == 400
