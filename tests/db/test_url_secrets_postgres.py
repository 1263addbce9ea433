"""A PostgreSQL history URL's password and query value, and the endpoint's, are in no output and no history row.

The server trusts its one user, so a password in the URL is accepted and ignored: the run records into the
history as a team's CI would, and every byte written (the files under the test's folder, the terminal, and every
row of every table the history holds) is searched for each planted secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specperf.sim import SimServer

CASE = """
import pytest

@pytest.mark.sustained(tokens=48, ctx=64)
def test_case(specperf):
    pass
"""
SECRETS = ["PgPassword2c7", "PgQuery8d5", "EpPassword4f1", "EpQuery6a3"]


def test_a_postgres_history_and_an_endpoint_keep_their_secrets(pytester: pytest.Pytester, pg_url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    history = pg_url.replace("specperf@", "specperf:PgPassword2c7@") + "?application_name=PgQuery8d5"
    out = pytester.path / "out"
    out.mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step_summary.md"))
    pytester.makepyfile(test_perf=CASE)
    with SimServer("healthy", speed=20) as sim:
        endpoint = sim.url.replace("http://", "http://ep:EpPassword4f1@") + "/v1?key=EpQuery6a3"
        res = pytester.runpytest_subprocess(
            f"--endpoint={endpoint}", f"--specperf-history={history}", "--specperf-save=main",
            f"--specperf-json={out / 'r.json'}", f"--specperf-markdown={out / 's.md'}",
            f"--specperf-bencher={out / 'b.json'}", f"--specperf-html={out / 'r.html'}",
            f"--specperf-plots={out / 'plots'}", f"--junitxml={out / 'j.xml'}", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    text = res.stdout.str() + res.stderr.str()
    res.stdout.fnmatch_lines(["run recorded as run 1 in history postgresql://specperf:***@127.0.0.1:*"
                              "?application_name=***"])
    found = [f"terminal: {s}" for s in SECRETS if s in text]
    for path in (p for p in Path(pytester.path).rglob("*") if p.is_file()):
        found += [f"{path.name}: {s}" for s in SECRETS if s.encode() in path.read_bytes()]
    with psycopg.connect(pg_url) as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        assert {"runs", "cases", "results", "trials"} <= set(tables)
        for table in tables:
            rows = str(conn.execute(f"SELECT * FROM {table}").fetchall())  # names from the catalog
            assert table != "results" or "ep:***@127.0.0.1" in rows  # the endpoint is stored, masked
            found += [f"table {table}: {s}" for s in SECRETS if s in rows]
    assert found == []


def test_the_specperf_command_names_a_postgres_history_masked(pg_url: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_specperf import cli

    history = pg_url.replace("specperf@", "specperf:PgPassword2c7@") + "?application_name=PgQuery8d5"
    assert cli.main(["--storage", str(tmp_path), "history", "--history", history]) == 0
    assert cli.main(["trend", "t.py::case", "--history", history]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert "no runs in history postgresql://specperf:***@" in text and "application_name=***" in text, text
    assert [s for s in SECRETS if s in text] == []
