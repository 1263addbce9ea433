"""Long prompts are tokenized off the simulator's event loop: a request that arrives meanwhile is served at once."""

from __future__ import annotations

import threading
import time

import httpx

from pytest_specperf.sim import SimServer

#: About 3 MB of prose: the simulator's tokenizer takes a few hundred ms over it.
LONG = "The quick brown fox jumps over the lazy dog. " * 70_000


def test_a_long_tokenize_does_not_hold_the_loop() -> None:
    with SimServer("healthy") as sim, httpx.Client(base_url=sim.url, timeout=60) as client:
        body = {"model": client.get("/v1/models").json()["data"][0]["id"], "prompt": LONG}
        client.post("/tokenize", json={**body, "prompt": "warm"})
        span: dict[str, float] = {}

        def tokenize() -> None:
            with httpx.Client(base_url=sim.url, timeout=60) as own:
                t0 = time.perf_counter()
                assert own.post("/tokenize", json=body).status_code == 200
                span["tokenize"] = time.perf_counter() - t0

        worker = threading.Thread(target=tokenize)
        worker.start()
        waits = []
        while worker.is_alive():  # short requests all along: one that came while the loop was held waited for it
            t0 = time.perf_counter()
            assert client.get("/health").status_code == 200
            waits.append(time.perf_counter() - t0)
            time.sleep(0.01)
        worker.join()
    # on the loop, a /health arriving during the tokenize waited for it; off the loop, each is answered meanwhile
    assert max(waits) < 0.5 * span["tokenize"], (max(waits), span["tokenize"])
