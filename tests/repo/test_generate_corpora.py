"""The generated corpora shipped in the package are exactly what tools/generate_corpora.py writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "generate_corpora.py"
SHIPPED = ROOT / "pytest_specperf" / "data"


def load_tool():
    """Import the tool by path: it lives outside the package, on purpose."""
    spec = importlib.util.spec_from_file_location("generate_corpora", TOOL)
    assert spec is not None and spec.loader is not None, f"cannot load {TOOL}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["reasoning.txt", "repetitive.txt"])
def test_regenerating_gives_the_shipped_files_byte_for_byte(tmp_path: Path, name: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    load_tool().main(["--out", str(tmp_path)])
    assert str(tmp_path / name) in capsys.readouterr().out
    fresh, shipped = (tmp_path / name).read_bytes(), (SHIPPED / name).read_bytes()
    assert fresh == shipped, f"{name} differs from tools/generate_corpora.py's output: rerun the tool and commit"


def test_the_tool_defaults_to_the_package_data_folder() -> None:
    assert load_tool().DATA.resolve() == SHIPPED.resolve()
