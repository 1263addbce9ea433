"""The command line and the SimServer helper: start, print the URL, stop cleanly, fail clearly."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from pytest_specperf.sim import SimServer, SimStartError
from pytest_specperf.sim.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_list_profiles(capsys: pytest.CaptureFixture) -> None:
    assert main(["--list-profiles"]) == 0
    assert capsys.readouterr().out.split() == ["acceptance-collapse", "batching", "categories", "fragmenting",
                                                  "healthy", "seed"]


def test_show_profile_with_overrides(capsys: pytest.CaptureFixture) -> None:
    assert main(["--profile", "seed", "--set", "accept_len.prose=4.5", "--dialect", "llamacpp", "--show-profile"]) == 0
    shown = capsys.readouterr().out
    assert "dialect: llamacpp" in shown and "prose: 4.5" in shown and "step_ms: 8.62" in shown


@pytest.mark.parametrize(("args", "needle"), [
    (("--profile", "nope"), "built-in profiles are acceptance-collapse, batching, categories, fragmenting, healthy,"),
    (("--set", "bogus=1"), "unknown key 'bogus'"),
    (("--set", "jitter=2"), "'jitter': must be <= 0.5"),
    (("--speed", "0"), "--speed must be > 0"),
])
def test_bad_input_is_a_one_line_error(args: tuple[str, ...], needle: str, capsys: pytest.CaptureFixture) -> None:
    assert main(list(args)) == 2  # the same entry point the console script runs, in this process
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serves_prints_url_and_stops_cleanly(sig: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pytest_specperf.sim", "--profile", "healthy", "--port", "0",
                             "--speed", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert url, line
        assert httpx.get(url.group(1) + "/health").status_code == 200
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


def test_sim_server_context_manager_subprocess() -> None:
    with SimServer("fragmenting", speed=20, overrides={"dialect": "sglang", "model": "m1"}) as sim:
        assert sim.pid and sim.pid != os.getpid()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", sim.url)
        assert sim.model == "m1" and sim.dialect == "sglang" and sim.profile.name == "fragmenting"
        assert httpx.get(sim.url + "/v1/models").json()["data"][0]["id"] == "m1"
        url, pid = sim.url, sim.pid
    assert sim.url == "" and sim.pid is None
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/health", timeout=2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_port_in_use_is_a_clear_error_with_the_childs_stderr() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SimStartError, match=r"(?s)exited with code 1.*cannot listen on 127\.0\.0\.1:\d+"):
            SimServer("healthy", port=port).start()


def test_bad_profile_fails_before_starting() -> None:
    from pytest_specperf.sim import ProfileError

    with pytest.raises(ProfileError, match="unknown key 'stepms'"):
        SimServer("healthy", overrides={"stepms": 3})
    with pytest.raises(ValueError, match="speed"):
        SimServer("healthy", speed=0)


def test_console_script_points_at_main() -> None:
    eps = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    assert eps.get("specperf-sim") == "pytest_specperf.sim.__main__:main"
