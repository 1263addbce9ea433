"""Process handling of LlamaServer against small fake servers: fast, no real engine needed."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from pytest_specperf.engines.llamacpp import LlamaServer
from pytest_specperf.engines.process import EngineStartError

# A stand-in for llama-server: records its argv and pid, then behaves as MODE says.
FAKE = textwrap.dedent(
    """\
    #!{python}
    import http.server, json, os, signal, sys, time
    MODE = {mode!r}
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "argv.json"), "w") as f:
        json.dump({{"argv": sys.argv[1:], "pid": os.getpid()}}, f)
    print("fake llama-server starting", flush=True)
    if MODE == "exit":
        print("error: unknown speculative type: bogus", flush=True)
        sys.exit(3)
    if MODE == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # forces the SIGKILL path
        while True:
            time.sleep(1)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    loading = [3]  # answer 503 a few times, as llama-server does while loading the model

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = 200
            if loading[0] > 0:
                loading[0] -= 1
                code = 503
            body = json.dumps({{"status": "ok"}} if code == 200 else {{"error": {{"code": 503}}}}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            print("request", self.path, flush=True)

    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)

FakeFactory = Callable[[str], Path]


@pytest.fixture
def fake(tmp_path: Path) -> FakeFactory:
    def make(mode: str) -> Path:
        exe = tmp_path / f"fake-{mode}" / "llama-server"
        exe.parent.mkdir()
        exe.write_text(FAKE.format(python=sys.executable, mode=mode))
        exe.chmod(0o755)
        return exe

    return make


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _recorded(exe: Path) -> dict[str, object]:
    return json.loads((exe.parent / "argv.json").read_text())


def test_start_waits_for_health_and_passes_args(fake: FakeFactory, model: Path, tmp_path: Path) -> None:
    exe = fake("serve")
    log = tmp_path / "server.log"
    with LlamaServer(model, preset="self-draft", extra_args=["--foo", "1"], binary=exe, log_path=log,
                     ctx_size=1024, threads=2) as srv:
        assert srv.running()
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        assert httpx.get(f"{srv.url}/health").status_code == 200  # the three 503s were consumed by start()
        argv = _recorded(exe)["argv"]
        assert isinstance(argv, list)
        assert srv.args[1:] == argv
        pairs = {argv[i]: argv[i + 1] for i in range(len(argv) - 1)}
        assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == str(srv.port)
        assert pairs["-np"] == "1" and pairs["-m"] == str(model) and pairs["-c"] == "1024" and pairs["-t"] == "2"
        assert pairs["--model-draft"] == str(model) and pairs["--spec-type"] == "draft-simple"
        assert "--metrics" in argv and argv[-2:] == ["--foo", "1"]
        assert srv.log_path == log and srv.model_path == model
        assert "fake llama-server starting" in srv.log_tail()
        pid = srv.pid
        assert pid is not None
    assert not srv.running() and not _alive(pid)


def test_exit_during_startup_reports_log_tail(fake: FakeFactory, model: Path) -> None:
    exe = fake("exit")
    srv = LlamaServer(model, binary=exe)
    with pytest.raises(EngineStartError) as info:
        srv.start()
    msg = str(info.value)
    assert "exited with code 3" in msg and "unknown speculative type: bogus" in msg and str(srv.log_path) in msg
    assert not srv.running()


def test_never_healthy_is_killed(fake: FakeFactory, model: Path) -> None:
    exe = fake("hang")
    srv = LlamaServer(model, binary=exe, startup_timeout=1.0, stop_grace=0.5)
    with pytest.raises(EngineStartError, match="not healthy after"):
        srv.start()
    pid = _recorded(exe)["pid"]
    assert isinstance(pid, int)
    assert not _alive(pid)  # ignored SIGTERM, so this proves the SIGKILL escalation
    assert "fake llama-server starting" in srv.log_tail()


def test_exception_in_block_stops_server(fake: FakeFactory, model: Path) -> None:
    srv = LlamaServer(model, binary=fake("serve"))
    with pytest.raises(RuntimeError, match="boom"), srv:
        pid = srv.pid
        raise RuntimeError("boom")
    assert pid is not None and not _alive(pid)
    srv.stop()  # idempotent


def test_restartable_and_double_start_refused(fake: FakeFactory, model: Path) -> None:
    srv = LlamaServer(model, binary=fake("serve"))
    with srv:
        with pytest.raises(Exception, match="already started"):
            srv.start()
        first = srv.pid
    with srv:
        assert srv.pid != first and srv.running()
    assert not srv.running()
