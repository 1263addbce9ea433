"""HTTP routes of the simulator (aiohttp.web): the route table and its handlers, shaped per dialect as
the real servers answer (docs/servers.md); validation is in requests.py, response shapes in shapes.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from pytest_specperf.sim.arrival import arrival_of, listen, received_of, request_done
from pytest_specperf.sim.engine import Engine
from pytest_specperf.sim.profile import Profile
from pytest_specperf.sim.requests import (
    BadRequest,
    check_model,
    error_body,
    gen_request,
    json_body,
    opt_bool,
    parse_body,
    prompt_tokens_for,
)
from pytest_specperf.sim.shapes import ResponseSink
from pytest_specperf.sim.tokenizer import (
    TokenError,
    chat_prompt_ids,
    check_messages,
    detokenize,
    render_chat,
    token_piece,
)

ENGINE_KEY: web.AppKey[Engine] = web.AppKey("engine", Engine)


N_VOCAB = 1 << 48  # the tokenizer's id space (see tokenizer.py)


SHUTDOWN_GRACE_S = 1.0  # open streams get this long to finish when the server stops
#: Bodies past this many bytes are parsed and tokenized in a worker thread: tokenizing one 633k-character prompt
#: held the event loop 78 ms, and every other stream's writes (and, before kernel stamps, arrivals) with it.
OFF_LOOP_BYTES = 64 * 1024

T = TypeVar("T")


async def off_loop(request: web.Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, in a worker thread when ``request``'s body is large (``OFF_LOOP_BYTES``), else here."""
    if (request.content_length or 0) > OFF_LOOP_BYTES:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
    return fn(*args)


def _prepared(engine: Engine, raw: bytes, route: str, request: web.Request, arrival: float
              ) -> tuple[Any, dict[str, Any]]:
    """A generation request's body parsed and validated (its prompt tokenized) into a GenRequest and options."""
    req, opts = gen_request(engine, parse_body(raw), route, request, arrival)
    req.received = received_of(request)
    return req, opts


def _error(engine: Engine, exc: BadRequest) -> web.Response:
    return web.json_response(error_body(engine.profile.dialect, str(exc), exc.status, exc.param), status=exc.status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _engine(request: web.Request) -> Engine:
    return request.app[ENGINE_KEY]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith("/sim/"):  # what a client sent, for tests of its URL and credentials
        _engine(request).seen.append({"method": request.method, "path": request.path, "query": request.query_string,
                                      "authorization": request.headers.get("Authorization", "")})
    try:
        return await handler(request)
    except BadRequest as exc:
        return _error(_engine(request), exc)
    finally:
        request_done(request)


async def _generate(request: web.Request, route: str) -> web.StreamResponse:
    arrival = arrival_of(request)  # its first bytes read, before any handler's work (arrival.py)
    engine = _engine(request)
    req, opts = await off_loop(request, _prepared, engine, await request.read(), route, request, arrival)
    for spec, scope in ((opts["header_faults"], "header"), (engine.profile_faults, "profile")):
        if engine.status.hit(spec, scope):
            assert spec.status is not None
            msg = "Too many requests" if spec.status == 429 else f"Simulated HTTP {spec.status} (fault injection)"
            return web.json_response(error_body(engine.profile.dialect, msg, spec.status), status=spec.status,
                                     headers={"Retry-After": spec.retry_after_header})
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
    if p.dialect == "vllm":
        card["permission"] = [{"id": "modelperm-specperfsim", "object": "model_permission", "created": card["created"],
                               "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                               "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                               "organization": "*", "group": None, "is_blocking": False}]
    return web.json_response({"object": "list", "data": [card]})


async def health(request: web.Request) -> web.StreamResponse:
    """GET /health: empty 200 (vLLM, SGLang) or {"status": "ok"} (llama.cpp)."""
    if _engine(request).profile.dialect == "llamacpp":
        return web.json_response({"status": "ok"})
    return web.Response(status=200)


async def tokenize_route(request: web.Request) -> web.StreamResponse:
    """POST /tokenize in the dialect's shape (see the package docstring)."""
    engine = _engine(request)
    body = await json_body(request)
    p = engine.profile
    if p.dialect == "llamacpp":
        ids = prompt_tokens_for(engine, body, "content", "add_special", False)
        if opt_bool(body, "with_pieces"):
            return web.json_response({"tokens": [{"id": t, "piece": token_piece(t)} for t in ids]})
        return web.json_response({"tokens": ids})
    check_model(engine, body)
    if p.dialect == "sglang" and isinstance(body.get("prompt"), list):
        batch = []
        for item in body["prompt"]:
            batch.append(prompt_tokens_for(engine, {**body, "prompt": item}, "prompt", "add_special_tokens", True))
        return web.json_response({"tokens": batch, "count": [len(b) for b in batch],
                                  "max_model_len": p.max_model_len})
    ids = await off_loop(request, prompt_tokens_for, engine, body, "prompt", "add_special_tokens", True)
    out: dict[str, Any] = {"count": len(ids), "max_model_len": p.max_model_len, "tokens": ids}
    if p.dialect == "vllm":
        out["token_strs"] = [token_piece(t) for t in ids] if opt_bool(body, "return_token_strs") else None
    return web.json_response(out)


async def detokenize_route(request: web.Request) -> web.StreamResponse:
    """POST /detokenize: {"tokens"} -> {"prompt"} (vLLM), {"text"} (SGLang), {"content"} (llama.cpp)."""
    engine = _engine(request)
    body = await json_body(request)
    ids = body.get("tokens")
    if not isinstance(ids, list):
        raise BadRequest("'tokens' must be a list of token ids", param="tokens")
    try:
        text = detokenize(ids, skip_special=engine.profile.dialect == "sglang"
                          and opt_bool(body, "skip_special_tokens", True))
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
    body = await json_body(request)
    try:
        messages = check_messages(body.get("messages"))
    except ValueError as exc:
        raise BadRequest(str(exc), param="messages") from None
    return web.json_response({"input_tokens": len(chat_prompt_ids(messages))})


async def apply_template(request: web.Request) -> web.StreamResponse:
    """llama.cpp: POST /apply-template -> {"prompt": rendered chat text}."""
    body = await json_body(request)
    try:
        messages = check_messages(body.get("messages"))
    except ValueError as exc:
        raise BadRequest(str(exc), param="messages") from None
    return web.json_response({"prompt": render_chat(messages)})


async def props(request: web.Request) -> web.StreamResponse:
    """llama.cpp: GET /props (the fields a client probes for)."""
    p = _engine(request).profile
    n_max = p.drafts_per_step
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
                              "speculative_num_draft_tokens": engine.profile.drafts_per_step + 1,
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
    """POST /sim/reset: clear fault counters (truth records with ?truth=1, the prefix cache with ?cache=1)."""
    engine = _engine(request)
    out: dict[str, int | str] = {"status_scopes": engine.status.reset()}
    if request.query.get("truth") in ("1", "true"):
        out["truth_records"] = engine.truth.clear()
        engine.seen.clear()
    if request.query.get("cache") in ("1", "true"):
        engine.prefix_cache.clear()
        out["prefix_cache"] = "cleared"
    return web.json_response(out)


async def seen_route(request: web.Request) -> web.StreamResponse:
    """GET /sim/seen: every request that reached a route outside /sim/ (method, path, query, Authorization)."""
    return web.json_response(list(_engine(request).seen))


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
    r.add_get("/sim/seen", seen_route)
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
        # room for thousands of streams connecting at once (uvicorn, under vLLM and SGLang, queues 2,048)
        listener = await listen(runner, host, port, backlog=4096)
        bound_host, bound_port = listener.sockets[0].getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        on_ready(f"http://{shown}:{bound_port}", app[ENGINE_KEY])
        try:
            await stop.wait()
        finally:
            listener.close()
    finally:
        await runner.cleanup()
        await app[ENGINE_KEY].close()
