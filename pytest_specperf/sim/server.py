"""HTTP routes of the simulator (aiohttp.web), shaped per dialect as in reference/servers.md."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .content import classify
from .engine import Engine, GenRequest
from .faults import HEADER, FaultError, combine, parse_faults
from .profile import Profile
from .tokenizer import (
    TokenError,
    chat_prompt_ids,
    check_messages,
    completion_prompt_ids,
    detokenize,
    render_chat,
    token_piece,
    tokenize,
)

ENGINE_KEY: web.AppKey[Engine] = web.AppKey("engine", Engine)
REASONING_KEY = {"vllm": "reasoning", "sglang": "reasoning_content", "llamacpp": "reasoning_content"}
N_VOCAB = 1 << 48  # the tokenizer's id space (see tokenizer.py)
SHUTDOWN_GRACE_S = 1.0  # open streams get this long to finish when the server stops


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


def _error(engine: Engine, exc: BadRequest) -> web.Response:
    return web.json_response(error_body(engine.profile.dialect, str(exc), exc.status, exc.param), status=exc.status)


async def _json_body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object")
    return body


def _opt_int(body: dict[str, Any], key: str, *, lo: int) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"'{key}' must be an integer, got {v!r}", param=key)
    if v < lo:
        raise BadRequest(f"'{key}' must be >= {lo}, got {v}", param=key)
    return v


def _opt_bool(body: dict[str, Any], key: str, default: bool = False) -> bool:
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise BadRequest(f"'{key}' must be true or false, got {v!r}", param=key)
    return v


def _check_model(engine: Engine, body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is None:
        return
    if not isinstance(model, str):
        raise BadRequest(f"'model' must be a string, got {model!r}", param="model")
    # llama-server serves one model and ignores the name; vLLM and SGLang answer 404
    if model != engine.profile.model and engine.profile.dialect != "llamacpp":
        raise BadRequest(f"The model `{model}` does not exist.", status=404, param="model")


def _completion_prompt(body: dict[str, Any]) -> tuple[list[int], str]:
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


def _gen_request(engine: Engine, body: dict[str, Any], route: str, request: web.Request,
                 arrival: float) -> tuple[GenRequest, dict]:
    """Validate a completions/chat body into a GenRequest plus response options."""
    p = engine.profile
    _check_model(engine, body)
    if route == "chat":
        try:
            messages = check_messages(body.get("messages"))
        except ValueError as exc:
            raise BadRequest(str(exc), param="messages") from None
        prompt_ids = chat_prompt_ids(messages)
        prompt_text = "\n".join(text for _, text in messages)
    else:
        prompt_ids, prompt_text = _completion_prompt(body)
    stream = _opt_bool(body, "stream")
    n = _opt_int(body, "n", lo=1)
    if n not in (None, 1):
        raise BadRequest("the simulator supports only n=1", param="n")
    for key in ("temperature", "top_p"):
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < 0):
            raise BadRequest(f"'{key}' must be a number >= 0, got {v!r}", param=key)
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest(f"'seed' must be an integer, got {seed!r}", param="seed")
    max_tokens = None
    keys = ("n_predict", "max_tokens", "max_completion_tokens") if p.dialect == "llamacpp" else (
        ("max_completion_tokens", "max_tokens") if route == "chat" else ("max_tokens",))
    for key in keys:
        v = body.get(key)
        if p.dialect == "llamacpp" and key == "n_predict" and v == -1:
            continue  # llama.cpp: -1 means "until the context is full"
        max_tokens = _opt_int(body, key, lo=1)
        if max_tokens is not None:
            break
    room = p.max_model_len - len(prompt_ids)
    if room < 1:
        raise BadRequest(f"This model's maximum context length is {p.max_model_len} tokens. However, your request "
                         f"has {len(prompt_ids)} input tokens. Please reduce the length of the input messages.")
    if max_tokens is None:
        max_tokens = 16 if (route == "completions" and p.dialect != "llamacpp") else room
    if max_tokens > room:
        raise BadRequest(f"This model's maximum context length is {p.max_model_len} tokens. However, you requested "
                         f"{max_tokens + len(prompt_ids)} tokens ({len(prompt_ids)} in the messages, {max_tokens} "
                         f"in the completion). Please reduce the length of the messages or completion.",
                         param="max_tokens")
    min_tokens = 0
    if p.dialect != "llamacpp":  # llama-server has no min_tokens and ignores the key
        min_tokens = _opt_int(body, "min_tokens", lo=0) or 0
        if min_tokens > max_tokens:
            raise BadRequest(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
                             param="min_tokens")
    ignore_eos = _opt_bool(body, "ignore_eos")
    so = body.get("stream_options")
    include_usage = continuous = False
    if so is not None:
        if not isinstance(so, dict):
            raise BadRequest("'stream_options' must be an object", param="stream_options")
        if not stream and p.dialect == "vllm":
            raise BadRequest("Stream options can only be defined when `stream=True`.", param="stream_options")
        include_usage = _opt_bool(so, "include_usage")
        continuous = _opt_bool(so, "continuous_usage_stats")
    return_ids = _opt_bool(body, "return_token_ids")
    if return_ids and p.dialect == "sglang" and route == "chat" and stream:
        raise BadRequest("return_token_ids is not supported with stream=True on /v1/chat/completions",
                         param="return_token_ids")
    try:
        header = parse_faults(request.headers.get(HEADER, ""))
    except FaultError as exc:
        raise BadRequest(f"{HEADER}: {exc}") from None
    opts = {"include_usage": include_usage, "continuous": continuous, "return_ids": return_ids,
            "timings_per_token": _opt_bool(body, "timings_per_token"), "header_faults": header,
            "spec_details": p.dialect == "sglang" and _opt_bool(body, "return_spec_tokens_details")}
    prefix = "chatcmpl-" if route == "chat" else "cmpl-"
    req = GenRequest(id=prefix + uuid.uuid4().hex, route=route, stream=stream, prompt_ids=prompt_ids,
                     kind=classify(prompt_text), max_tokens=max_tokens, min_tokens=min_tokens, ignore_eos=ignore_eos,
                     seed=seed, temperature=float(body.get("temperature") or 0.0),
                     faults=combine(engine.profile_faults, header), arrival=arrival,
                     body={k: body[k] for k in WIRE_FIELDS if k in body})
    return req, opts


# Request fields a truth record keeps as sent, so tests can check what reached the server.
WIRE_FIELDS = ("temperature", "seed", "max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos", "n_predict",
               "stream", "cache_prompt")


class ResponseSink:
    """Formats one generation for its route, dialect and stream mode."""

    def __init__(self, engine: Engine, request: web.Request, req: GenRequest, opts: dict[str, Any]) -> None:
        self.engine = engine
        self.p: Profile = engine.profile
        self.request = request
        self.req = req
        self.opts = opts
        self.dialect = self.p.dialect
        self.created = int(time.time())
        self.response: web.StreamResponse | None = None
        self.ids: list[int] = []
        self.reasoning_left = self.p.reasoning_tokens if req.route == "chat" else 0
        self.content_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.prefill_done_at = 0.0

    # common pieces --------------------------------------------------------------------------

    def _usage(self, completion: int) -> dict[str, Any]:
        prompt = len(self.req.prompt_ids)
        details: Any = {"cached_tokens": 0} if self.dialect == "llamacpp" else None
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
                "prompt_tokens_details": details}

    def _timings(self, record: dict[str, Any] | None, predicted_n: int) -> dict[str, Any]:
        steps = record["steps"] if record else []
        prompt_ms = steps[0]["step_ms"] if steps else 0.0
        predicted_ms = 1000.0 * (time.monotonic() - self.prefill_done_at) if self.prefill_done_at else 0.0
        n_prompt = len(self.req.prompt_ids)
        out: dict[str, Any] = {
            "cache_n": 0, "prompt_n": n_prompt, "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / n_prompt if n_prompt else 0.0,
            "prompt_per_second": 1000.0 * n_prompt / prompt_ms if prompt_ms else 0.0,
            "predicted_n": predicted_n, "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / predicted_n if predicted_n else 0.0,
            "predicted_per_second": 1000.0 * (predicted_n - 1) / predicted_ms if predicted_ms else 0.0,
        }
        if record:
            drafted = sum(s["drafted"] for s in steps)
            if drafted:  # llama.cpp leaves the keys out when nothing was drafted
                out["draft_n"] = drafted
                out["draft_n_accepted"] = sum(s["accepted"] for s in steps)
        return out

    def _sglext(self, record: dict[str, Any], completion: int) -> dict[str, Any]:
        """SGLang's ``sglext.spec_tokens_details`` (``return_spec_tokens_details``): one request's verify counts."""
        decode = [s for s in record["steps"] if s.get("phase") != "prefill"]
        verify = len(decode)
        correct = sum(s["accepted"] for s in decode)
        proposed = sum(s["drafted"] for s in decode)
        hist = [0] * self.p.max_accept
        for s in decode:
            hist[s["accepted"]] += 1
        return {"spec_tokens_details": {
            "spec_accept_rate": correct / proposed if proposed else 0.0,
            "spec_accept_length": completion / verify if verify else 0.0,  # SGLang's own definition
            "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": proposed, "spec_verify_ct": verify,
            "spec_correct_drafts_histogram": hist}}

    def _split(self, ids: list[int]) -> tuple[str, str]:
        """(reasoning text, content text) of a step: the first reasoning_tokens go to reasoning."""
        k = min(self.reasoning_left, len(ids))
        self.reasoning_left -= k
        return "".join(token_piece(t) for t in ids[:k]), "".join(token_piece(t) for t in ids[k:])

    def _head(self, obj: str) -> dict[str, Any]:
        head: dict[str, Any] = {"id": self.req.id, "object": obj, "created": self.created, "model": self.p.model}
        if self.dialect == "llamacpp":
            head["system_fingerprint"] = "b0-specperf-sim"
        return head

    @staticmethod
    def _sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    # Sink protocol --------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.req.stream:
            return
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache", "X-Request-Id": self.req.id})
        await resp.prepare(self.request)
        self.response = resp

    async def step(self, ids: list[int], generated: int, finish_reason: str | None) -> None:
        first = not self.ids
        self.ids.extend(ids)
        if first:
            self.prefill_done_at = time.monotonic()
        if self.req.stream and self.dialect == "llamacpp":
            data = self._llamacpp_events(ids, generated, first)
        else:
            reasoning, content = self._split(ids)
            if not self.req.stream:
                self.reasoning_parts.append(reasoning)
                self.content_parts.append(content)
                return
            data = self._step_chunk(ids, reasoning, content, generated, first, finish_reason)
        assert self.response is not None
        await self.response.write(data)

    def _step_chunk(self, ids: list[int], reasoning: str, content: str, generated: int, first: bool,
                    finish_reason: str | None) -> bytes:
        """vLLM / SGLang: one chunk per engine step carrying all of its tokens."""
        route, o = self.req.route, self.opts
        continuous = o["continuous"] and (o["include_usage"] or self.dialect == "sglang")
        out = b""
        if route == "chat":
            if first:  # the role chunk comes with the first output, carrying no tokens
                role: dict[str, Any] = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                        "finish_reason": None}
                if o["return_ids"]:
                    role["token_ids"] = []
                chunk = {**self._head("chat.completion.chunk"), "choices": [role]}
                if continuous:
                    chunk["usage"] = self._usage(0)
                out += self._sse(chunk)
            delta: dict[str, Any] = {}
            if reasoning:
                delta[REASONING_KEY[self.dialect]] = reasoning
            if content or not reasoning:
                delta["content"] = content
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            head = self._head("chat.completion.chunk")
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish_reason}
            head = self._head("text_completion")
        if self.dialect == "vllm":
            choice["stop_reason"] = None
        if o["return_ids"]:
            choice["token_ids"] = list(ids)
        chunk = {**head, "choices": [choice]}
        if continuous:
            chunk["usage"] = self._usage(generated)
        return out + self._sse(chunk)

    def _llamacpp_events(self, ids: list[int], generated: int, first: bool) -> bytes:
        """llama-server: one event per token, so a step's accepted drafts arrive as a burst."""
        out = b""
        route = self.req.route
        if route == "chat" and first:
            out += self._sse({**self._head("chat.completion.chunk"),
                              "choices": [{"finish_reason": None, "index": 0,
                                           "delta": {"role": "assistant", "content": None}}]})
        n = generated - len(ids)
        for token in ids:
            n += 1
            reasoning, content = self._split([token])
            if route == "chat":
                delta = {REASONING_KEY["llamacpp"]: reasoning} if reasoning else {"content": content}
                ev: dict[str, Any] = {**self._head("chat.completion.chunk"),
                                      "choices": [{"finish_reason": None, "index": 0, "delta": delta}]}
            else:
                ev = {**self._head("text_completion"),
                      "choices": [{"text": content, "index": 0, "logprobs": None, "finish_reason": None}]}
            if self.opts["timings_per_token"]:
                ev["timings"] = self._timings(None, n)
            out += self._sse(ev)
        return out

    async def malformed(self) -> None:
        if self.response is not None:
            await self.response.write(b'data: {"id": "' + self.req.id.encode() + b'", "choices": [{"text": \n\n')

    def abort(self) -> None:
        transport = self.request.transport
        if transport is not None:
            transport.abort()

    async def finish(self, record: dict[str, Any]) -> None:
        n = len(self.ids)
        reason = record["finish_reason"] or "length"
        if not self.req.stream:
            self.response = web.json_response(self._body(record, reason), headers={"X-Request-Id": self.req.id})
            return
        assert self.response is not None
        o = self.opts
        out = b""
        if self.dialect == "llamacpp":
            timings = self._timings(record, n)
            if self.req.route == "chat":
                final: dict[str, Any] = {**self._head("chat.completion.chunk"),
                                         "choices": [{"finish_reason": reason, "index": 0, "delta": {}}]}
                if o["include_usage"]:
                    out += self._sse(final)
                    final = {**self._head("chat.completion.chunk"), "choices": [], "usage": self._usage(n)}
                final["timings"] = timings  # timings ride on the last event
            else:
                final = {**self._head("text_completion"),
                         "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": reason}],
                         "usage": self._usage(n), "timings": timings}
            out += self._sse(final)
        else:
            obj = "chat.completion.chunk" if self.req.route == "chat" else "text_completion"
            if o["spec_details"]:  # SGLang sends it as an extra chunk with no choices
                out += self._sse({**self._head(obj), "choices": [], "sglext": self._sglext(record, n)})
            if o["include_usage"]:
                out += self._sse({**self._head(obj), "choices": [], "usage": self._usage(n)})
        out += b"data: [DONE]\n\n"
        await self.response.write(out)
        await self.response.write_eof()

    def _body(self, record: dict[str, Any], reason: str) -> dict[str, Any]:
        n = len(self.ids)
        reasoning, content = "".join(self.reasoning_parts), "".join(self.content_parts)
        if self.req.route == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if reasoning:
                message[REASONING_KEY[self.dialect]] = reasoning
            elif self.dialect == "vllm":
                message["reasoning"] = None
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}
            head = self._head("chat.completion")
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": reason}
            head = self._head("text_completion")
        if self.dialect == "vllm":
            choice["stop_reason"] = None
        if self.opts["return_ids"]:
            choice["token_ids"] = list(self.ids)
        body = {**head, "choices": [choice], "usage": self._usage(n)}
        if self.dialect == "llamacpp":
            body["timings"] = self._timings(record, n)
        if self.opts["spec_details"]:
            body["sglext"] = self._sglext(record, n)
        return body


# handlers ------------------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _engine(request: web.Request) -> Engine:
    return request.app[ENGINE_KEY]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return _error(_engine(request), exc)


async def _generate(request: web.Request, route: str) -> web.StreamResponse:
    arrival = time.monotonic()  # headers parsed; the body is read next, as part of the request
    engine = _engine(request)
    body = await _json_body(request)
    req, opts = _gen_request(engine, body, route, request, arrival)
    for spec, scope in ((opts["header_faults"], "header"), (engine.profile_faults, "profile")):
        if engine.status.hit(spec, scope):
            assert spec.status is not None
            msg = "Too many requests" if spec.status == 429 else f"Simulated HTTP {spec.status} (fault injection)"
            return web.json_response(error_body(engine.profile.dialect, msg, spec.status), status=spec.status,
                                     headers={"Retry-After": f"{spec.retry_after:g}"})
    sink = ResponseSink(engine, request, req, opts)
    record = await engine.generate(req, sink)
    if record["finish_reason"] == "fault_disconnect":
        raise _Dropped()
    if sink.response is None:  # the client went away before anything was sent
        raise _Dropped()
    return sink.response


class _Dropped(web.HTTPException):
    """The connection is gone (fault or client); nothing more can be sent."""

    status_code = 499


async def completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions."""
    return await _generate(request, "completions")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions."""
    return await _generate(request, "chat")


async def models(request: web.Request) -> web.StreamResponse:
    """GET /v1/models: ``owned_by`` names the dialect."""
    p = _engine(request).profile
    card: dict[str, Any] = {"id": p.model, "object": "model", "created": int(_engine(request).metrics.created),
                            "owned_by": p.dialect}
    if p.dialect == "llamacpp":
        card["meta"] = {"n_ctx_train": p.max_model_len, "n_ctx": p.max_model_len, "n_vocab": N_VOCAB}
        return web.json_response({"object": "list", "data": [card],
                                  "models": [{"name": p.model, "model": p.model, "type": "model"}]})
    card.update({"root": p.model, "parent": None, "max_model_len": p.max_model_len})
    return web.json_response({"object": "list", "data": [card]})


async def health(request: web.Request) -> web.StreamResponse:
    """GET /health: empty 200 (vLLM, SGLang) or {"status": "ok"} (llama.cpp)."""
    if _engine(request).profile.dialect == "llamacpp":
        return web.json_response({"status": "ok"})
    return web.Response(status=200)


def _prompt_tokens_for(engine: Engine, body: dict[str, Any], text_key: str, special_key: str,
                       special_default: bool) -> list[int]:
    if "messages" in body and engine.profile.dialect != "llamacpp":
        try:
            messages = check_messages(body["messages"])
        except ValueError as exc:
            raise BadRequest(str(exc), param="messages") from None
        ids = chat_prompt_ids(messages, add_generation_prompt=_opt_bool(body, "add_generation_prompt", True))
        # vLLM's chat tokenize defaults add_special_tokens to false: the template has the BOS already
        return ([1] if _opt_bool(body, special_key, False) else []) + ids
    text = body.get(text_key)
    if not isinstance(text, str):
        raise BadRequest(f"'{text_key}' must be a string", param=text_key)
    parse_special = _opt_bool(body, "parse_special", True)
    return tokenize(text, add_bos=_opt_bool(body, special_key, special_default), parse_special=parse_special)


async def tokenize_route(request: web.Request) -> web.StreamResponse:
    """POST /tokenize in the dialect's shape (see the package docstring)."""
    engine = _engine(request)
    body = await _json_body(request)
    p = engine.profile
    if p.dialect == "llamacpp":
        ids = _prompt_tokens_for(engine, body, "content", "add_special", False)
        if _opt_bool(body, "with_pieces"):
            return web.json_response({"tokens": [{"id": t, "piece": token_piece(t)} for t in ids]})
        return web.json_response({"tokens": ids})
    _check_model(engine, body)
    if p.dialect == "sglang" and isinstance(body.get("prompt"), list):
        batch = []
        for item in body["prompt"]:
            batch.append(_prompt_tokens_for(engine, {**body, "prompt": item}, "prompt", "add_special_tokens", True))
        return web.json_response({"tokens": batch, "count": [len(b) for b in batch],
                                  "max_model_len": p.max_model_len})
    ids = _prompt_tokens_for(engine, body, "prompt", "add_special_tokens", True)
    out: dict[str, Any] = {"count": len(ids), "max_model_len": p.max_model_len, "tokens": ids}
    if p.dialect == "vllm":
        out["token_strs"] = [token_piece(t) for t in ids] if _opt_bool(body, "return_token_strs") else None
    return web.json_response(out)


async def detokenize_route(request: web.Request) -> web.StreamResponse:
    """POST /detokenize: {"tokens"} -> {"prompt"} (vLLM), {"text"} (SGLang), {"content"} (llama.cpp)."""
    engine = _engine(request)
    body = await _json_body(request)
    ids = body.get("tokens")
    if not isinstance(ids, list):
        raise BadRequest("'tokens' must be a list of token ids", param="tokens")
    try:
        text = detokenize(ids, skip_special=engine.profile.dialect == "sglang"
                          and _opt_bool(body, "skip_special_tokens", True))
    except TokenError as exc:
        raise BadRequest(f"'tokens': {exc}", param="tokens") from None
    key = {"vllm": "prompt", "sglang": "text", "llamacpp": "content"}[engine.profile.dialect]
    return web.json_response({key: text})


async def metrics_route(request: web.Request) -> web.StreamResponse:
    """GET /metrics: Prometheus text with the dialect's names (see metrics.py)."""
    engine = _engine(request)
    status, text, headers = engine.metrics.render(engine.profile.metrics)
    ctype = headers.pop("Content-Type", "text/plain")
    resp = web.Response(status=status, body=text.encode(), headers=headers)
    resp.content_type = ctype.split(";")[0]
    if "version" in ctype:
        resp.headers["Content-Type"] = ctype
    return resp


async def chat_input_tokens(request: web.Request) -> web.StreamResponse:
    """llama.cpp: POST /v1/chat/completions/input_tokens -> {"input_tokens": N}."""
    body = await _json_body(request)
    try:
        messages = check_messages(body.get("messages"))
    except ValueError as exc:
        raise BadRequest(str(exc), param="messages") from None
    return web.json_response({"input_tokens": len(chat_prompt_ids(messages))})


async def apply_template(request: web.Request) -> web.StreamResponse:
    """llama.cpp: POST /apply-template -> {"prompt": rendered chat text}."""
    body = await _json_body(request)
    try:
        messages = check_messages(body.get("messages"))
    except ValueError as exc:
        raise BadRequest(str(exc), param="messages") from None
    return web.json_response({"prompt": render_chat(messages)})


async def props(request: web.Request) -> web.StreamResponse:
    """llama.cpp: GET /props (the fields a client probes for)."""
    p = _engine(request).profile
    n_max = p.max_accept - 1 if p.speculation else 0
    return web.json_response({"model_alias": p.model, "model_path": f"/models/{p.model}.gguf",
                              "total_slots": p.max_batch, "endpoint_metrics": p.metrics,
                              "build_info": "b0-specperf-sim",
                              "default_generation_settings": {"n_ctx": p.max_model_len,
                                                              "params": {"speculative.types": ["draft-mtp"],
                                                                         "speculative.n_max": n_max}}})


async def model_info(request: web.Request) -> web.StreamResponse:
    """SGLang: GET /model_info."""
    p = _engine(request).profile
    return web.json_response({"model_path": p.model, "served_model_name": p.model, "tokenizer_path": p.model,
                              "is_generation": True, "reasoning_parser": None})


async def server_info(request: web.Request) -> web.StreamResponse:
    """SGLang: GET /server_info with the cumulative mean acceptance length."""
    engine = _engine(request)
    d = engine.metrics.done
    steps = d["verify_calls"]
    avg = (steps + d["accepted"]) / steps if steps else 0.0
    algorithm = "EAGLE" if engine.profile.speculation else None
    return web.json_response({"served_model_name": engine.profile.model, "speculative_algorithm": algorithm,
                              "speculative_num_draft_tokens": engine.profile.max_accept,
                              "internal_states": [{"avg_spec_accept_length": avg}]})


async def version(request: web.Request) -> web.StreamResponse:
    """vLLM: GET /version."""
    return web.json_response({"version": "0.0.0+specperf-sim"})


async def truth_route(request: web.Request) -> web.StreamResponse:
    """GET /sim/truth/{id}: the record described in truth.py."""
    engine = _engine(request)
    rec = engine.truth.get(request.match_info["id"])
    if rec is None:
        raise BadRequest(f"no truth for response id {request.match_info['id']!r}", status=404)
    return web.json_response(rec)


async def truth_list_route(request: web.Request) -> web.StreamResponse:
    """GET /sim/truth: every kept record without its steps, oldest first."""
    return web.json_response(_engine(request).truth.summaries())


async def reset_route(request: web.Request) -> web.StreamResponse:
    """POST /sim/reset: clear fault counters (and truth records with ?truth=1)."""
    engine = _engine(request)
    out = {"status_scopes": engine.status.reset()}
    if request.query.get("truth") in ("1", "true"):
        out["truth_records"] = engine.truth.clear()
    return web.json_response(out)


async def info_route(request: web.Request) -> web.StreamResponse:
    """GET /sim/info: the resolved profile and speed."""
    engine = _engine(request)
    return web.json_response({"profile": engine.profile.to_dict(), "speed": engine.speed,
                              "dialect": engine.profile.dialect, "model": engine.profile.model})


def create_app(profile: Profile, speed: float = 1.0) -> web.Application:
    """The aiohttp application for ``profile`` at ``speed``; routes depend on the dialect."""
    app = web.Application(middlewares=[_errors], client_max_size=64 * 1024 * 1024)
    app[ENGINE_KEY] = Engine(profile, speed)
    r = app.router
    r.add_post("/v1/completions", completions)
    r.add_post("/v1/chat/completions", chat_completions)
    r.add_get("/v1/models", models)
    r.add_get("/health", health)
    r.add_post("/tokenize", tokenize_route)
    r.add_post("/detokenize", detokenize_route)
    if profile.metrics or profile.dialect != "sglang":
        r.add_get("/metrics", metrics_route)
    r.add_get("/sim/truth", truth_list_route)
    r.add_get("/sim/truth/{id}", truth_route)
    r.add_post("/sim/reset", reset_route)
    r.add_get("/sim/info", info_route)
    if profile.dialect == "llamacpp":
        r.add_get("/v1/health", health)
        r.add_get("/models", models)
        r.add_get("/props", props)
        r.add_post("/v1/chat/completions/input_tokens", chat_input_tokens)
        r.add_post("/chat/completions/input_tokens", chat_input_tokens)
        r.add_post("/apply-template", apply_template)
    elif profile.dialect == "sglang":
        r.add_post("/v1/tokenize", tokenize_route)
        r.add_post("/v1/detokenize", detokenize_route)
        r.add_get("/model_info", model_info)
        r.add_get("/server_info", server_info)
        r.add_get("/get_server_info", server_info)
        r.add_get("/health_generate", health)
    else:
        r.add_get("/version", version)
        r.add_get("/ping", health)
    return app


async def run_server(profile: Profile, speed: float, host: str, port: int, stop: asyncio.Event,
                     on_ready: Callable[[str, Engine], None]) -> None:
    """Serve ``profile`` until ``stop`` is set; ``on_ready(url, engine)`` once the socket listens."""
    app = create_app(profile, speed)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=1024)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        on_ready(f"http://{shown}:{bound_port}", app[ENGINE_KEY])
        await stop.wait()
    finally:
        await runner.cleanup()
        await app[ENGINE_KEY].close()
