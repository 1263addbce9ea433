"""Request validation for the simulator's routes: bodies, fields and prompts, as the real servers check them."""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from pytest_specperf.sim.content import classify
from pytest_specperf.sim.engine import Engine, GenRequest
from pytest_specperf.sim.faults import HEADER, FaultError, FaultSpec, combine, parse_faults
from pytest_specperf.sim.tokenizer import (
    TokenError,
    chat_prompt_ids,
    check_messages,
    completion_prompt_ids,
    detokenize,
    tokenize,
)


class BadRequest(Exception):
    """A client error: (status, one-line message)."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def error_body(dialect: str, message: str, status: int, param: str | None = None) -> dict[str, Any]:
    """The error JSON each server family sends."""
    kind = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError",
            503: "ServiceUnavailableError"}.get(status, "InternalServerError" if status >= 500 else "BadRequestError")
    if dialect == "llamacpp":
        ltype = {404: "not_found_error", 429: "rate_limit_error", 503: "unavailable_error"}.get(
            status, "invalid_request_error" if status < 500 else "server_error")
        return {"error": {"code": status, "message": message, "type": ltype}}
    if dialect == "sglang":
        return {"object": "error", "message": message, "type": kind, "param": param, "code": status}
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


async def json_body(request: web.Request) -> dict[str, Any]:
    return parse_body(await request.read())


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or a BadRequest."""
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object")
    return body


def opt_int(body: dict[str, Any], key: str, *, lo: int) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"'{key}' must be an integer, got {v!r}", param=key)
    if v < lo:
        raise BadRequest(f"'{key}' must be >= {lo}, got {v}", param=key)
    return v


def opt_bool(body: dict[str, Any], key: str, default: bool = False) -> bool:
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise BadRequest(f"'{key}' must be true or false, got {v!r}", param=key)
    return v


def check_model(engine: Engine, body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is None:
        return
    if not isinstance(model, str):
        raise BadRequest(f"'model' must be a string, got {model!r}", param="model")
    # llama-server serves one model and ignores the name; vLLM and SGLang answer 404
    if model != engine.profile.model and engine.profile.dialect != "llamacpp":
        # vLLM names the served aliases (a local path shows as "<path>"); SGLang does not.
        served = f" Valid aliases: {engine.profile.model}" if engine.profile.dialect == "vllm" else ""
        raise BadRequest(f"The model `{model}` does not exist.{served}", status=404, param="model")


def completion_prompt(body: dict[str, Any]) -> tuple[list[int], str]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise BadRequest("'prompt' must not be empty", param="prompt")
        return completion_prompt_ids(prompt), prompt
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        try:
            return list(prompt), detokenize(prompt)
        except TokenError as exc:
            raise BadRequest(f"'prompt': {exc}", param="prompt") from None
    raise BadRequest("'prompt' must be a non-empty string or list of token ids (one prompt per request)",
                     param="prompt")


def _messages(messages: Any) -> list[tuple[str, str]]:
    try:
        return check_messages(messages)
    except ValueError as exc:
        raise BadRequest(str(exc), param="messages") from None


def _prompt(body: dict[str, Any], route: str) -> tuple[list[int], str]:
    """(prompt ids, prompt text) of a chat or completions body."""
    if route == "chat":
        messages = _messages(body.get("messages"))
        return chat_prompt_ids(messages), "\n".join(text for _, text in messages)
    return completion_prompt(body)


def _check_sampling(body: dict[str, Any]) -> int | None:
    """Check n, temperature and top_p; the seed, if any."""
    n = opt_int(body, "n", lo=1)
    if n not in (None, 1):
        raise BadRequest("the simulator supports only n=1", param="n")
    for key in ("temperature", "top_p"):
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < 0):
            raise BadRequest(f"'{key}' must be a number >= 0, got {v!r}", param=key)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest(f"'seed' must be an integer, got {seed!r}", param="seed")
    return seed


def _max_tokens(engine: Engine, body: dict[str, Any], route: str, n_prompt: int) -> int:
    """Tokens to generate: the dialect's keys in its order of precedence, else its default; within the context."""
    p = engine.profile
    max_tokens = None
    keys = ("n_predict", "max_tokens", "max_completion_tokens") if p.dialect == "llamacpp" else (
        ("max_completion_tokens", "max_tokens") if route == "chat" else ("max_tokens",))
    for key in keys:
        v = body.get(key)
        if p.dialect == "llamacpp" and key == "n_predict" and v == -1:
            continue  # llama.cpp: -1 means "until the context is full"
        max_tokens = opt_int(body, key, lo=1)
        if max_tokens is not None:
            break
    room = p.max_model_len - n_prompt
    if room < 1 and p.dialect == "vllm":
        # vLLM tokenizes at most max_model_len + 1 tokens of a text prompt, so it only knows "at least" that many.
        n = p.max_model_len + 1
        said = f"at least {n}" if n_prompt >= n else str(n_prompt)
        raise BadRequest(f"This model's maximum context length is {p.max_model_len} tokens. However, your prompt "
                         f"contains {said} input tokens, which exceeds this limit even without any output "
                         f"tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
                         f"value={min(n, n_prompt)})", param="input_tokens")
    if room < 1:
        raise BadRequest(f"This model's maximum context length is {p.max_model_len} tokens. However, your request "
                         f"has {n_prompt} input tokens. Please reduce the length of the input messages.")
    if max_tokens is None:
        max_tokens = 16 if (route == "completions" and p.dialect != "llamacpp") else room
    if max_tokens > room and p.dialect == "vllm":
        return room  # vLLM (0.32) shortens max_tokens to the room the context leaves, without an error
    if max_tokens > room:
        raise BadRequest(f"This model's maximum context length is {p.max_model_len} tokens. However, you requested "
                         f"{max_tokens + n_prompt} tokens ({n_prompt} in the messages, {max_tokens} "
                         f"in the completion). Please reduce the length of the messages or completion.",
                         param="max_tokens")
    return max_tokens


def _min_tokens(engine: Engine, body: dict[str, Any], max_tokens: int) -> int:
    if engine.profile.dialect == "llamacpp":  # llama-server has no min_tokens and ignores the key
        return 0
    min_tokens = opt_int(body, "min_tokens", lo=0) or 0
    if min_tokens > max_tokens:
        raise BadRequest(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
                         param="min_tokens")
    return min_tokens


def _stream_options(engine: Engine, body: dict[str, Any], stream: bool) -> tuple[bool, bool]:
    """(include_usage, continuous_usage_stats) of ``stream_options``."""
    so = body.get("stream_options")
    if so is None:
        return False, False
    if not isinstance(so, dict):
        raise BadRequest("'stream_options' must be an object", param="stream_options")
    if not stream and engine.profile.dialect == "vllm":
        raise BadRequest("Stream options can only be defined when `stream=True`.", param="stream_options")
    return opt_bool(so, "include_usage"), opt_bool(so, "continuous_usage_stats")


def _header_faults(request: web.Request) -> FaultSpec:
    try:
        return parse_faults(request.headers.get(HEADER, ""))
    except FaultError as exc:
        raise BadRequest(f"{HEADER}: {exc}") from None


def gen_request(engine: Engine, body: dict[str, Any], route: str, request: web.Request,
                 arrival: float) -> tuple[GenRequest, dict[str, Any]]:
    """Validate a completions/chat body into a GenRequest plus response options."""
    p = engine.profile
    check_model(engine, body)
    prompt_ids, prompt_text = _prompt(body, route)
    stream = opt_bool(body, "stream")
    seed = _check_sampling(body)
    max_tokens = _max_tokens(engine, body, route, len(prompt_ids))
    min_tokens = _min_tokens(engine, body, max_tokens)
    ignore_eos = opt_bool(body, "ignore_eos")
    include_usage, continuous = _stream_options(engine, body, stream)
    return_ids = opt_bool(body, "return_token_ids")
    if return_ids and p.dialect == "sglang" and route == "chat" and stream:
        raise BadRequest("return_token_ids is not supported with stream=True on /v1/chat/completions",
                         param="return_token_ids")
    header = _header_faults(request)
    opts = {"include_usage": include_usage, "continuous": continuous, "return_ids": return_ids,
            "timings_per_token": opt_bool(body, "timings_per_token"), "header_faults": header,
            "spec_details": p.dialect == "sglang" and opt_bool(body, "return_spec_tokens_details")}
    prefix = "chatcmpl-" if route == "chat" else "cmpl-"
    req = GenRequest(id=prefix + uuid.uuid4().hex, route=route, stream=stream, prompt_ids=prompt_ids,
                     kind=classify(prompt_text), max_tokens=max_tokens, min_tokens=min_tokens, ignore_eos=ignore_eos,
                     category=p.category_of(prompt_text),
                     seed=seed, temperature=float(body.get("temperature") or 0.0),
                     faults=combine(engine.profile_faults, header), arrival=arrival,
                     body={k: body[k] for k in WIRE_FIELDS if k in body}, **_cache_options(p.dialect, body))
    return req, opts


def _cache_options(dialect: str, body: dict[str, Any]) -> dict[str, Any]:
    """vLLM's ``cache_salt`` (a string) and llama.cpp's ``cache_prompt`` (a bool), where the dialect has them."""
    if dialect == "vllm" and body.get("cache_salt") is not None:
        salt = body["cache_salt"]
        if not isinstance(salt, str) or not salt:
            raise BadRequest(f"'cache_salt' must be a non-empty string, got {salt!r}", param="cache_salt")
        return {"cache_salt": salt}
    if dialect == "llamacpp" and "cache_prompt" in body:
        return {"cache_prompt": opt_bool(body, "cache_prompt", True)}
    return {}


# Request fields a truth record keeps as sent, so tests can check what reached the server.
WIRE_FIELDS = ("temperature", "seed", "max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos", "n_predict",
               "stream", "cache_prompt", "cache_salt")


def prompt_tokens_for(engine: Engine, body: dict[str, Any], text_key: str, special_key: str,
                       special_default: bool) -> list[int]:
    if "messages" in body and engine.profile.dialect != "llamacpp":
        messages = _messages(body["messages"])
        ids = chat_prompt_ids(messages, add_generation_prompt=opt_bool(body, "add_generation_prompt", True))
        # vLLM's chat tokenize defaults add_special_tokens to false: the template has the BOS already
        return ([1] if opt_bool(body, special_key, False) else []) + ids
    text = body.get(text_key)
    if not isinstance(text, str):
        raise BadRequest(f"'{text_key}' must be a string", param=text_key)
    parse_special = opt_bool(body, "parse_special", True)
    return tokenize(text, add_bos=opt_bool(body, special_key, special_default), parse_special=parse_special)
