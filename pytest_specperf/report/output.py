"""The one shape of an output format: a name, the option that asks for it, and ``write(results, meta, path)``.

Each format is one module (``json_file``, ``plots``, ``markdown``, ``bencher``, ``html``) and one line in
``registry.OUTPUTS``. The pytest layer's report writer runs every output asked for, each guarded on its own:
one that raises is a warning naming its option (``problem``), never the loss of the table or the other files.
Never imports pytest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_specperf.errors import shorten

if TYPE_CHECKING:
    from pytest_specperf.cases.result_parts import CaseComparison
    from pytest_specperf.cases.results import Recorded
    from pytest_specperf.settings import Settings


@dataclass
class Meta:
    """What an output may need besides the results: the run's metadata and what the other outputs made."""

    endpoint: str | None = None
    run: dict[str, Any] = field(default_factory=dict)  # the project's pytest_specperf_run_metadata
    about: dict[str, Any] | None = None  # commit, machine, time of the run (None: this run, measured now)
    root: Path | None = None  # where the commit of this run is read
    # the compared run's results (charts draw its trials); a plain mapping (a saved run's JSON) is read as one
    baseline: Sequence[Recorded | Mapping[str, Any]] | None = None
    comparisons: list[CaseComparison] | None = None  # None: this run was not compared
    against: str = "baseline"  # the other side of the comparisons: "baseline" or "A"
    redact: Sequence[str] = ()  # secrets (an API key) written as ***
    images: list[Path | None] = field(default_factory=list)  # one per result, once the plots are written
    paths: dict[str, Path] = field(default_factory=dict)  # every asked output's path, by output name


class Output(ABC):
    """An output format: written once after the last case (``live`` ones also after every case)."""

    #: the name in ``registry.OUTPUTS``
    name: ClassVar[str]
    #: the option that asks for it (``--specperf-...``), as its warning names it
    option: ClassVar[str]
    #: the ``Settings`` field holding its path (None or empty: not asked)
    setting: ClassVar[str]
    #: what the terminal says once it was written ("" for nothing)
    done: ClassVar[str] = ""
    #: written after every case as well, so a killed run keeps what it measured
    live: ClassVar[bool] = False

    def path(self, settings: Settings) -> Path | None:
        """Where this output goes in this run; None when it was not asked for."""
        return getattr(settings, self.setting, None) or None

    @abstractmethod
    def write(self, results: Sequence[Recorded | Mapping[str, Any]], meta: Meta, path: Path) -> None:
        """Write the output for ``results`` (typed results, or their JSON) to ``path``; raises what drawing or
        writing raised."""


class DrawError(Exception):
    """Some cases of an output could not be drawn; the message names them and why."""


def problem(exc: BaseException, path: Path | str) -> str:
    """One line saying why an output could not be written: the OS's reason, or the exception and its message."""
    if isinstance(exc, DrawError):
        return f"failed ({exc})"
    if isinstance(exc, OSError):
        return f"could not write {path} ({exc.strerror or exc})"
    return f"failed ({type(exc).__name__}: {shorten(str(exc), 200)})"
