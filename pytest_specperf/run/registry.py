"""The one explicit map from a case kind's name to its kind: the only module in ``run`` that imports the kinds.

Adding a kind: its spec in ``cases`` (and ``cases.registry.SPECS``), its module here in ``run``, one line
below, and its chart view in ``report/views/registry.py`` (docs/architecture.md walks through it).
"""

from __future__ import annotations

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.results import ErrorRecord
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


def error_record(nodeid: str, spec: CaseSpec, reason: str) -> ErrorRecord:
    """The record of a case that could not be measured: what it asked for, as its kind reads it, and why."""
    # The ctx the case asked for: a session's first message (not its last turn's whole history); any other kind
    # its largest prompt as the kind says (a sweep's longest ctx, a prompt file's longest prompt), since every
    # spec inherits a default ctx that a sweep or a prompt file never uses.
    ctx = spec.ctx if spec.KIND == "session" else kind_for(spec).context_needed(spec)[0]
    # concurrency and users: an errored load case or session still says how many users it was for
    concurrency = getattr(spec, "concurrency", None)
    return ErrorRecord(nodeid=nodeid, kind=spec.KIND, ctx=ctx, content=spec.content, reason=reason,
                       tokens=getattr(spec, "tokens", None), short=getattr(spec, "short", None),
                       long=getattr(spec, "long", None),
                       concurrency=list(concurrency) if isinstance(concurrency, tuple) else concurrency,
                       users=getattr(spec, "users", None), turns=getattr(spec, "turns", None))
