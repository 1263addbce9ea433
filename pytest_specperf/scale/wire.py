"""Requests, outcomes and the client's settings as JSON text: what crosses an execnet channel, both ways.

A worker's stamps stay on its own clock here (``Trace.t0``); ``outcome_from`` maps them onto the controller's by
the worker's measured offset. Times relative to the shared origin (``sent_s``) need no mapping: the origin is one
instant on both clocks.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import urlencode

from pytest_specperf.endpoint.client import Client
from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
from pytest_specperf.endpoint.sse import Chunk, Trace
from pytest_specperf.errors import MeasurementError


def client_fields(client: Client) -> dict[str, Any]:
    """What a worker needs to build the same client: the real base URL and query, key, model, limits, cold."""
    info = client.info or client.detect()
    query = f"?{urlencode(client.params)}" if client.params else ""
    return {"real_url": client.base_url + query, "url": client.url, "model": client.model,
            "api_key": client._api_key, "timeout": client.timeout, "retries": client.retries,
            "max_retry_wait": client.max_retry_wait, "kind": info.kind, "source": client.source,
            "cold": client.cold}


def client_from(fields: dict[str, Any]) -> Client:
    """The worker's client: requests go where the controller's go, errors show the same (redacted) URL."""
    client = Client(fields["real_url"], model=fields["model"], api_key=fields["api_key"], timeout=fields["timeout"],
                    retries=fields["retries"], max_retry_wait=fields["max_retry_wait"], kind=fields["kind"],
                    source=fields["source"])
    client.url = fields["url"]
    client.cold = fields["cold"]
    return client


def request_dict(r: StreamRequest) -> dict[str, Any]:
    """One request as plain data."""
    d = dataclasses.asdict(r)
    d["messages"] = None if r.messages is None else [dict(m) for m in r.messages]
    return d


def request_from(d: dict[str, Any]) -> StreamRequest:
    """A request back from ``request_dict``."""
    msgs = d.pop("messages")
    return StreamRequest(**d, messages=None if msgs is None else tuple(msgs))


def outcome_dict(o: StreamOutcome) -> dict[str, Any]:
    """One outcome as plain data, its trace's stamps on the worker's clock."""
    t = o.trace
    trace = None if t is None else {
        "chunks": [[c.t, c.tokens, c.text, c.reasoning] for c in t.chunks], "total_s": t.total_s, "usage": t.usage,
        "finish_reason": t.finish_reason, "response_id": t.response_id, "count_source": t.count_source,
        "exact": t.exact, "timings": t.timings, "extras": t.extras, "t0": t.t0}
    return {"trace": trace, "error": None if o.error is None else str(o.error), "sent_s": o.sent_s,
            "origin": o.origin, "user": o.user, "starved_s": o.starved_s}


def outcome_from(d: dict[str, Any], request: StreamRequest, offset_s: float, origin: float) -> StreamOutcome:
    """An outcome on the controller's clock: the worker's ``t0`` less its offset; ``origin`` the controller's."""
    t = d["trace"]
    trace = None if t is None else Trace(
        chunks=[Chunk(c[0], c[1], c[2], c[3]) for c in t["chunks"]], total_s=t["total_s"], usage=t["usage"],
        finish_reason=t["finish_reason"], response_id=t["response_id"], count_source=t["count_source"],
        exact=t["exact"], timings=t["timings"], extras=t["extras"], t0=t["t0"] - offset_s)
    error = None if d["error"] is None else MeasurementError(d["error"])
    return StreamOutcome(request, trace, error, d["sent_s"], origin, d["user"], d.get("starved_s"))


def dumps(data: Any) -> str:
    """JSON text (NaN kept: Python reads it back)."""
    return json.dumps(data)


def loads(text: str) -> Any:
    """Data back from ``dumps``."""
    return json.loads(text)
