"""pytest-html: each perf case's row carries its figures and its plot (pytest-html's extras API)."""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pytest_html", reason="pytest-html is part of the test extra: pip install -e '.[test]'")

CASES = '''
import pytest

@pytest.mark.two_point(ctx=200, repeat=2, long=1032)
def test_tp(specperf):
    pass

@pytest.mark.sustained(tokens=300, ctx=200, min_tps=1e5)
def test_sus(specperf):
    pass

def test_plain():
    pass
'''


def test_perf_rows_carry_figures_and_a_plot(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
    done = subprocess.run([sys.executable, "-m", "pytest", "test_cases.py", "-p", "no:cacheprovider",
                           "--specperf-sim-speed=8", "--html=report.html", "--self-contained-html",
                           "--specperf-json=r.json"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 1, done.stdout[-2000:]  # test_sus fails its (unreachable) floor
    page = (tmp_path / "report.html").read_text()
    blob = json.loads(html.unescape(re.search(r'data-jsonblob="(.*?)"', page, re.S).group(1)))
    results = {r["nodeid"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    for nodeid, r in results.items():
        extras = [e for rep in blob["tests"][nodeid] for e in rep.get("extras", [])]
        block = next(e["content"] for e in extras if e["format_type"] == "html")
        assert f"specperf {r['kind']}: {r['verdict']}" in block
        assert f"{r['decode_tps']:.1f} tok/s" in block
        if r["verdict"] == "failed":
            assert html.escape(r["reason"]) in block
        image = next(e["content"] for e in extras if e["format_type"] == "image")
        png = base64.b64decode(image.removeprefix("data:image/png;base64,"))
        px = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
        assert px.shape[0] > 100 and (px < 200).mean() > 0.01
    assert not [e for rep in blob["tests"]["test_cases.py::test_plain"] for e in rep.get("extras", [])]
