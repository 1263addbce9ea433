"""HTTP client for OpenAI-compatible inference servers: detection, tokenize, timed streams.

Every stream becomes a :class:`Trace`: the arrival time of each SSE event that carried tokens
and its exact token count, taken from what the server reports per chunk (continuous usage
stats, llama.cpp's ``timings_per_token``, token ids), else from ``/tokenize`` of the chunk's
text (marked approximate). Chunk counts are reconciled with ``usage.completion_tokens``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pytest_specperf.endpoint import capture
from pytest_specperf.endpoint.light_post import LightPost
from pytest_specperf.endpoint.retrying import RETRY_STATUSES, RetryPolicy
from pytest_specperf.endpoint.server_kinds import (
    CAPABILITIES,
    Capabilities,
    ServerInfo,
    context_from_models,
    kind_from_models,
)
from pytest_specperf.endpoint.sse import Chunk, Trace, TraceBuilder, paused_gc, split_events
from pytest_specperf.endpoint.tls import tls
from pytest_specperf.errors import MeasurementError, shorten
from pytest_specperf.prompts.cold import cold_salt
from pytest_specperf.urls import redact_text, redact_url, request_parts

#: Where each server kind tells its version: (route, JSON key).
VERSION_ROUTES: dict[str, tuple[str, str]] = {
    "vllm": ("/version", "version"), "sglang": ("/server_info", "version"), "llamacpp": ("/props", "build_info"),
    "tgi": ("/info", "version"), "ollama": ("/api/version", "version"),
}

Progress = Callable[[int, float], None]  # (tokens so far, seconds since the first token)


@dataclass
class Completion:
    """A timed non-streamed completion."""

    elapsed_s: float
    usage: dict[str, Any]
    finish_reason: str | None
    body: dict[str, Any]


#: httpcore's trace event as a request's headers go to the socket, its connection open (``http11.``, ``http2.``).
HEADERS_SENT = "send_request_headers.started"

#: A tokenize answer whose first key is its count (a JSON object's first key is one of its own, never a nested one).
_COUNT_FIRST = re.compile(rb'\s*\{\s*"count"\s*:\s*(\d+)\s*[,}]')


class SentClock:
    """When a request's headers went to the socket, from httpcore's trace events (``extensions={"trace": ...}``).

    A timed request's clock starts there, not when the client set out to send it: building and encoding the body
    (a long conversation's history), waiting for or opening a connection and, at many streams, the event loop's
    turn all come before, and the server's clock sees none of them. Taken just before the write, never after the
    server could have read them, so a TTFT is never shorter than the server's. ``at`` stays None if no event came.
    """

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, name: str, info: dict[str, Any]) -> None:
        if self.at is None and name.endswith(HEADERS_SENT):
            self.at = time.perf_counter()

    async def atrace(self, name: str, info: dict[str, Any]) -> None:
        """The same, for the async client."""
        self(name, info)


#: The option that named an endpoint -> a correct use of it, for a hint that the URL given there is wrong.
URL_EXAMPLES = {"--endpoint": "--endpoint=http://localhost:8000",
                "--specperf-ab": "--specperf-ab=http://a:8000,http://b:8000",
                "--specperf-arms": "--specperf-arms=off=http://a:8000,k2=http://b:8000"}


class Client:
    """One endpoint. Errors are MeasurementError with a one-line reason; the API key never appears in them."""

    def __init__(self, url: str, *, model: str | None = None, api_key: str | None = None, timeout: float = 60.0,
                 retries: int = 3, max_retry_wait: float = 30.0, kind: str | None = None,
                 source: str = "--endpoint") -> None:
        base, params = request_parts(url)
        # Requests go to the real URL (its user:password as Basic auth, its query on every request); ``url`` is
        # the form every message, result and report shows, its credentials and query values masked.
        self.base_url = base.rstrip("/")
        self.params = params
        parts = urlsplit(url)
        self.url = redact_url(urlunsplit(parts._replace(path=parts.path.rstrip("/"))))
        self.source = source  # the option that named this URL (--endpoint, --specperf-ab, ...), for its hints
        self.model = model
        self.timeout = timeout
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self._api_key = api_key
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.base_url, params=params, headers=headers,
                                 timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)), verify=tls())
        # token counts (hundreds per prompt build) on a lighter path where it sends the same request
        self._light = LightPost(self.base_url, params, headers, timeout, min(timeout, 10.0), tls())
        self.info: ServerInfo | None = None
        self._forced_kind = kind
        # Every request's prefill uncached unless it names a salt (``body``); False while a case asks for a warm cache.
        self.cold = True
        self._salts: set[str] = set()  # salts sent so far (llama.cpp: a salt's later requests may reuse its cache)

    def async_http(self, **kw: Any) -> httpx.AsyncClient:
        """An async client for the same endpoint: the real base URL, its query on every request, the same headers."""
        kw.setdefault("verify", tls())
        if capture.enabled():  # the transport is built here, so it takes the limits the client would have
            limits = kw.get("limits") or httpx.Limits(max_connections=100, max_keepalive_connections=20)
            kw["transport"] = capture.transport(kw["verify"], limits)
        return httpx.AsyncClient(base_url=self.base_url, params=self.params, headers=dict(self.http.headers), **kw)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()
        self._light.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors ---------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        # masked before any cut to length (``shorten``): a cut inside a password or key would leave its start
        text = redact_text(text)  # a URL an exception names (httpx's own messages) shows as ``url`` does
        return text.replace(self._api_key, "***") if self._api_key else text

    def fail(self, message: str) -> MeasurementError:
        """The error to raise for ``message``, with the API key redacted."""
        return MeasurementError(self._redact(message))

    def _down(self, exc: Exception) -> MeasurementError:
        said = shorten(self._redact(str(exc)), 60)
        return self.fail(f"endpoint {self.url} is down ({said}): start the server or fix {self.source}")

    @property
    def retry_policy(self) -> RetryPolicy:
        """How transient refusals are retried (read per call: a rate case turns retries off for its run)."""
        return RetryPolicy(self.retries, self.max_retry_wait)

    @contextmanager
    def named_errors(self, method: str, path: str) -> Iterator[float]:
        """Turn a failed send into its one-line error; yields the send's start time."""
        t0 = time.perf_counter()
        try:
            yield t0
        except httpx.ConnectError as exc:
            raise self._down(exc) from None
        except httpx.ConnectTimeout:
            # not the answer's timeout: a server whose accept queue is full (thousands of streams at once) drops the
            # connection attempts it cannot queue, and the client gives up on connecting first
            raise self.fail(f"{method} {path}: {self.url} accepted no connection in time (its listen backlog "
                            "full, or the host unreachable): send fewer streams at once to it, or raise its backlog"
                            ) from None
        except httpx.TimeoutException:
            raise self.fail(f"{method} {path} got no response headers within {self.timeout:g} s "
                             "(raise --specperf-timeout if the server is just slow)") from None
        except httpx.HTTPError as exc:  # cut mid-answer: the same named error as a cut stream
            raise self._cut(method, path, time.perf_counter() - t0, exc) from None

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """Send with bounded retries on transient refusals (honouring Retry-After); connection errors are named."""
        return self._timed_request(method, path, **kw)[0]

    def _timed_request(self, method: str, path: str, **kw: Any) -> tuple[httpx.Response, float]:
        """As _request, plus the duration of the last attempt alone (retry waits are not measured)."""
        def send() -> tuple[httpx.Response, float]:
            with self.named_errors(method, path) as t0:
                resp = self.http.request(method, path, **kw)
                return resp, time.perf_counter() - t0
        return self.retry_policy.call(send)

    def _post_json(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """``_request("POST", path, json=body)``, on ``LightPost`` where it applies (a token count's path)."""
        if not self._light.usable:
            return self._request("POST", path, json=body)
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

        def send() -> tuple[httpx.Response, float]:
            with self.named_errors("POST", path) as t0:
                return self._light.post(path, data), t0
        return self.retry_policy.call(send)[0]

    def _cut(self, method: str, path: str, after_s: float, exc: Exception) -> MeasurementError:
        return self.fail(f"server closed the connection after {after_s:.1f} s without a complete answer to "
                          f"{method} {path} ({shorten(self._redact(str(exc) or type(exc).__name__), 60)})")

    def check_status(self, resp: httpx.Response, what: str) -> None:
        """Raise the named one-line error for a non-200 answer to ``what``, with the fix it suggests."""
        if resp.status_code == 200:
            return
        try:
            body = resp.json()
            msg = body.get("error", body) if isinstance(body, dict) else body
            if isinstance(msg, dict):
                msg = msg.get("message", msg)
        except ValueError:
            msg = resp.text
        hint = ""
        if resp.status_code in RETRY_STATUSES:
            hint = f" after {self.retries} retries; the server is overloaded or still loading, retry later"
        elif resp.status_code == 404 and what == "GET /v1/models":  # the URL is not an OpenAI-compatible server's base
            extra = " (drop the /v1 at its end: the plugin adds it)" if self.url.endswith("/v1") else ""
            named = self.source if self.source == "--endpoint" else f"this {self.source} URL"  # A/B, arms: one of N
            example = URL_EXAMPLES.get(self.source, f"{self.source}=http://localhost:8000")
            hint = f"; is {named} the server's base URL{extra}? It should answer GET /v1/models, e.g. {example}"
        elif resp.status_code == 404 and self.model:
            hint = f"; is model {self.model!r} served there? (check --model)"
        elif resp.status_code == 401:
            hint = "; set the API key in the variable --api-key-env names"
        said = shorten(self._redact(str(msg)), 100)
        raise self.fail(f"{what}: HTTP {resp.status_code} from {self.url}{hint}: {said}")

    # -- discovery ------------------------------------------------------------------------------

    def detect(self) -> ServerInfo:
        """Find the server kind and served models; check --model against them."""
        resp = self._request("GET", "/v1/models")
        self.check_status(resp, "GET /v1/models")
        try:
            body = resp.json()
        except ValueError:
            raise self.fail(f"GET /v1/models on {self.url} is not JSON: {shorten(self._redact(resp.text), 80)}; "
                             "is this an OpenAI-compatible server?") from None
        kind, models = kind_from_models(body)
        details: dict[str, Any] = {}
        if self._forced_kind:
            kind = self._forced_kind
        if kind is None:
            kind = self._probe_kind(details)
        if self.model is None:
            if not models:
                raise self.fail(f"{self.url} lists no models at /v1/models; pass --model")
            self.model = models[0]
        elif models and self.model not in models:
            raise self.fail(f"model {self.model!r} is not served by {self.url}; it serves {', '.join(models)} "
                             f"(fix --model)")
        limit, source = self._context_limit(body, kind)
        details.setdefault("version", self._server_version(kind))
        self.info = ServerInfo(kind=kind, models=models, caps=CAPABILITIES[kind], details=details,
                               max_context=limit, context_source=source)
        return self.info

    def _server_version(self, kind: str) -> str | None:
        """The server's own version string where it shows one (saved with runs: baselines must match it)."""
        path, key = VERSION_ROUTES.get(kind, (None, None))
        if path is None:
            return None
        try:
            resp = self.http.get(path)
            body = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        value = body.get(key) if isinstance(body, dict) else None
        return str(value) if value else None

    def _context_limit(self, models_body: Any, kind: str) -> tuple[int | None, str]:
        """The context one request may use, as advertised: llama.cpp's per-slot ``n_ctx`` in /props, else
        ``max_model_len`` (or ``meta.n_ctx``) in /v1/models; (None, "") when the server does not say."""
        if kind == "llamacpp":
            try:
                resp = self.http.get("/props")
                props = resp.json() if resp.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                props = None
            settings = props.get("default_generation_settings") if isinstance(props, dict) else None
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
                return n_ctx, "n_ctx in /props"
        limit = context_from_models(models_body, self.model)
        return (limit, "max_model_len in /v1/models") if limit else (None, "")

    def _probe_kind(self, details: dict[str, Any]) -> str:
        for path, kind, key in (("/info", "tgi", "model_id"), ("/api/version", "ollama", "version")):
            try:
                resp = self.http.get(path)
                body = resp.json() if resp.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                continue
            if isinstance(body, dict) and key in body:
                details[key] = body[key]
                return kind
        return "openai"

    @property
    def caps(self) -> Capabilities:
        """Capabilities of the detected server (detects on first use)."""
        return (self.info or self.detect()).caps

    @property
    def kind(self) -> str:
        """Detected server kind."""
        return (self.info or self.detect()).kind

    # -- tokens ---------------------------------------------------------------------------------

    def count_tokens(self, text: str, api: str = "completions") -> int:
        """Prompt tokens of ``text`` as the server counts it when sent on ``api`` (special tokens and,
        for chat, the chat template included)."""
        if api == "chat":
            return self._count_chat(text)
        if self.caps.tokenize is None:
            # No tokenize route (Ollama, plain OpenAI): the server's own count from a 1-token request.
            return self._usage_prompt_tokens(text, api)
        return self._tokenize(text, special=True)

    def _usage_prompt_tokens(self, text: str, api: str) -> int:
        usage = self.complete(text, 1, api=api).usage
        if "prompt_tokens" not in usage:
            raise self.fail(f"{self.kind} server at {self.url} reports no usage.prompt_tokens and cannot count "
                             f"a {api} prompt otherwise; exact ctx cannot be built there")
        return int(usage["prompt_tokens"])

    def _count_chat(self, text: str) -> int:
        """A one-message chat prompt's tokens, template included: the server's chat tokenize route where it
        has one (vLLM, SGLang: /tokenize with messages; llama.cpp: input_tokens), else a 1-token request."""
        messages = [{"role": "user", "content": text}]
        style = self.caps.tokenize
        if style in ("vllm", "sglang"):
            body: dict[str, Any] = {"messages": messages, "add_generation_prompt": True}
            if self.model:
                body["model"] = self.model
            resp = self._post_json("/v1/tokenize" if style == "sglang" else "/tokenize", body)
            out = _json_or_none(resp)
            if isinstance(out, dict) and isinstance(out.get("count"), int):
                return int(out["count"])
        elif style == "llamacpp":
            resp = self._post_json("/v1/chat/completions/input_tokens", {"messages": messages})
            out = _json_or_none(resp)
            if isinstance(out, dict) and isinstance(out.get("input_tokens"), int):
                return int(out["input_tokens"])
        return self._usage_prompt_tokens(text, "chat")

    def _tokenize(self, text: str, *, special: bool) -> int:
        """Token count from the server's tokenize route (``special``: count BOS and the like as a prompt does)."""
        style = self.caps.tokenize
        if style == "llamacpp":
            resp = self._post_json("/tokenize", {"content": text, "add_special": special})
        elif style == "tgi":
            resp = self._post_json("/tokenize", {"inputs": text})
        else:
            body: dict[str, Any] = {"prompt": text, "add_special_tokens": special}
            if self.model:
                body["model"] = self.model
            resp = self._post_json("/v1/tokenize" if style == "sglang" else "/tokenize", body)
        self.check_status(resp, "POST /tokenize")
        # vLLM and SGLang answer the count first, then every token id: read the count alone (parsing the ids of a
        # long prompt took as long as the rest of the request, and a trace's prompts are counted hundreds of times).
        first = _COUNT_FIRST.match(resp.content)
        if first is not None:
            return int(first.group(1))
        out = resp.json()
        if isinstance(out, list):  # TGI: one entry per token
            return len(out)
        return int(out["count"]) if "count" in out else len(out["tokens"])

    # -- requests -------------------------------------------------------------------------------

    def body(self, prompt: str, max_tokens: int, api: str, stream: bool, seed: int,
             temperature: float, messages: Sequence[Mapping[str, str]] | None = None, *,
             salt: str | None = None) -> tuple[str, dict[str, Any]]:
        """The path and JSON body of one request; chat sends ``messages`` (a conversation) when given.

        ``salt`` is the request's prefix-cache namespace: it may reuse only what earlier requests of the same
        salt left in the cache (a session's turns, two-point's pair). None: a fresh one while ``cold`` (every
        request's prefill uncached, the default), none at all otherwise. Sent as ``cache_salt`` (vLLM) or as
        ``cache_prompt: false`` on a salt's first request (llama.cpp); other servers get the tag in the prompt.
        """
        caps = self.caps
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                                "stream": stream}
        if api == "chat":
            path = "/v1/chat/completions"
            body["messages"] = ([dict(m) for m in messages] if messages is not None
                                else [{"role": "user", "content": prompt}])
        else:
            path = "/v1/completions"
            body["prompt"] = prompt
        if caps.ignore_eos:
            body["ignore_eos"] = True
        if caps.min_tokens:
            body["min_tokens"] = max_tokens
        if caps.spec_details:
            body["return_spec_tokens_details"] = True
        fresh = salt is None and self.cold
        if fresh:
            salt = cold_salt()
        if salt and caps.cold_by == "cache_salt":
            body["cache_salt"] = salt
        elif salt and caps.cold_by == "cache_prompt":
            body["cache_prompt"] = salt in self._salts
            if not fresh:  # a fresh salt is never sent again: remembering it would grow by one per request
                self._salts.add(salt)
        if stream:
            body["stream_options"] = {"include_usage": True}
            if caps.continuous_usage:
                body["stream_options"]["continuous_usage_stats"] = True
            if caps.timings_per_token:
                body["timings_per_token"] = True
        return path, body

    def complete(self, prompt: str, max_tokens: int, *, api: str = "completions", seed: int = 0,
                 temperature: float = 0.0, headers: dict[str, str] | None = None, salt: str | None = None
                 ) -> Completion:
        """One non-streamed completion, timed from send to full response (retries not timed)."""
        path, body = self.body(prompt, max_tokens, api, False, seed, temperature, salt=salt)
        resp, elapsed = self._timed_request("POST", path, json=body, headers=headers)
        self.check_status(resp, f"POST {path}")
        try:
            out = resp.json()
        except ValueError:
            raise self.fail(f"POST {path} answered non-JSON: {shorten(self._redact(resp.text), 80)}") from None
        choices = out.get("choices") or [{}]
        return Completion(elapsed, out.get("usage") or {}, choices[0].get("finish_reason"), out)

    @contextmanager
    def _open_stream(self, path: str, body: dict[str, Any],
                     headers: dict[str, str] | None) -> Iterator[tuple[httpx.Response, float]]:
        """The accepted stream's response and its send time (refusals retried, other statuses named)."""
        def send() -> tuple[httpx.Response, float]:
            with self.named_errors("POST", path) as t0:
                sent = SentClock()
                request = self.http.build_request("POST", path, json=body, headers=headers,
                                                  extensions={"trace": sent})
                resp = self.http.send(request, stream=True)
                if resp.status_code != 200:
                    resp.read()
                    resp.close()
                return resp, t0 if sent.at is None else sent.at
        resp, t0 = self.retry_policy.call(send)
        self.check_status(resp, f"POST {path}")
        try:
            yield resp, t0
        finally:
            resp.close()

    def stream(self, prompt: str, max_tokens: int, *, api: str = "completions", seed: int = 0,
               temperature: float = 0.0, headers: dict[str, str] | None = None,
               on_progress: Progress | None = None, messages: Sequence[Mapping[str, str]] | None = None,
               salt: str | None = None) -> Trace:
        """One streamed completion; timestamps are taken as each SSE event is read (chat: ``messages`` if given)."""
        path, body = self.body(prompt, max_tokens, api, True, seed, temperature, messages, salt=salt)
        trace = TraceBuilder(self.caps, self.fail)
        last_progress = 0.0
        with self._open_stream(path, body, headers) as (resp, t0):
            self.check_event_stream(resp, path)
            clock = time.perf_counter
            # Each network read is stamped as it is pulled, before its events are split and parsed, so
            # parsing never delays a timestamp (events that came in one read share its time).
            reads = ((clock() - t0, raw) for raw in resp.iter_bytes())
            try:
                with paused_gc():
                    for t, data in split_events(reads):
                        if trace.feed(t, data):
                            break
                        if on_progress and trace.chunks and t - last_progress > 0.5:
                            last_progress = t
                            on_progress(trace.tokens, t - trace.chunks[0].t)
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                raise self.cut(trace.tokens, exc) from None
            except httpx.TimeoutException:
                raise self.stalled(trace.tokens) from None
            total = time.perf_counter() - t0
        return trace.finish(total, t0, self.count_text_chunks)

    def check_event_stream(self, resp: httpx.Response, path: str) -> None:
        """Raise if an accepted stream is not Server-Sent Events (a proxy's HTML page, plain JSON)."""
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            said = shorten(self._redact(ctype), 40)
            raise self.fail(f"POST {path} did not answer with an event stream: content-type {said!r}")

    def cut(self, tokens: int, exc: Exception) -> MeasurementError:
        """The error for a stream the connection dropped."""
        return self.fail(f"stream cut after {tokens} tokens: {shorten(self._redact(str(exc)), 80)}")

    def stalled(self, tokens: int) -> MeasurementError:
        """The error for a stream that sent nothing for the read timeout."""
        return self.fail(f"stalled: no data for {self.timeout:g} s after {tokens} tokens "
                          f"(--specperf-timeout={self.timeout:g})")

    def count_text_chunks(self, chunks: list[Chunk]) -> None:
        """Fallback: tokenize each chunk's text (approximate at chunk seams), or 1 token per chunk."""
        can_tokenize = self.caps.tokenize is not None
        for c in chunks:
            if c.tokens == -1:
                c.tokens = max(1, self._tokenize(c.text, special=False)) if can_tokenize else 1

    def metrics_text(self) -> str | None:
        """The Prometheus text at /metrics, or None if the server has none."""
        try:
            resp = self.http.get("/metrics")
        except httpx.HTTPError:
            return None
        return resp.text if resp.status_code == 200 else None


def _json_or_none(resp: httpx.Response) -> Any:
    """A 200 response's JSON body, else None (the caller falls back to another way)."""
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None
