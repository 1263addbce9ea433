"""``--specperf-plots``: one image per case with charts (PNG, or SVG), named after its test.

The charts are the case's view (``views.registry``), drawn by ``drawing`` (matplotlib, loaded only when
something is drawn). Never imports pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_specperf.files import write_text_atomic
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.report.views.registry import view


def case_title(result: dict[str, Any]) -> str:
    """"<node id>: <verdict>", the heading of a case's image, so a PNG on its own says what it shows."""
    return f"{result.get('nodeid', '-')}: {result.get('verdict') or '-'}"


def slug(text: str) -> str:
    """A file-name-safe form of a node id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.")[:120] or "case"


def image_names(results: Iterable[dict[str, Any]], fmt: str) -> list[str]:
    """One unique file name per result (a test that measured several cases gets ``-2``, ``-3``, ...)."""
    seen: dict[str, int] = {}
    names = []
    for r in results:
        base = slug(str(r.get("nodeid", "")))
        seen[base] = seen.get(base, 0) + 1
        names.append(f"{base}{'' if seen[base] == 1 else f'-{seen[base]}'}.{fmt}")
    return names


def write_case_images(results: list[dict[str, Any]], folder: Path, fmt: str = "png",
                      baseline: list[dict[str, Any]] | None = None) -> list[Path | None]:
    """One image per case with charts into ``folder`` (created); None for cases with nothing to draw."""
    from pytest_specperf.report import drawing  # matplotlib is loaded only by runs that draw

    folder.mkdir(parents=True, exist_ok=True)
    out: list[Path | None] = []
    for name, r in zip(image_names(results, fmt), results, strict=True):
        v = view(r, baseline)
        if not v.charts:
            out.append(None)
            continue
        path = folder / name
        write_text_atomic(path, drawing.case_image(v, fmt, salt=name, title=case_title(r)))
        out.append(path)
    return out


class CasePlots(Output):
    """``--specperf-plots``: one image per case with charts; the images are left in ``meta.images``."""

    name = "plots"
    option = "--specperf-plots"
    setting = "plots"
    done = "plots written to {path}"

    def write(self, results: list[dict[str, Any]], meta: Meta, path: Path) -> None:
        """Write the images into the folder ``path``; later outputs (Markdown, pytest-html) link or reuse them."""
        meta.images = write_case_images(results, path, baseline=meta.baseline)
