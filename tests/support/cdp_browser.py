"""Open a local HTML file in headless Chromium over the DevTools protocol and record what happened.

Console errors, uncaught exceptions, every network request, values read from the page, and a
screenshot. Talks CDP over a websocket (the ``websockets`` package); no driver binary needed.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--remote-debugging-port=0",
         "--window-size=1280,900"]


def chromium_path() -> str | None:
    """The Chromium binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageVisit:
    """What loading the page showed."""

    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


class _Cdp:
    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, name: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == name for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with contextlib.suppress(TimeoutError):
            while time.monotonic() < deadline:
                self.events.append(json.loads(self.ws.recv(timeout=max(0.05, deadline - time.monotonic()))))


def _port(profile: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.is_file() and marker.read_text().strip():
            return int(marker.read_text().split()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode} before opening its DevTools port")
        time.sleep(0.1)
    raise RuntimeError(f"chromium did not open its DevTools port within {timeout:g} s")


def _clip(cdp: _Cdp, selector: str | None) -> dict[str, Any]:
    """Screenshot parameters for the whole box of ``selector`` (page coordinates), or none."""
    if selector is None:
        return {}
    box = cdp.call("Runtime.evaluate", {"returnByValue": True, "expression": f"""(() => {{
        const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
        return {{x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height, scale: 1}}; }})()"""})
    return {"clip": box["result"]["value"], "captureBeyondViewport": True}


def visit(page: Path, script: str, chromium: str, size: tuple[int, int] | None = None, clip: str | None = None
          ) -> PageVisit:
    """Load ``page`` (a file) in a fresh headless Chromium; ``script`` is evaluated after load (its JSON result
    lands in ``values``). ``size``: the window's (width, height) in CSS pixels; ``clip``: a CSS selector whose
    whole box is the screenshot (else the window)."""
    with tempfile.TemporaryDirectory(prefix="specperf-chromium-") as profile:
        # A session of its own: the browser's helper processes are ended with it.
        proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HOME": profile}, start_new_session=True)
        try:
            port = _port(Path(profile), proc)
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            target = next(t for t in targets if t.get("type") == "page")
            with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=20) as ws:
                cdp = _Cdp(ws)
                for domain in ("Page", "Runtime", "Log", "Network"):
                    cdp.call(f"{domain}.enable")
                if size is not None:
                    cdp.call("Emulation.setDeviceMetricsOverride",
                             {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False})
                url = page.resolve().as_uri()
                cdp.call("Page.navigate", {"url": url})
                cdp.wait_event("Page.loadEventFired", timeout=60)
                cdp.drain(1.0)  # late requests (fonts, images) and errors would show up here
                result = cdp.call("Runtime.evaluate", {"expression": script, "returnByValue": True})
                shot = cdp.call("Page.captureScreenshot", {"format": "png", **_clip(cdp, clip)})
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    out = PageVisit(screenshot=base64.b64decode(shot["data"]))
    if "exceptionDetails" in result:
        out.console_errors.append(f"script failed: {result['exceptionDetails']}")
    else:
        out.values = json.loads(result["result"]["value"])
    for e in cdp.events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.console_errors.append(json.dumps(params.get("args")))
        elif method == "Runtime.exceptionThrown":
            out.console_errors.append(json.dumps(params.get("exceptionDetails")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            out.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent" and params.get("request", {}).get("url") != url:
            out.requests.append(params["request"]["url"])
    return out
