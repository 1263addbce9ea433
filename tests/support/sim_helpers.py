"""Helpers for the simulator's tests: stream collection and exact per-chunk token counts."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource


@dataclass
class Stream:
    """What a client saw of one SSE response."""

    status: int
    headers: dict[str, str]
    events: list[dict[str, Any]] = field(default_factory=list)  # parsed data events, in order
    times: list[float] = field(default_factory=list)  # monotonic receive time of each event
    malformed: list[str] = field(default_factory=list)
    done: bool = False  # saw data: [DONE]
    error: str = ""  # transport error that ended the stream early
    body: str = ""  # non-SSE body (errors)

    @property
    def id(self) -> str:
        return next(e["id"] for e in self.events if "id" in e)

    def usage(self) -> dict[str, Any] | None:
        last = [e for e in self.events if e.get("usage")]
        return last[-1]["usage"] if last else None


def stream(c: httpx.Client, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Stream:
    """POST with stream=True and collect every event with its receive time."""
    out = Stream(0, {})
    try:
        with c.stream("POST", path, json={**body, "stream": True}, headers=headers or {}) as resp:
            out.status = resp.status_code
            out.headers = dict(resp.headers)
            if resp.status_code != 200:
                resp.read()
                out.body = resp.text
                return out
            for sse in EventSource(resp).iter_sse():
                now = time.monotonic()
                data = sse.data
                if data == "[DONE]":
                    out.done = True
                    continue
                try:
                    out.events.append(json.loads(data))
                    out.times.append(now)
                except json.JSONDecodeError:
                    out.malformed.append(data)
    except httpx.TransportError as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    return out


def chunk_tokens(dialect: str, ev: dict[str, Any], prev_cumulative: int) -> tuple[int, int]:
    """Tokens in one event by the dialect's exact per-chunk count; returns (tokens, cumulative)."""
    if dialect == "llamacpp":
        cum = ev.get("timings", {}).get("predicted_n", prev_cumulative) if ev.get("choices") else prev_cumulative
        return cum - prev_cumulative, cum
    if not ev.get("choices"):
        return 0, prev_cumulative
    cum = ev["usage"]["completion_tokens"] if ev.get("usage") else prev_cumulative
    return cum - prev_cumulative, cum


def stream_body(dialect: str, **extra: Any) -> dict[str, Any]:
    """A streamed request body asking for exact per-chunk counts in the dialect's own way."""
    body: dict[str, Any] = {"ignore_eos": True, **extra}
    if dialect == "llamacpp":
        body["timings_per_token"] = True
    elif dialect == "sglang":
        body["stream_options"] = {"continuous_usage_stats": True}
    else:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return body


async def _stream_id(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> str:
    """Stream one completion to its end; return its response id."""
    rid = ""
    async with client.stream("POST", path, json={**body, "stream": True}) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if not rid and line.startswith("data: {"):
                rid = json.loads(line[6:])["id"]
    return rid


def concurrent_streams(url: str, bodies: list[dict[str, Any]], path: str = "/v1/completions") -> list[str]:
    """Start every body's stream at once (one asyncio client) and read all to the end; their ids in order."""

    async def run() -> list[str]:
        limits = httpx.Limits(max_connections=len(bodies) + 4)
        async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as client:
            return list(await asyncio.gather(*(_stream_id(client, path, b) for b in bodies)))

    return asyncio.run(run())


def user_decode_tps(truth: dict[str, Any], speed: float) -> float:
    """A request's decode rate (tok/s at speed 1) on the model's own schedule: tokens after the first over the time."""
    steps = truth["steps"]
    span = steps[-1]["intended_t_s"] - steps[0]["intended_t_s"]
    return (truth["completion_tokens"] - steps[0]["tokens"]) / span / speed
