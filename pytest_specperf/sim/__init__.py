"""The embedded speculative-decoding simulator: a real OpenAI-compatible HTTP server that knows its true rates.

Start one::

    python -m pytest_specperf.sim --profile seed --port 0 --speed 10 [--set KEY=VALUE] [--dialect D]
    specperf-sim ...                       # the same; prints "specperf-sim listening on URL (...)"

    with SimServer("healthy", speed=20, overrides={"dialect": "llamacpp"}) as sim:
        sim.url            # "http://127.0.0.1:PORT" (no /v1)
        sim.model          # served model name, profile key ``model`` (default "specperf-sim")
        sim.truth(rid)     # the GET /sim/truth/{rid} record; KeyError when unknown
        sim.requests()     # GET /sim/truth: every kept record without steps, oldest first
        sim.reset()        # POST /sim/reset: fault counters (and truth with truth=True)

``SimServer(profile="healthy", *, speed=1.0, port=0, host="127.0.0.1", in_process=False,
overrides=None, startup_timeout=30.0)``: a child process by default (its timing does not share
the client's GIL), a thread with its own event loop with ``in_process=True``; ``start()`` waits
until ``/health`` is 200 and raises ``SimStartError`` with the child's stderr tail otherwise;
``start_all(servers)`` boots several children in parallel. A bad profile raises ``ProfileError``
before anything starts.

Profiles (``profile.py``; built in: healthy, seed, fragmenting, acceptance-collapse, batching;
or a YAML file) set the cost model (``model.py``), the dialect and faults. Concurrent requests
share decode steps (continuous batching, ``batch.py``): a step costs more with more sequences,
more context and more verified drafts; ``speculation: false`` gives a profile's twin without
speculative decoding, and ``batch.simulate`` gives a profile's answer for given arrivals. ``--speed X`` divides every
time (prefill, steps, stalls, first_byte) by X, so every rate scales by exactly X.

Routes (all dialects): ``POST /v1/completions``, ``POST /v1/chat/completions`` (stream and
not; ``max_tokens``, ``max_completion_tokens`` (chat), ``ignore_eos``, ``min_tokens``,
``temperature``, ``seed``, ``stream_options.include_usage`` / ``continuous_usage_stats``,
``return_token_ids``; ``data: [DONE]`` ends a stream), ``GET /v1/models`` (``owned_by`` = dialect),
``GET /health``, ``POST /tokenize``, ``POST /detokenize``, ``GET /metrics``, and the
simulator's own ``GET /sim/truth/{id}``, ``GET /sim/truth`` (all records, no steps),
``POST /sim/reset``, ``GET /sim/info``.
Bad JSON or fields: 400 with a message; a ``model`` other than the served one: 404 (vllm,
sglang; llama.cpp ignores the name as llama-server does).

Dialects (``dialect`` profile key), as the real servers behave (docs/servers.md):

- vllm: one SSE chunk per engine step with all its tokens. Exact per-chunk counts:
  ``return_token_ids`` -> ``choices[0].token_ids``, or ``stream_options: {include_usage: true,
  continuous_usage_stats: true}`` -> cumulative ``usage.completion_tokens`` on every chunk.
  Chat's first chunk is the role chunk (no tokens). Reasoning delta key ``reasoning``.
  ``/tokenize`` ``{"prompt", "add_special_tokens": true}`` or ``{"messages"}`` ->
  ``{"count", "max_model_len", "tokens", "token_strs"}``; ``/detokenize`` -> ``{"prompt"}``;
  ``/health`` empty 200. Metrics ``vllm:spec_decode_*`` updated every step. The null-valued fields
  vLLM 0.32 writes are there (``stop_reason``, ``token_ids``, ...); the final usage chunk has
  ``system_fingerprint`` and, with profile ``spec_metrics: true``, ``metrics.speculative_decoding``;
  ``max_tokens`` past the context is shortened to fit, a prompt past it is a 400 (``input_tokens``).
- sglang: chunks per step as vllm; ``continuous_usage_stats`` works without include_usage;
  ``return_token_ids`` on completions (rejected with chat + stream, 400). Reasoning key
  ``reasoning_content``. ``/tokenize`` and ``/v1/tokenize`` -> ``{"tokens", "count",
  "max_model_len"}``; ``/detokenize`` -> ``{"text"}``. Metrics: ``sglang:spec_accept_length`` /
  ``spec_accept_rate`` gauges (window of 40 steps), ``sglang:spec_verify_calls_total`` and
  ``sglang:generation_tokens_total`` per finished request; ``/server_info``, ``/model_info``.
  ``"return_spec_tokens_details": true`` -> ``sglext.spec_tokens_details`` (``spec_verify_ct``,
  ``spec_num_correct_drafts``, ``spec_num_proposed_drafts``, histogram): streamed as an extra
  chunk with ``choices: []`` before the usage chunk.
- llamacpp: one SSE event per token (a step's tokens go out as one burst); per-chunk
  counts with ``"timings_per_token": true`` -> cumulative ``timings.predicted_n``; ``n_predict``
  aliases ``max_tokens``; no ``min_tokens`` (ignored); include_usage for chat only, completions'
  final chunk always has ``usage``; ``timings`` (with ``draft_n``, ``draft_n_accepted``) on the
  last event and non-streamed bodies. ``/tokenize`` ``{"content", "add_special": false,
  "with_pieces"}`` -> ``{"tokens"}``; ``/detokenize`` -> ``{"content"}``; ``/health`` ->
  ``{"status": "ok"}``; ``/props``, ``/apply-template``, ``/v1/chat/completions/input_tokens``.
  Metrics ``llamacpp:*`` folded in when a request finishes.

Tokens (``tokenizer.py``): ``usage.prompt_tokens`` counts one BOS. Completions: BOS + text;
``/tokenize`` gives the same count with vLLM/SGLang defaults (``add_special_tokens: true``) and
with llama.cpp ``"add_special": true`` (its default false leaves the BOS out, as llama-server
does). Chat: the ChatML template (``<s><|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n``)
already holds the BOS; ``/tokenize`` with ``messages`` (vLLM/SGLang) or llama.cpp's
``/v1/chat/completions/input_tokens`` give the same count.

Reasoning and prefix cache (``profile.py``, ``prefix_cache.py``): ``reasoning_tokens`` sends a
chat's first N tokens as reasoning (``reasoning_kind`` and ``reasoning_step_ms`` give the phase its
own acceptance and step cost); ``prefix_cache_tokens`` keeps prompts and outputs (LRU blocks of
``prefix_cache_block``; on by default, as vLLM's automatic prefix caching: 262144 tokens, blocks of
16) so cached prompt tokens skip their prefill, reported as each dialect does
(``cache_report`` for vLLM/SGLang, always for llama.cpp). See docs/simulator.md.

Content kind (``content.py``): ``classify(prompt text)`` picks prose / code / reasoning /
repetitive, which sets the mean acceptance of the request.

Faults (``faults.py``): header ``X-Specperf-Fault`` or profile key ``faults``, e.g.
``X-Specperf-Fault: stall=2.0@100, malformed@40, key=t1``; items ``stall=S@N``,
``disconnect@N``, ``malformed@N``, ``status=CODE*K`` (with ``retry_after=S`` or ``retry_date=S``),
``first_byte=S`` (``first_byte=S*K``: the first K answered only; ``S*K%N``: the first K of every N),
``key=NAME`` (scope of the status counter); reset counters with ``POST /sim/reset``.

Truth (``truth.py``): per response id, the real write time of every step relative to arrival
(when the request's first bytes reached the socket, ``arrival.py``),
its intended time and step_ms, its tokens, accepted and drafted counts, and the shared step it
belonged to (step number, batch size, tokens verified, context attended). The first step is the
prefill (1 token); a non-streamed response's steps are timed when computed, the body goes out
after the last.

Defaults a client should know: completions ``max_tokens`` defaults to 16 (vLLM, SGLang);
chat, and llama.cpp, default to the rest of the context (``max_model_len`` 262144), so always
send ``max_tokens``. Without ``eos_after_tokens`` in the profile the model never stops early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_specperf.sim.content import classify
from pytest_specperf.sim.faults import HEADER as FAULT_HEADER
from pytest_specperf.sim.faults import FaultError, parse_faults
from pytest_specperf.sim.profile import Profile, ProfileError, builtin_profiles, load_profile
from pytest_specperf.sim.tokenizer import detokenize, tokenize

if TYPE_CHECKING:
    from pytest_specperf.sim.launcher import SimServer, SimStartError, start_all


def __getattr__(name: str) -> Any:
    # the server side (aiohttp, httpx) loads only when asked for, so importing classify or
    # tokenize stays light
    if name in ("SimServer", "SimStartError", "start_all"):
        from pytest_specperf.sim import launcher as runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "FAULT_HEADER",
    "FaultError",
    "Profile",
    "ProfileError",
    "SimServer",
    "SimStartError",
    "builtin_profiles",
    "classify",
    "detokenize",
    "load_profile",
    "parse_faults",
    "start_all",
    "tokenize",
]
