"""A minimal vLLM-style SSE source for the client benchmarks: prerecorded events, sent as fast as possible or paced.

``python benchmarks/sse_source.py`` prints ``listening on URL`` and serves until killed:

* ``GET /v1/models``: one model owned by "vllm" (so clients ask for per-chunk usage);
* ``POST /v1/completions`` (stream): ``max_tokens`` events of one token each, every one carrying the
  cumulative ``usage.completion_tokens`` and, as its text, the ``time.perf_counter_ns()`` at which the
  source wrote it (one system-wide monotonic clock on Linux, so readers compare it with their own).
  Header ``X-Interval-Us``: the gap between events (0, default: back to back, in writes of
  ``X-Batch`` events, default 64). Then ``data: [DONE]``.

Events are prerecorded: only the timestamp digits are spliced in at send time, so the source's own
cost per event stays small beside the reader's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import ClientSession, web

_TS = "0" * 19  # perf_counter_ns digits, fixed width so events are prerecorded bytes


def _events(n: int) -> list[tuple[bytes, bytes]]:
    """Each event as (bytes before the timestamp, bytes after it)."""
    out = []
    for i in range(1, n + 1):
        obj = {"id": "cmpl-bench", "object": "text_completion", "created": 0, "model": "bench",
               "choices": [{"index": 0, "text": _TS, "logprobs": None, "finish_reason": "length" if i == n else None}],
               "usage": {"prompt_tokens": 8, "completion_tokens": i, "total_tokens": 8 + i}}
        line = f"data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()
        head, tail = line.split(_TS.encode())
        out.append((head, tail))
    return out


_CACHE: dict[int, list[tuple[bytes, bytes]]] = {}


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    n = int(body.get("max_tokens", 16))
    interval = int(request.headers.get("X-Interval-Us", "0")) / 1e6
    batch = int(request.headers.get("X-Batch", "64"))
    events = _CACHE.setdefault(n, _events(n))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    clock = time.perf_counter_ns
    if interval <= 0:
        for i in range(0, n, batch):
            ts = str(clock()).rjust(19, "0").encode()
            await resp.write(b"".join(h + ts + t for h, t in events[i:i + batch]))
    else:
        start = time.perf_counter()
        for i, (h, t) in enumerate(events):
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await resp.write(h + str(clock()).rjust(19, "0").encode() + t)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model", "owned_by": "vllm"}]})


def main() -> None:
    """Serve until killed; ``--quick``: serve one stream to itself, print it and exit (a check that it runs)."""
    quick = "--quick" in sys.argv[1:]
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"listening on http://127.0.0.1:{port}", flush=True)
        if not quick:
            await asyncio.Event().wait()
        url = f"http://127.0.0.1:{port}/v1/completions"
        async with ClientSession() as session, session.post(url, json={"max_tokens": 3}) as resp:
            body = await resp.text()
        print(f"--quick: one stream of 3 events, {body.count('data: ')} data lines")
        await runner.cleanup()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
