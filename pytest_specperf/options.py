"""Command-line options, their ini twins, and validation into Settings before anything runs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from .errors import ConfigError

# (option, ini name, help). Every option's default is None so the ini twin can fill it.
OPTIONS: list[tuple[tuple[str, ...], str, str]] = [
    (("--specperf-endpoint", "--endpoint"), "specperf_endpoint",
     "base URL of an OpenAI-compatible server to measure (vLLM, SGLang, llama.cpp, TGI, Ollama), "
     "e.g. http://host:8000; without it the embedded simulator runs"),
    (("--specperf-model", "--model"), "specperf_model", "model name to request (default: the first one served)"),
    (("--api-key-env", "--specperf-api-key-env"), "specperf_api_key_env",
     "name of the environment variable holding the API key (default SPECPERF_API_KEY, then OPENAI_API_KEY)"),
    (("--specperf-sim",), "specperf_sim",
     "embedded simulator profile when no endpoint is given: a built-in name (healthy, seed, fragmenting, "
     "acceptance-collapse) or a profile YAML file (default healthy)"),
    (("--specperf-sim-speed",), "specperf_sim_speed",
     "run the embedded simulator X times faster than real time; measured rates scale by X (default 1)"),
    (("--specperf-engine",), "specperf_engine",
     "start a local engine for the session instead of the simulator: llamacpp"),
    (("--specperf-engine-model",), "specperf_engine_model", "GGUF model for --specperf-engine (default SmolLM2-135M)"),
    (("--specperf-engine-preset",), "specperf_engine_preset",
     "speculation preset for --specperf-engine: ngram, self-draft or none (default ngram)"),
    (("--specperf-engine-args",), "specperf_engine_args", "extra arguments for the engine, as one shell-quoted string"),
    (("--specperf-timeout",), "specperf_timeout",
     "seconds without data before a request is an error (stall, no answer); default 60"),
    (("--specperf-json",), "specperf_json", "write every case's result fields to this JSON file (atomically)"),
    (("--specperf-max-drift",), "specperf_max_drift",
     "default maximum drift (1 - late/early decode rate) for sustained cases; default 0.15"),
]


@dataclass(frozen=True)
class Settings:
    """Validated settings for one pytest run."""

    endpoint: str | None
    model: str | None
    api_key_env: str | None
    sim: str
    sim_speed: float
    engine: str | None
    engine_model: Path | None
    engine_preset: str
    engine_args: tuple[str, ...]
    timeout: float
    json_path: Path | None
    max_drift: float

    @property
    def api_key(self) -> str | None:
        """The API key from the environment (never from the command line)."""
        names = [self.api_key_env] if self.api_key_env else ["SPECPERF_API_KEY", "OPENAI_API_KEY"]
        for name in names:
            if os.environ.get(name):
                return os.environ[name]
        return None


def add_options(parser: pytest.Parser) -> None:
    """Register options and ini twins."""
    group = parser.getgroup("specperf", "speculative-decoding performance cases (pytest-specperf)")
    for names, ini, help_text in OPTIONS:
        group.addoption(*names, dest=ini, default=None, help=help_text)
        parser.addini(ini, help_text, default=None)


def _raw(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name)
    if value is None:
        value = config.getini(name)
    return value if value not in ("", None, []) else None


def _number(config: pytest.Config, name: str, default: float, low: float, high: float | None = None) -> float:
    raw = _raw(config, name)
    if raw is None:
        return default
    flag = "--" + name.replace("_", "-")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{flag}={raw!r} is not a number; give e.g. {flag}={default:g}") from None
    if not (value > low and (high is None or value < high)):
        span = f"between {low:g} and {high:g}" if high is not None else f"greater than {low:g}"
        raise ConfigError(f"{flag}={raw} is out of range; it must be {span}")
    return value


def read_settings(config: pytest.Config) -> Settings:
    """Validate every option; a bad value raises ConfigError naming the option and the fix."""
    endpoint = _raw(config, "specperf_endpoint")
    if endpoint is not None:
        endpoint = str(endpoint).rstrip("/")
        parsed = urlparse(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"--endpoint={endpoint!r} is not an http(s) URL; give e.g. --endpoint=http://host:8000")
        if parsed.path.rstrip("/").endswith("/v1"):
            endpoint = endpoint[: -len("/v1")]  # users often paste the OpenAI base URL
    key_env = _raw(config, "specperf_api_key_env")
    if key_env is not None and not str(key_env).replace("_", "").isalnum():
        raise ConfigError(f"--api-key-env={key_env!r} must be the NAME of an environment variable, e.g. "
                          "--api-key-env=MY_KEY (never the key itself)")
    engine = _raw(config, "specperf_engine")
    if engine is not None and engine not in ("llamacpp",):
        raise ConfigError(f"--specperf-engine={engine!r} is not known; use --specperf-engine=llamacpp")
    if engine and endpoint:
        raise ConfigError("--specperf-engine and --endpoint both given; measure either a local engine or an "
                          "endpoint, drop one")
    preset = str(_raw(config, "specperf_engine_preset") or "ngram")
    if preset not in ("ngram", "self-draft", "none"):
        raise ConfigError(f"--specperf-engine-preset={preset!r} is not known; use ngram, self-draft or none")
    engine_model = _raw(config, "specperf_engine_model")
    if engine_model is not None and not Path(engine_model).is_file():
        raise ConfigError(f"--specperf-engine-model={engine_model}: no such file; give the path of a .gguf model")
    import shlex

    engine_args = tuple(shlex.split(str(_raw(config, "specperf_engine_args") or "")))
    sim = str(_raw(config, "specperf_sim") or "healthy")
    if sim.endswith((".yaml", ".yml")) and not Path(sim).is_file():
        raise ConfigError(f"--specperf-sim={sim}: no such profile file; give a built-in profile name or a YAML path")
    json_path = _raw(config, "specperf_json")
    if json_path is not None:
        json_path = Path(json_path)
        if json_path.is_dir():
            raise ConfigError(f"--specperf-json={json_path} is a directory; give a file path, e.g. results.json")
        if not json_path.parent.exists():
            raise ConfigError(f"--specperf-json={json_path}: folder {json_path.parent} does not exist; create it "
                              "or choose another path")
    return Settings(
        endpoint=endpoint,
        model=_raw(config, "specperf_model"),
        api_key_env=key_env,
        sim=sim,
        sim_speed=_number(config, "specperf_sim_speed", 1.0, 0.0),
        engine=engine,
        engine_model=Path(engine_model) if engine_model else None,
        engine_preset=preset,
        engine_args=engine_args,
        timeout=_number(config, "specperf_timeout", 60.0, 0.0),
        json_path=json_path,
        max_drift=_number(config, "specperf_max_drift", 0.15, 0.0, 1.0),
    )
