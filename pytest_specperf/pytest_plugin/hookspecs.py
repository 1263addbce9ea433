"""Hooks a project's ``conftest.py`` can implement to tell the plugin what it cannot see for itself.

They are registered through ``pytest_addhooks``, so pytest checks their names and arguments.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_specperf_run_metadata(config: pytest.Config) -> dict[str, Any] | None:
    """Return facts about the deploy under test (GPU, engine version, speculation config, deploy id).

    Every implementation's dict is merged, in plugin order, into the ``run`` metadata of the
    ``--specperf-json`` file and of a saved run (``--specperf-save``), so a baseline says what it measured.
    Called once per run, at its end, in the process that writes the reports. Values must be JSON-able.

    Example (``conftest.py``)::

        import os

        def pytest_specperf_run_metadata(config):
            return {"gpu": "8x RTX PRO 6000", "engine": "sglang 0.5.3",
                    "speculation": "ddtree k=8", "deploy_id": os.environ.get("DEPLOY_ID")}
    """


@pytest.hookspec
def pytest_specperf_verdict(config: pytest.Config, result: dict[str, Any]) -> dict[str, Any] | None:
    """Veto or annotate a case's verdict after the plugin judged it; return None to leave it alone.

    ``result`` is the case's result dict (``verdict``, ``reason`` and every figure). Return a dict with any of:
    ``verdict`` (``"passed"`` or ``"failed"``), ``reason`` (why, shown with the verdict) and ``note`` (a line
    added to the result's ``notes``, shown in the table). A changed verdict always names the hook's reason,
    so a waived failure never reads like a clean pass. A case that could not be measured (``error``) stays
    an error.

    Example (``conftest.py``): waive a known slow case until a fix ships::

        def pytest_specperf_verdict(config, result):
            if result["nodeid"].endswith("test_long_reasoning_holds") and result["verdict"] == "failed":
                return {"verdict": "passed", "reason": "waived until the KV fix (ticket 123)"}
    """
