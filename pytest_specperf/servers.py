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


CAPABILITIES: dict[str, Capabilities] = {
    "vllm": Capabilities(ignore_eos=True, min_tokens=True, continuous_usage=True, tokenize="vllm", metrics=True,
                         step_chunks=True),
    "sglang": Capabilities(ignore_eos=True, min_tokens=True, continuous_usage=True, tokenize="sglang", metrics=True,
                           step_chunks=True, spec_details=True),
    "llamacpp": Capabilities(ignore_eos=True, timings_per_token=True, tokenize="llamacpp", metrics=True),
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

    def as_dict(self) -> dict[str, Any]:
        """Plain data for reports."""
        return {"kind": self.kind, "models": list(self.models), "details": self.details,
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
