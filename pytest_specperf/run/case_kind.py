"""The one small interface every case kind keeps (one module per kind; ``registry`` maps names to them).

A kind measures its spec through a ``CaseContext`` and judges the result; it never imports the
runner or the registry that dispatch to it. The runner holds the endpoint lock, times the case,
sizes it down and calls these.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, TypeVar

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.results import Result
from pytest_specperf.run.context import CaseContext, Until
from pytest_specperf.run.floors import JudgeSettings

S = TypeVar("S", bound=CaseSpec, contravariant=True)
R = TypeVar("R", bound=Result)


class CaseKind(Protocol[S, R]):
    """A kind of perf case: its marker name, its spec type, how it is measured and judged."""

    #: The marker / YAML / direct-call name, equal to ``spec_type.KIND``.
    name: ClassVar[str]
    #: The spec class its keywords build (``cases.registry.SPECS[name]``).
    spec_type: ClassVar[type[CaseSpec]]

    def context_needed(self, spec: S) -> tuple[int, int]:
        """(prompt tokens, generated tokens) of the case's largest request, checked before any prompt is built."""
        ...

    def measure(self, context: CaseContext, spec: S, nodeid: str, until: Until | None = None) -> R:
        """Measure the case on ``context``'s endpoint (``until``: the comparison ``repeat="auto"`` waits for)."""
        ...

    def judge(self, result: R, spec: S, settings: JudgeSettings) -> None:
        """Set the result's verdict and reason from the spec's floors and gates."""
        ...


#: A kind of any spec and result, as the registry holds them.
AnyKind = CaseKind[Any, Any]
