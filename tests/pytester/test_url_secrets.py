"""Credentials and query values in the URLs a user gives never leave the run; the query reaches every request.

Each place a user can give a URL (``--endpoint``, ``--specperf-ab``, ``--specperf-arms``, a PostgreSQL
``--specperf-history``: tests/db) gets its own planted secrets, a password and a query value. A run writes every
output at once (the JSON, Markdown and the step summary, Bencher, the HTML report, case images, a saved run, the
SQLite history, JUnit properties, pytest-html's report and pytest-benchmark's JSON), and every byte written under
the test's folder, the terminal included, is searched for each secret. What the simulator received (its record
of every request: method, path, query, Authorization) shows the real URL was still used.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pytest_specperf.sim import SimServer

pytest.importorskip("pytest_html", reason="pytest-html is part of the test extra: pip install -e '.[test]'")
pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is part of the test extra")

CASES = """
import pytest

@pytest.mark.sustained(tokens=48, ctx=64)
def test_sus(specperf):
    pass

@pytest.mark.load_sweep(concurrency=[1, 2], tokens=32, ctx=64)
def test_load(specperf):
    pass

@pytest.mark.sustained(tokens=32, ctx=5_000_000)
def test_too_long(specperf):
    pass
"""
AB_CASES = """
import pytest

@pytest.mark.sustained(tokens=48, ctx=64)
def test_sus(specperf):
    pass
"""


def every_output(folder: Path) -> list[str]:
    """Every output option at once, each writing under ``folder``."""
    return [f"--specperf-json={folder / 'r.json'}", f"--specperf-markdown={folder / 's.md'}",
            f"--specperf-bencher={folder / 'b.json'}", f"--specperf-html={folder / 'r.html'}",
            f"--specperf-plots={folder / 'plots'}", "--specperf-save=main",
            f"--specperf-history={folder / 'history.sqlite'}", f"--junitxml={folder / 'j.xml'}",
            f"--html={folder / 'pytest.html'}", "--self-contained-html", f"--benchmark-json={folder / 'bench.json'}",
            "-p", "no:cacheprovider"]


def leaks(root: Path, text: str, secrets: Sequence[str]) -> list[str]:
    """Where each secret appears: the terminal, or a file under ``root`` (every byte, the SQLite file included)."""
    found = [f"terminal: {s}" for s in secrets if s in text]
    for path in (p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {s}" for s in secrets if s.encode() in data]
    return found


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    out = pytester.path / "out"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step_summary.md"))
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(pytester.path / "locks"))
    # under xdist the outer worker's variables would make pytest-benchmark in the inner run think it is a worker
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    out.mkdir(exist_ok=True)
    return pytester.runpytest_subprocess(*args, *every_output(out))


def all_written(root: Path) -> None:
    """Every output is there to be searched."""
    names = {p.name for p in root.rglob("*") if p.is_file()}
    assert {"r.json", "s.md", "b.json", "r.html", "history.sqlite", "j.xml", "pytest.html", "bench.json",
            "step_summary.md"} <= names, names
    assert any(n.endswith(".png") for n in names) and any(n.startswith("0001_main") for n in names), names


def with_secrets(url: str, user: str, password: str, query: str) -> str:
    """``url`` (http://127.0.0.1:PORT) with a user and password, ``/v1`` as pasted from an OpenAI client, and a
    query value."""
    return url.replace("http://", f"http://{user}:{password}@") + f"/v1?api-version={query}&deployment=gpt"


def sent_as_given(sim: SimServer, user: str, password: str, query: str) -> None:
    """Every request reached the server with the URL's query and its user:password as Basic auth."""
    seen = sim.seen()
    assert seen
    basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    for request in seen:
        if request["path"] == "/health":  # the test's own start-up probe
            continue
        assert request["query"] == f"api-version={query}&deployment=gpt", request
        assert request["authorization"] == basic, request
        assert "?" not in request["path"] and query not in request["path"], request


@pytest.fixture
def sims() -> Iterator[tuple[SimServer, SimServer]]:
    with SimServer("healthy", speed=20) as a, SimServer("healthy", speed=20) as b:
        yield a, b


def test_endpoint_credentials_and_query_are_written_nowhere(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                            sims: tuple[SimServer, SimServer]) -> None:
    sim = sims[0]
    pytester.makepyfile(test_perf=CASES)
    url = with_secrets(sim.url, "specuser", "EndpointPassword7f3", "EndpointQuery9c1")
    res = run(pytester, monkeypatch, f"--endpoint={url}")
    res.assert_outcomes(passed=2, errors=1)  # the third case asks for more context than the server has
    text = res.stdout.str() + res.stderr.str()
    assert "http://specuser:***@127.0.0.1" in text and "api-version=***" in text  # said, masked
    all_written(pytester.path)
    assert leaks(pytester.path, text, ["EndpointPassword7f3", "EndpointQuery9c1"]) == []
    sent_as_given(sim, "specuser", "EndpointPassword7f3", "EndpointQuery9c1")


@pytest.mark.parametrize("mode", ["ab", "arms"])
def test_ab_and_arms_credentials_and_queries_are_written_nowhere(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sims: tuple[SimServer, SimServer],
        mode: str) -> None:
    pytester.makepyfile(test_perf=AB_CASES)
    given = [("userA", "ArmPasswordA41", "ArmQueryA52"), ("userB", "ArmPasswordB63", "ArmQueryB74")]
    urls = [with_secrets(s.url, *g) for s, g in zip(sims, given, strict=True)]
    option = (f"--specperf-ab={urls[0]},{urls[1]}" if mode == "ab"
              else f"--specperf-arms=off={urls[0]},k2={urls[1]}")
    res = run(pytester, monkeypatch, option, "--specperf-ab-trials=2")
    res.assert_outcomes(passed=1)
    text = res.stdout.str() + res.stderr.str()
    assert "userA:***@" in text and "userB:***@" in text
    all_written(pytester.path)
    assert leaks(pytester.path, text, [s for _, *pair in given for s in pair]) == []
    for sim, g in zip(sims, given, strict=True):
        sent_as_given(sim, *g)


def test_a_down_endpoint_and_a_postgres_history_that_fails_name_their_urls_masked(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_perf=AB_CASES)
    res = run(pytester, monkeypatch, "--endpoint=http://u:DownPassword5d2@127.0.0.1:1/v1?key=DownQuery8e4")
    res.assert_outcomes(errors=1)
    text = res.stdout.str() + res.stderr.str()
    assert "endpoint http://u:***@127.0.0.1:1?key=*** is down" in text
    assert leaks(pytester.path, text, ["DownPassword5d2", "DownQuery8e4"]) == []
    # an unusable PostgreSQL history: its error is shown, its password and query value are not
    history = "postgresql://ci:HistPassword3a9@127.0.0.1:1/db?sslpassword=HistQuery6b1"
    res = pytester.runpytest_subprocess("--specperf-sim-speed=20", f"--specperf-history={history}",
                                        *[a for a in every_output(pytester.path / "out")
                                          if not a.startswith("--specperf-history")])
    res.assert_outcomes(passed=1)
    text = res.stdout.str() + res.stderr.str()
    assert "postgresql://ci:***@127.0.0.1:1/db?sslpassword=***" in text
    assert leaks(pytester.path, text, ["HistPassword3a9", "HistQuery6b1"]) == []


@pytest.mark.parametrize(("option", "said"), [
    ("--endpoint=u:OptSecret1@host:8000", "is not an http(s) URL"),
    ("--specperf-ab=http://u:OptSecret2@a:1/v1?k=OptSecret3", "needs two URLs"),
    ("--specperf-ab=http://u:OptSecret4@a:1?k=OptSecret5,http://u:OptSecret4@a:1?k=OptSecret5", "twice"),
    ("--specperf-arms=x=http://u:OptSecret6@a:1?k=OptSecret7", "needs two or more arms"),
    ("--specperf-arms=http://u:OptSecret8@a:1,b=http://c:1", "is not NAME=VALUE"),
    ("--specperf-arms=a=http://u:OptSecret9@a:1,b=http://u:OptSecret9@a:1", "for two arms"),
    ("--specperf-history=mysql://u:OptSecret10@h/db?k=OptSecret11", "unknown scheme"),
])
def test_a_usage_error_names_the_url_masked(pytester: pytest.Pytester, option: str, said: str) -> None:
    pytester.makepyfile(test_perf=AB_CASES)
    res = pytester.runpytest_subprocess(option, "-p", "no:cacheprovider")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR and said in text, text
    secrets = re.findall(r"OptSecret\d+", option)
    assert secrets and [s for s in secrets if s in text] == [], text
