"""Process handling of VllmServer and ``--specperf-engine vllm`` against a fake build: fast, no real vLLM.

The fake build folder (under $SPECPERF_CACHE) has a ``ready.json`` whose "python" is a script that records its
argv and environment, then serves the embedded simulator in the vllm dialect on the port it was given (or
exits, or hangs, as its mode says). The real server is checked by the ``vllm``-marked tests.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from pytest_specperf.engines import vllm_build
from pytest_specperf.engines.process import EngineNotFound, EngineStartError
from pytest_specperf.engines.vllm import VllmServer

FAKE = textwrap.dedent(
    """\
    #!{python}
    import json, os, runpy, signal, sys, time
    MODE = {mode!r}
    here = os.path.dirname(os.path.abspath(__file__))
    env = {{k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_CACHE_ROOT", "TMPDIR",
                                          "VLLM_RPC_BASE_PATH", "VLLM_CPU_KVCACHE_SPACE")}}
    with open(os.path.join(here, "argv.json"), "w") as f:
        json.dump({{"argv": sys.argv[1:], "pid": os.getpid(), "env": env}}, f)
    print("fake vllm starting", flush=True)
    if MODE == "exit":
        print("Traceback (most recent call last):", flush=True)
        print("ValueError: bogus speculative method", flush=True)
        print("shutting down", flush=True)
        sys.exit(3)
    if MODE == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # forces the SIGKILL path
        while True:
            time.sleep(1)
    port = sys.argv[sys.argv.index("--port") + 1]
    sys.argv = ["sim", "--dialect", "vllm", "--port", port, "--speed", "20"]
    runpy.run_module("pytest_specperf.sim", run_name="__main__")
    """
)

FakeBuild = Callable[[str], Path]


@pytest.fixture
def fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBuild:
    """A finished build in a temporary cache whose python is the fake server in ``mode``."""
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path / "cache"))

    def make(mode: str) -> Path:
        root = vllm_build.vllm_dir()
        exe = root / "venv" / "bin" / "python"
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text(FAKE.format(python=sys.executable, mode=mode))
        exe.chmod(0o755)
        model = vllm_build.model_dir()
        model.mkdir(parents=True, exist_ok=True)
        (model / "config.json").write_text("{}")
        (root / vllm_build.READY_FILE).write_text(json.dumps(
            {"vllm": vllm_build.VLLM_VERSION, "python": str(exe), "model": str(model)}))
        return exe

    return make


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _recorded(exe: Path) -> dict:
    return json.loads((exe.parent / "argv.json").read_text())


def test_start_waits_for_health_passes_args_and_stops(fake_build: FakeBuild) -> None:
    exe = fake_build("serve")
    with VllmServer(preset="ngram", extra_args=["--foo", "1"], max_num_seqs=4) as srv:
        assert srv.running() and srv.startup_s is not None
        assert httpx.get(f"{srv.url}/health").status_code == 200
        rec = _recorded(exe)
        argv = rec["argv"]
        assert argv[:2] == ["-m", "vllm.entrypoints.openai.api_server"]  # the `vllm` command does not work
        pairs = {argv[i]: argv[i + 1] for i in range(len(argv) - 1)}
        assert pairs["--model"] == str(vllm_build.model_dir()) and pairs["--port"] == str(srv.port)
        assert pairs["--host"] == "127.0.0.1" and pairs["--dtype"] == "float32"
        assert pairs["--max-model-len"] == "2048" and pairs["--max-num-seqs"] == "4"
        assert json.loads(pairs["--speculative-config"]) == {"method": "ngram", "num_speculative_tokens": 4,
                                                             "prompt_lookup_max": 4}
        assert pairs["--per-request-spec-decode-metrics"] == "detailed" and "--enforce-eager" in argv
        assert argv[-2:] == ["--foo", "1"]
        env = rec["env"]
        assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
        for key in ("VLLM_CACHE_ROOT", "TMPDIR", "VLLM_RPC_BASE_PATH"):
            assert env[key].startswith(str(vllm_build.vllm_dir())), key
        pid = rec["pid"]
    assert not srv.running() and not _alive(pid)


def test_preset_none_has_no_speculation(fake_build: FakeBuild) -> None:
    exe = fake_build("serve")
    with VllmServer(preset="none"):
        argv = _recorded(exe)["argv"]
    assert "--speculative-config" not in argv and "--per-request-spec-decode-metrics" not in argv


def test_exit_during_startup_is_one_line(fake_build: FakeBuild) -> None:
    fake_build("exit")
    srv = VllmServer()
    with pytest.raises(EngineStartError) as info:
        srv.start()
    msg = str(info.value)
    assert "\n" not in msg
    assert "vLLM exited with code 3 during start-up (ValueError: bogus speculative method)" in msg
    assert str(srv.log_path) in msg and not srv.running()


def test_never_healthy_is_killed(fake_build: FakeBuild) -> None:
    exe = fake_build("hang")
    srv = VllmServer(startup_timeout=1.0, stop_grace=0.5)
    with pytest.raises(EngineStartError, match=r"^vLLM not healthy after 1 s \(last: .*\); see its log") as info:
        srv.start()
    assert "\n" not in str(info.value)
    pid = _recorded(exe)["pid"]
    assert not _alive(pid)  # it ignored SIGTERM, so this proves the SIGKILL


def test_not_built_names_the_build_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path))
    with pytest.raises(EngineNotFound, match=r"^vLLM 0\.\d+\.\d+ is not built in .*; build it with "
                                             r"`specperf-build-vllm`$"):
        VllmServer().start()


def test_unknown_preset_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown vLLM preset 'self-draft'; valid presets: ngram, none"):
        VllmServer(preset="self-draft")


CASE = textwrap.dedent(
    """\
    import pytest

    @pytest.mark.specperf(kind="sustained", tokens=64, ctx=64)
    def test_decode(specperf, endpoint):
        print("STARTED", endpoint["started"], endpoint["server"], endpoint["url"])
    """
)


def test_engine_option_starts_and_stops_it(pytester: pytest.Pytester, fake_build: FakeBuild) -> None:
    """--specperf-engine vllm: started once for the session, measured through, stopped at the end."""
    exe = fake_build("serve")
    pytester.makepyfile(test_case=CASE)
    res = pytester.runpytest_subprocess("-s", "--specperf-engine=vllm", "--specperf-engine-preset=none",
                                        "--specperf-engine-args=--bar 2")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*STARTED engine:vllm (none) vllm http://127.0.0.1:*"])
    rec = _recorded(exe)
    assert rec["argv"][-2:] == ["--bar", "2"]
    assert not _alive(rec["pid"])


@pytest.mark.parametrize(("args", "needle"), [
    (["--specperf-engine-preset=self-draft"], "self-draft is llama.cpp's; vllm has ngram and none"),
    (["--specperf-engine-model=nowhere"], "not a Hugging Face model folder (no config.json)"),
])
def test_bad_engine_options(pytester: pytest.Pytester, args: list[str], needle: str) -> None:
    pytester.makepyfile(test_case=CASE)
    res = pytester.runpytest_subprocess("--specperf-engine=vllm", *args)
    assert res.ret != 0
    assert needle in res.stdout.str() + res.stderr.str()


def test_missing_build_is_a_config_error(pytester: pytest.Pytester, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path / "empty"))
    pytester.makepyfile(test_case=CASE)
    res = pytester.runpytest_subprocess("--specperf-engine=vllm")
    assert res.ret != 0
    assert "build it with `specperf-build-vllm`" in res.stdout.str() + res.stderr.str()


def test_build_is_reused_once_finished(fake_build: FakeBuild, capsys: pytest.CaptureFixture[str]) -> None:
    """A finished build (ready.json, model folder) is not redone: no venv, no pip, no conversion."""
    fake_build("serve")
    assert vllm_build.main([]) == 0
    assert "already built" in capsys.readouterr().out


def test_an_interrupted_build_is_not_found(fake_build: FakeBuild) -> None:
    """ready.json is written last: without it the server refuses to start and names the build command."""
    fake_build("serve")
    (vllm_build.vllm_dir() / vllm_build.READY_FILE).unlink()
    assert vllm_build.ready() is None
    with pytest.raises(EngineNotFound, match="build it with `specperf-build-vllm`"):
        VllmServer().start()
