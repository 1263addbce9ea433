"""tools/check_wheel.py, which CI runs on the built wheel: it must name what a wheel lacks or should not hold."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_wheel.py"
DIST_INFO = "pytest_specperf-0.1.0.dist-info"


def load_tool():
    """Import the tool by path: it lives outside the package, on purpose."""
    spec = importlib.util.spec_from_file_location("check_wheel", TOOL)
    assert spec is not None and spec.loader is not None, f"cannot load {TOOL}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PLUGIN_ENTRY = "[pytest11]\nspecperf = pytest_specperf.pytest_plugin.hooks\n"


def fake_wheel(path: Path, names: set[str], entry_points: str = PLUGIN_ENTRY) -> Path:
    """A zip laid out like a wheel: the given member names (empty files) and the dist-info."""
    with zipfile.ZipFile(path, "w") as z:
        for name in sorted(names):
            z.writestr(name, "")
        z.writestr(f"{DIST_INFO}/entry_points.txt", entry_points)
        z.writestr(f"{DIST_INFO}/METADATA", "Name: pytest-specperf\n")
    return path


def test_a_wheel_with_every_package_file_passes(tmp_path: Path) -> None:
    tool = load_tool()
    files = tool.source_files()
    assert "pytest_specperf/py.typed" in files and "pytest_specperf/data/prose.txt" in files
    assert "pytest_specperf/sim/profiles/healthy.yaml" in files
    assert tool.problems(fake_wheel(tmp_path / "ok.whl", files)) == []


@pytest.mark.parametrize("lost", ["pytest_specperf/py.typed", "pytest_specperf/data/reasoning.txt",
                                  "pytest_specperf/sim/profiles/seed.yaml"])
def test_a_missing_package_file_is_named(tmp_path: Path, lost: str, capsys: pytest.CaptureFixture[str]) -> None:
    tool = load_tool()
    wheel = fake_wheel(tmp_path / "lost.whl", tool.source_files() - {lost})
    assert tool.problems(wheel) == [f"missing from the wheel: {lost}"]
    assert tool.main([str(wheel)]) == 1
    assert lost in capsys.readouterr().err


def test_build_tools_and_tests_must_stay_out(tmp_path: Path) -> None:
    tool = load_tool()
    wheel = fake_wheel(tmp_path / "stray.whl", tool.source_files() | {"tools/generate_corpora.py", "tests/x.py"})
    assert tool.problems(wheel) == ["not part of the package: tests/x.py",
                                    "not part of the package: tools/generate_corpora.py"]


def test_the_plugin_entry_point_is_required(tmp_path: Path) -> None:
    tool = load_tool()
    wheel = fake_wheel(tmp_path / "noentry.whl", tool.source_files(), entry_points="[console_scripts]\n")
    assert tool.problems(wheel) == ["no [pytest11] entry point: pytest would not load the plugin"]
