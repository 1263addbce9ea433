"""Small JSON POSTs on the standard library's ``http.client``, for the hundreds of token counts a prompt build makes.

A replay's prompts take about five counts of the server's tokenizer per row (800 for 162 rows). Through httpx's
sync client each took 1.0 ms of the client's CPU against 0.25 ms through ``http.client`` on a kept-open connection
(the same 11-token count against the simulator, 300 times each), and the build's whole CPU fell from 1.9 s to 0.85
s. So these counts go this way where nothing httpx would add applies: no proxy from the environment and no
``user:password`` in the URL (there httpx's proxying and Basic auth are kept). The answer is handed back as an
``httpx.Response`` and failures as httpx's exceptions, so status checks, retries and named errors are the same.

Each thread keeps its own connection (``http.client`` connections are not shared between threads), closed when
the thread ends or :meth:`LightPost.close` is called.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.request
import weakref
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

import httpx


class _Held:
    """One thread's connection, closed when the thread ends and drops it."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn

    def __del__(self) -> None:
        self.conn.close()


class LightPost:
    """JSON POSTs to one base URL over a kept-open ``http.client`` connection per thread."""

    def __init__(self, base_url: str, params: tuple[tuple[str, str], ...], headers: Mapping[str, str],
                 timeout: float, connect_timeout: float, context: ssl.SSLContext | None) -> None:
        parts = urlsplit(base_url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname or "localhost", parts.port
        self.prefix = parts.path.rstrip("/")
        self.query = f"?{urlencode(params)}" if params else ""
        self.headers = {**headers, "Content-Type": "application/json", "Accept": "*/*"}
        self.timeout, self.connect_timeout, self.context = timeout, connect_timeout, context
        self.usable = parts.scheme in ("http", "https") and not parts.username and not _proxied(base_url)
        self._local = threading.local()
        self._all: weakref.WeakSet[_Held] = weakref.WeakSet()  # every thread's, for close(); held by the threads
        self._lock = threading.Lock()

    def post(self, path: str, body: bytes) -> httpx.Response:
        """POST ``body`` (JSON) to ``path`` under the base URL; a connection the server closed meanwhile is opened
        again once."""
        target = self.prefix + path + self.query
        for fresh in (False, True):
            held = None if fresh else getattr(self._local, "held", None)
            if held is None:
                held = self._open()
            if held.conn.sock is None:
                try:
                    held.conn.connect()
                except TimeoutError:
                    raise httpx.ConnectTimeout(f"no connection within {self.connect_timeout:g} s") from None
                except OSError as exc:
                    raise httpx.ConnectError(str(exc) or type(exc).__name__) from None
                if held.conn.sock is not None:
                    held.conn.sock.settimeout(self.timeout)  # connected within the connect timeout: now the answer's
            try:
                held.conn.request("POST", target, body=body, headers=self.headers)
                resp = held.conn.getresponse()
                content = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                held.conn.close()
                self._local.held = None
                if fresh:
                    raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__) from None
                continue  # a kept-open connection the server had closed: once more on a new one
            except TimeoutError:
                held.conn.close()
                self._local.held = None
                raise httpx.ReadTimeout(f"no answer within {self.timeout:g} s") from None
            except OSError as exc:
                held.conn.close()
                self._local.held = None
                raise httpx.ReadError(str(exc) or type(exc).__name__) from None
            if resp.will_close:
                held.conn.close()
                self._local.held = None
            # no request attached: parsing its URL took a sixth of this path's CPU, and no caller asks for it
            return httpx.Response(resp.status, headers=resp.getheaders(), content=content)
        raise AssertionError("unreachable")

    def _open(self) -> _Held:
        if self.https:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.connect_timeout, context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        held = self._local.held = _Held(conn)
        with self._lock:
            self._all.add(held)
        return held

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            for held in list(self._all):
                held.conn.close()


def _proxied(url: str) -> bool:
    """Whether the environment names a proxy httpx would send ``url`` through (``*_PROXY``, not ``NO_PROXY``)."""
    proxies = urllib.request.getproxies_environment()
    scheme = urlsplit(url).scheme
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    host = urlsplit(url).hostname or ""
    return not urllib.request.proxy_bypass(host)  # NO_PROXY
