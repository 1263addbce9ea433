"""The installed version of pytest-specperf, read from its metadata (pyproject.toml is the one source)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pytest-specperf")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"
