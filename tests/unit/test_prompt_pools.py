"""Ctrl-C while prompts are built: the threads searching for exact-length prompts are cancelled, not awaited.

The search runs in a fresh Python (no plugin, Python's own SIGINT handler), with a token counter (a word count)
that holds every call made after the signal went until the caller has its KeyboardInterrupt. A pool the caller
waits for would keep the interrupt from the caller until those calls were let go (here: never, until their
safety wait ran out), and would then run each search on to its end; a cancelled pool hands the caller its
interrupt while the calls still hold, and no call starts after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pthread_kill")

SCRIPT = textwrap.dedent('''
    import json, signal, threading, time
    from pytest_specperf.prompts.exact_length import build_prompts

    main = threading.main_thread().ident
    lock = threading.Lock()
    release = threading.Event()
    state = {"calls": 0, "held": 0, "sent": False, "timed_out": 0}

    def count(text):
        with lock:
            state["calls"] += 1
            worker = threading.current_thread() is not threading.main_thread()
            send = worker and state["calls"] >= 12 and not state["sent"]
            state["sent"] = state["sent"] or send
            hold = state["sent"]
            if hold:  # counted before the signal goes: the caller may see its interrupt at once
                state["held"] += 1
        if send:
            signal.pthread_kill(main, signal.SIGINT)  # a Ctrl-C while the searches run side by side
        if hold:
            if not release.wait(10):  # the safety wait: a pool the caller waits for gets here
                state["timed_out"] += 1
            with lock:
                state["held"] -= 1
        return len(text.split())

    try:
        build_prompts("prose", 3000, count, range(40), workers=4)
        caught = None
    except KeyboardInterrupt:
        caught = {"calls": state["calls"], "held": state["held"]}
    release.set()
    deadline = time.monotonic() + 30
    while (others := [t for t in threading.enumerate() if t is not threading.current_thread()]) \
            and time.monotonic() < deadline:
        started = [t for t in others if t.ident is not None]  # one still starting cannot be joined: the next pass
        for t in started:
            t.join(max(0.0, deadline - time.monotonic()))
        if not started:
            time.sleep(0.01)
    print(json.dumps({"caught": caught, "calls_at_end": state["calls"], "timed_out": state["timed_out"],
                      "threads_left": [t.name for t in threading.enumerate() if t is not threading.current_thread()]}))
''')


def test_an_interrupt_cancels_the_prompt_searches_instead_of_waiting_for_them() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["caught"] is not None, got  # the interrupt reached the caller
    assert got["timed_out"] == 0, got  # ... while the calls in flight still held, not after they gave up waiting
    assert got["caught"]["held"] >= 1, got
    assert got["calls_at_end"] == got["caught"]["calls"], got  # no count started after it: each search gave up
    assert got["threads_left"] == [], got
