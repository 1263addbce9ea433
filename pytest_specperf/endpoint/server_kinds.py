"""Server kinds and what each supports (docs/servers.md); detection from /v1/models and probes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("vllm", "sglang", "llamacpp", "tgi", "ollama", "openai")


@dataclass(frozen=True)
class Capabilities:
    """What a server kind accepts and exposes; drives request bodies and token accounting."""

    ignore_eos: bool = False
    min_tokens: bool = False
    continuous_usage: bool = False  # per-chunk cumulative usage.completion_tokens
    timings_per_token: bool = False  # llama.cpp: per-chunk timings.predicted_n
    tokenize: str | None = None  # route style: "vllm" | "sglang" | "llamacpp" | "tgi"
    metrics: bool = False  # Prometheus /metrics with spec-decode series
    step_chunks: bool = False  # one SSE chunk per engine step (chunk size = tokens accepted in the step)
    spec_details: bool = False  # SGLang: per-request draft counts on request (return_spec_tokens_details)
    # How a request keeps its prefill out of the prefix cache with its prompt unchanged (Client.body): "cache_salt"
    # (vLLM: a salt chained into the block hashes), "cache_prompt" (llama.cpp: cache_prompt false), or None
    # (the prompt itself then opens with a fresh tag, prompts/cold.py)
    cold_by: str | None = None


CAPABILITIES: dict[str, Capabilities] = {
    "vllm": Capabilities(ignore_eos=True, min_tokens=True, continuous_usage=True, tokenize="vllm", metrics=True,
                         step_chunks=True, cold_by="cache_salt"),
    "sglang": Capabilities(ignore_eos=True, min_tokens=True, continuous_usage=True, tokenize="sglang", metrics=True,
                           step_chunks=True, spec_details=True),
    "llamacpp": Capabilities(ignore_eos=True, timings_per_token=True, tokenize="llamacpp", metrics=True,
                             cold_by="cache_prompt"),
    "tgi": Capabilities(tokenize="tgi", metrics=True),
    "ollama": Capabilities(),
    "openai": Capabilities(),
}


@dataclass(frozen=True)
class ServerInfo:
    """The detected server behind an endpoint."""

    kind: str
    models: tuple[str, ...]
    caps: Capabilities
    details: dict[str, Any] = field(default_factory=dict)
    max_context: int | None = None  # tokens of context per request, as the server advertises it
    context_source: str = ""  # where max_context was read, e.g. "max_model_len in /v1/models"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for reports."""
        return {"kind": self.kind, "models": list(self.models), "details": self.details,
                "max_context": self.max_context,
                "supports": {k: v for k, v in self.caps.__dict__.items()}}


def kind_from_models(body: Any) -> tuple[str | None, tuple[str, ...]]:
    """Read (kind from owned_by, model ids) out of a /v1/models body; kind is None when not telling."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None, ()
    ids = tuple(str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id") is not None)
    owners = {str(m.get("owned_by", "")).lower() for m in data if isinstance(m, dict)}
    for kind in ("vllm", "sglang", "llamacpp"):
        if kind in owners:
            return kind, ids
    return None, ids


def context_from_models(body: Any, model: str | None) -> int | None:
    """The served model's context length from a /v1/models body: ``max_model_len`` (vLLM, SGLang) or
    llama.cpp's ``meta.n_ctx``; None when the body does not say."""
    data = body.get("data") if isinstance(body, dict) else None
    for card in data if isinstance(data, list) else []:
        if not isinstance(card, dict) or (model is not None and card.get("id") != model):
            continue
        meta = m if isinstance(m := card.get("meta"), dict) else {}
        for value in (card.get("max_model_len"), meta.get("n_ctx")):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None
