"""Every output path is checked when the session starts: a bad one is a one-line usage error before any case
is measured (the simulator is never started), never a warning after the whole run."""

from __future__ import annotations

import pytest

CASE = """
import pytest

@pytest.mark.sustained(tokens=64, ctx=100)
def test_sus(specperf):
    pass
"""


@pytest.mark.parametrize(("args", "message"), [
    (["--specperf-plots=/proc/nope"], "--specperf-plots=/proc/nope: nothing can be written in /proc"),
    (["--specperf-plots=afile"], "--specperf-plots=afile is a file; give a folder"),
    (["--specperf-html=/proc/r.html"], "--specperf-html=/proc/r.html: nothing can be written in /proc"),
    (["--specperf-html=sub"], "--specperf-html=sub is a directory; give a file path, e.g. "
                              "--specperf-html=sub/report.html"),
    (["--specperf-json=/proc/r.json"], "--specperf-json=/proc/r.json: nothing can be written in /proc"),
    (["--specperf-markdown=sub"], "--specperf-markdown=sub is a directory; give a file path, e.g. "
                                  "--specperf-markdown=sub/summary.md"),
    (["--specperf-bencher=/proc/b.json"], "--specperf-bencher=/proc/b.json: nothing can be written in /proc"),
    (["--specperf-save", "--specperf-storage=afile"], "--specperf-storage=afile (where --specperf-save writes): "),
    (["--specperf-json=afile/r.json"], "--specperf-json=afile/r.json: afile is not a folder"),
    (["--specperf-html=afile/deeper/r.html"], "--specperf-html=afile/deeper/r.html: afile is not a folder"),
    (["--specperf-plots=afile/plots"], "--specperf-plots=afile/plots: afile is not a folder"),
    (["--specperf-history=/proc/h.sqlite"], "--specperf-history=/proc/h.sqlite: nothing can be written in /proc"),
    (["--specperf-history=afile/h.sqlite"], "--specperf-history=afile/h.sqlite: "),
])
def test_a_bad_output_path_stops_the_run_before_measuring(pytester: pytest.Pytester, args: list[str],
                                                          message: str) -> None:
    pytester.makepyfile(test_cases=CASE)
    (pytester.path / "afile").write_text("x")
    (pytester.path / "sub").mkdir()
    res = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in res.errlines if line.strip()]
    assert len(errors) == 1 and message in errors[0], res.errlines
    assert "collected" not in res.stdout.str()  # nothing was collected, let alone measured


def test_every_output_creates_its_missing_folders_as_junitxml_does(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_cases=CASE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "ci" / "step" / "summary.md"))
    files = {"--specperf-json": "j/a/r.json", "--specperf-markdown": "m/a/s.md", "--specperf-bencher": "b/a/b.json",
             "--specperf-html": "h/a/r.html", "--specperf-history": "hist/a/h.sqlite", "--junitxml": "x/a/j.xml"}
    res = pytester.runpytest_subprocess("--specperf-sim-speed=20", "-p", "no:cacheprovider", "--specperf-save=main",
                                        "--specperf-storage=runs/a", "--specperf-plots=p/a/plots",
                                        *(f"{flag}={path}" for flag, path in files.items()))
    res.assert_outcomes(passed=1)
    for path in [*files.values(), "ci/step/summary.md", "runs/a/0001_main.json"]:
        assert (pytester.path / path).stat().st_size > 0, path
    assert (pytester.path / "p/a/plots").is_dir()
