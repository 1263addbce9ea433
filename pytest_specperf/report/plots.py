"""``--specperf-plots``: one image per case with charts (PNG, or SVG), named after its test.

The charts are the case's view (``views.registry``), drawn by ``drawing`` (matplotlib, loaded only when
something is drawn). Never imports pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.results import Recorded
from pytest_specperf.files import write_text_atomic
from pytest_specperf.report.output import Meta, Output
from pytest_specperf.report.table import Row, as_case
from pytest_specperf.report.views.registry import view


def case_title(result: Recorded | Row | Mapping[str, Any]) -> str:
    """"<node id>: <verdict>", the heading of a case's image, so a PNG on its own says what it shows."""
    r = as_case(result)
    return f"{r.nodeid}: {r.verdict or '-'}"


def slug(text: str) -> str:
    """A file-name-safe form of a node id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.")[:120] or "case"


def image_names(results: Iterable[Recorded | Row | Mapping[str, Any]], fmt: str) -> list[str]:
    """One unique file name per result (a test that measured several cases gets ``-2``, ``-3``, ...)."""
    seen: dict[str, int] = {}
    names = []
    for r in map(as_case, results):
        base = slug(str(r.nodeid))
        seen[base] = seen.get(base, 0) + 1
        names.append(f"{base}{'' if seen[base] == 1 else f'-{seen[base]}'}.{fmt}")
    return names


def write_case_images(results: Sequence[Recorded | Mapping[str, Any]], folder: Path, fmt: str = "png",
                      baseline: Sequence[Recorded | Mapping[str, Any]] | None = None) -> list[Path | None]:
    """One image per case with charts into ``folder`` (created); None for cases with nothing to draw."""
    from pytest_specperf.report import drawing  # matplotlib is loaded only by runs that draw

    folder.mkdir(parents=True, exist_ok=True)
    typed = [as_case(r) for r in results]
    base = None if baseline is None else [_json_of(b) for b in baseline]  # the views read JSON for now (issue 36)
    out: list[Path | None] = []
    for name, r, given in zip(image_names(typed, fmt), typed, results, strict=True):
        v = view(_json_of(given), base)
        if not v.charts:
            out.append(None)
            continue
        path = folder / name
        write_text_atomic(path, drawing.case_image(v, fmt, salt=name, title=case_title(r)))
        out.append(path)
    return out


def _json_of(result: Recorded | Mapping[str, Any]) -> dict[str, Any]:
    """A result's JSON: a record's ``to_dict``, a result given as JSON (a saved run's) as it is."""
    return dict(result) if isinstance(result, Mapping) else to_dict(result)


class CasePlots(Output):
    """``--specperf-plots``: one image per case with charts; the images are left in ``meta.images``."""

    name = "plots"
    option = "--specperf-plots"
    setting = "plots"
    done = "plots written to {path}"

    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Write the images into the folder ``path``; later outputs (Markdown, pytest-html) link or reuse them."""
        meta.images = write_case_images(results, path, baseline=meta.baseline)
