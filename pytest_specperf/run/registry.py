"""The one explicit map from a case kind's name to its kind: the only module in ``run`` that imports the kinds.

Adding a kind: its spec in ``cases`` (and ``cases.registry.SPECS``), its module here in ``run``, one line
below, and its chart view in ``report/views/registry.py`` (docs/architecture.md walks through it).
"""

from __future__ import annotations

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.run.capacity import Capacity
from pytest_specperf.run.case_kind import AnyKind
from pytest_specperf.run.ctx_sweep import CtxSweep
from pytest_specperf.run.load import LoadSweep
from pytest_specperf.run.rate import Rate
from pytest_specperf.run.replay import Replay
from pytest_specperf.run.session import Session
from pytest_specperf.run.sustained import Sustained
from pytest_specperf.run.two_point import TwoPoint

#: Every case kind by name (the spec's ``KIND``).
KINDS: dict[str, type[AnyKind]] = {
    "sustained": Sustained,
    "two_point": TwoPoint,
    "ctx_sweep": CtxSweep,
    "load_sweep": LoadSweep,
    "rate": Rate,
    "capacity": Capacity,
    "session": Session,
    "replay": Replay,
}


def kind_for(spec: CaseSpec) -> AnyKind:
    """The kind that measures and judges ``spec``."""
    cls = KINDS.get(spec.KIND)
    if cls is None or not isinstance(spec, cls.spec_type):
        raise TypeError(f"unknown spec {spec!r}")
    return cls()
