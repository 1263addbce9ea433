"""A gateway between the plugin and the server, as users put one: it forwards only the fields it knows."""

from __future__ import annotations

from typing import Any

from pytest_specperf.endpoint.client import Client


class SaltStrippingClient(Client):
    """A gateway that forwards only the fields it knows: vLLM's cache_salt never reaches the server."""

    def body(self, *args: Any, **kw: Any) -> tuple[str, dict[str, Any]]:
        path, body = super().body(*args, **kw)
        body.pop("cache_salt", None)
        return path, body
