"""The one TLS context every HTTP client of the package verifies with, built once per process.

httpx builds a new context for each client it makes (``verify=True``: the CA bundle read and parsed, 40 to 90 ms
of CPU), and a ``httpx.get`` is a client of its own: a test that reads the simulator's truth per request paid that
per request. The context is httpx's own default (certifi's bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), so
what is verified does not change; an ``ssl.SSLContext`` may serve many connections and threads at once.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's default verifying context, shared: pass it as ``verify=`` to every client."""
    return httpx.create_ssl_context()
