"""pytest hooks for pytest-specperf: options, markers, fixtures, collection, verdicts, summary.

Thin by design: measurement lives in the runner and below, which never import pytest.
Per-case results ride on reports as plain data (``user_properties``), so the table and the
JSON file are built the same way with and without xdist, by the one process that writes them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .errors import ConfigError, MeasurementError
from .options import Settings, add_options, read_settings
from .report import table, write_json_atomic
from .results import Result
from .session import EndpointSession
from .spec import SPECS, CaseSpec, build_spec, marker_help
from .yamlcases import is_case_file, load_cases

SETTINGS = pytest.StashKey[Settings]()
SESSION = pytest.StashKey[EndpointSession]()
SPEC = pytest.StashKey[CaseSpec]()
RESULTS = pytest.StashKey[list[dict[str, Any]]]()
PROP = "specperf"  # user_properties key carrying a result dict


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    for line in marker_help().values():
        config.addinivalue_line("markers", line)
    try:
        settings = read_settings(config)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS] = settings
    url = model = None
    if _is_worker(config):
        # The controller started the simulator/engine once; every worker measures that one endpoint.
        url = config.workerinput.get("specperf_url")  # type: ignore[attr-defined]
        model = config.workerinput.get("specperf_model")  # type: ignore[attr-defined]
    session = EndpointSession(settings, url=url, model=model)
    session.progress = _progress_factory(config)
    config.stash[SESSION] = session
    if not _is_worker(config):
        config.pluginmanager.register(Reporter(config), "specperf-reporter")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION, None)
    if session is not None:
        session.close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: start the endpoint once and hand its URL to every worker."""
    session = node.config.stash[SESSION]
    try:
        node.workerinput["specperf_url"] = session.url
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if session.model:
        node.workerinput["specperf_model"] = session.model


def pytest_report_header(config: pytest.Config) -> str:
    s = config.stash[SETTINGS]
    if s.endpoint:
        target = s.endpoint
    elif s.engine:
        target = f"local {s.engine} engine ({s.engine_preset}), started on first use"
    else:
        target = f"embedded simulator '{s.sim}'" + (f" x{s.sim_speed:g}" if s.sim_speed != 1 else "") + \
            ", started on first use"
    return f"specperf: endpoint={target}, max_drift={s.max_drift:g}, timeout={s.timeout:g}s"


# -- collection ---------------------------------------------------------------------------------


def _marker_spec(item: pytest.Item) -> CaseSpec | None:
    found = [(name, item.get_closest_marker(name)) for name in SPECS]
    found = [(n, m) for n, m in found if m is not None]
    if len(found) > 1:
        raise ConfigError(f"one perf marker per test, found {', '.join(n for n, _ in found)}")
    if not found:
        return None
    name, mark = found[0]
    assert mark is not None
    return build_spec(name, mark.kwargs, mark.args)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    """Validate perf markers where tests are made, so a misspelt keyword is a collection error."""
    res = yield
    items = res if isinstance(res, list) else [res] if res is not None else []
    for item in items:
        if isinstance(item, pytest.Function):
            try:
                spec = _marker_spec(item)
            except ConfigError as exc:
                raise collector.CollectError(f"{item.nodeid}: {exc}") from None
            if spec is not None:
                item.stash[SPEC] = spec
    return res


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if is_case_file(file_path):
        return YamlCaseFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and SPEC in item.stash and "specperf" not in item.fixturenames:
            item.fixturenames.append("specperf")  # marker cases need the fixture even if they don't ask for it


class YamlCaseFile(pytest.File):
    """A ``*.specperf.yaml`` file of perf cases."""

    def collect(self) -> Any:
        try:
            cases = load_cases(self.path)
        except ConfigError as exc:
            raise self.CollectError(str(exc)) from None
        for name, spec, kwargs, marks in cases:
            item = YamlCaseItem.from_parent(self, name=name, spec=spec)
            item.add_marker(getattr(pytest.mark, spec.KIND)(**kwargs))
            for m in marks:
                item.add_marker(m)
            yield item


class CaseFailed(Exception):
    """A perf floor or gate failed (YAML cases); shown as its one-line reason."""


class YamlCaseItem(pytest.Item):
    """One YAML perf case: measured in setup (so an unmeasurable run is an error), judged in the call."""

    def __init__(self, *, spec: CaseSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.stash[SPEC] = spec

    def setup(self) -> None:
        _measure_marked(self)

    def runtest(self) -> None:
        reason = _failed_reason(self)
        if reason:
            raise CaseFailed(reason)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed | MeasurementError | ConfigError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"specperf {self.spec.KIND}: {self.name}"


# -- measuring ----------------------------------------------------------------------------------


def _record(item: pytest.Item, result: dict[str, Any]) -> None:
    item.stash.setdefault(RESULTS, []).append(result)


def _error_record(item: pytest.Item, spec: CaseSpec, reason: str) -> dict[str, Any]:
    return {"nodeid": item.nodeid, "kind": spec.KIND, "ctx": spec.ctx, "content": spec.content,
            "verdict": "error", "reason": reason}


def _measure_marked(item: pytest.Item) -> Result | None:
    """Measure the item's marker case once; a run that cannot measure becomes a one-line setup error."""
    spec = item.stash.get(SPEC, None)
    if spec is None:
        return None
    session = item.config.stash[SESSION]
    try:
        result = session.runner.run(spec, item.nodeid)
    except (MeasurementError, ConfigError) as exc:
        reason = str(exc)
        _record(item, _error_record(item, spec, reason))
        tail = session.log_tail()
        pytest.fail(f"could not measure: {reason}" + (f"\nengine log tail:\n{tail}" if tail else ""), pytrace=False)
    _record(item, result.as_dict())
    item.stash[_RESULT_OBJ] = result
    return result


_RESULT_OBJ = pytest.StashKey[Result]()


def _failed_reason(item: pytest.Item) -> str:
    return "; ".join(r["reason"] for r in item.stash.get(RESULTS, []) if r.get("verdict") == "failed")


class SpecperfFixture:
    """What a perf case sees: ``.result`` for its marker, and direct calls measuring on the same endpoint."""

    def __init__(self, item: pytest.Item, session: EndpointSession) -> None:
        self._item = item
        self._session = session

    @property
    def result(self) -> Any:
        """The result of this test's marker case (measured once, before the test body ran)."""
        r = self._item.stash.get(_RESULT_OBJ, None)
        if r is None:
            raise ConfigError("specperf.result needs a perf marker on the test, e.g. "
                              "@pytest.mark.sustained(tokens=500); or call specperf.sustained(...)")
        return r

    def _direct(self, kind: str, kwargs: dict[str, Any]) -> Any:
        spec = build_spec(kind, kwargs)
        n = sum(1 for r in self._item.stash.get(RESULTS, []) if r.get("kind") == kind)
        result = self._session.runner.run(spec, f"{self._item.nodeid}#{kind}{n}")
        result.nodeid = self._item.nodeid
        _record(self._item, result.as_dict())
        return result

    def sustained(self, **kwargs: Any) -> Any:
        """Measure a sustained case now (same keywords as the marker)."""
        return self._direct("sustained", kwargs)

    def two_point(self, **kwargs: Any) -> Any:
        """Measure a two-point case now (same keywords as the marker)."""
        return self._direct("two_point", kwargs)

    def ctx_sweep(self, **kwargs: Any) -> Any:
        """Measure a context sweep now (same keywords as the marker)."""
        return self._direct("ctx_sweep", kwargs)


@pytest.fixture(scope="session")
def endpoint(pytestconfig: pytest.Config) -> dict[str, Any]:
    """The endpoint under test: url, model, detected server kind and what it supports."""
    try:
        return pytestconfig.stash[SESSION].describe()
    except (MeasurementError, ConfigError) as exc:
        pytest.fail(f"could not reach the endpoint: {exc}", pytrace=False)


@pytest.fixture
def specperf(request: pytest.FixtureRequest) -> SpecperfFixture:
    """Perf measurements for this test; a marker case is measured before the body runs."""
    item = request.node
    _measure_marked(item)
    return SpecperfFixture(item, request.config.stash[SESSION])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # A failed floor is the diagnosis: report it instead of running the body's own asserts.
    if isinstance(item, pytest.Function):
        reason = _failed_reason(item)
        if reason:
            pytest.fail(reason, pytrace=False)
    try:
        res = yield
    except MeasurementError as exc:  # a direct call that could not measure
        pytest.fail(f"could not measure: {exc}", pytrace=False)
    if isinstance(item, pytest.Function):
        reason = _failed_reason(item)
        if reason:
            pytest.fail(reason, pytrace=False)
    return res


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    results = item.stash.get(RESULTS, [])
    sent = item.stash.get(_SENT, 0)
    if results[sent:] and (call.when == "call" or report.failed):
        for r in results[sent:]:
            r["nodeid"] = item.nodeid
            report.user_properties.append((PROP, r))
        item.stash[_SENT] = len(results)
    return report


_SENT = pytest.StashKey[int]()


# -- reporting ----------------------------------------------------------------------------------


class Reporter:
    """The one writer of the table and the JSON file (the controller under xdist), fed by reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[SETTINGS]
        self.results: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROP and isinstance(value, dict):
                self.results.append(value)
                self.write_json()  # after every case, so a killed run keeps what it measured

    def write_json(self) -> None:
        """Write all results so far (atomically) if --specperf-json was given."""
        if self.settings.json_path is None:
            return
        meta = {"endpoint": self.results[0].get("endpoint") if self.results else self.settings.endpoint}
        write_json_atomic(self.settings.json_path, self.results, meta, redact=[self.settings.api_key or ""])

    def pytest_sessionfinish(self) -> None:
        self.write_json()  # also on Ctrl-C: every case finished so far is in the file

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        terminalreporter.section("specperf")
        for line in table(self.results):
            terminalreporter.write_line(line)
        if self.settings.json_path:
            terminalreporter.write_line(f"results written to {self.settings.json_path}")


def _progress_factory(config: pytest.Config) -> Any:
    """Live progress on a terminal (tokens so far, current rate); nothing when output is not a TTY."""
    if _is_worker(config) or os.environ.get("CI"):
        return None

    def for_case(nodeid: str) -> Any:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        tw = getattr(reporter, "_tw", None)  # the real terminal, also while test output is captured
        if tw is None or not tw.hasmarkup:
            return None

        def show(tokens: int, seconds: float) -> None:
            rate = tokens / seconds if seconds > 0 else 0.0
            # Save cursor, write, clear to end of line, restore: pytest's own line stays intact.
            tw.write(f"\x1b7 [{tokens} tokens, {rate:.0f} tok/s]\x1b[K\x1b8")
            tw.flush()

        return show

    return for_case
