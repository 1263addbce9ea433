"""The validated settings of one run: what the options and their ini twins asked for (``options`` reads them).

Core code (the session, the report writers) takes a ``Settings``; only ``options`` needs pytest to build one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


@dataclass(frozen=True)
class Settings:
    """Validated settings for one pytest run."""

    endpoint: str | None
    model: str | None
    api_key_env: str | None
    sim: str
    sim_speed: float
    engine: str | None
    engine_model: Path | None
    engine_preset: str
    engine_args: tuple[str, ...]
    timeout: float
    json_path: Path | None
    max_drift: float
    save: str | None = None  # "" = save under an automatic name
    compare: str | None = None  # "" = the latest saved run
    storage: str = ".specperf/runs"
    max_regression: float = 0.05
    inconclusive: str = "warn"
    ab: tuple[str, str] | None = None
    ab_trials: int = 5  # trials per arm, A/B and arms alike
    arms: tuple[tuple[str, str], ...] | None = None  # --specperf-arms: (name, url) in the order given
    arms_baseline: str | None = None
    arms_tokens: tuple[tuple[str, int], ...] | None = None  # speculative tokens per arm, where known
    engine_arms: tuple[int, ...] | None = None  # --specperf-engine-arms: one local engine per K (0: none)
    markdown: Path | None = None
    bencher: Path | None = None
    compare_strict: bool = False
    html: Path | None = None
    plots: Path | None = None
    prompts: str | None = None  # the prompt file of cases that ask for no prompts (absolute, or builtin:NAME)
    history: str | None = None  # --specperf-history: an absolute SQLite path or a postgresql:// URL; None = off
    workers: int | str = 1  # --specperf-workers: local processes sending a load case ("auto": as the case needs)
    hosts: tuple[str, ...] = ()  # --specperf-hosts: execnet specs of other hosts, one worker each

    @property
    def api_key(self) -> str | None:
        """The API key from the environment (never from the command line)."""
        names = [self.api_key_env] if self.api_key_env else ["SPECPERF_API_KEY", "OPENAI_API_KEY"]
        for name in names:
            if os.environ.get(name):
                return os.environ[name]
        return None
