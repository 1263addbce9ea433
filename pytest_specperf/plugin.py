"""pytest hooks for pytest-specperf: options, markers, fixtures, collection, verdicts, summary.

Thin by design: measurement lives in the runner and below, which never import pytest.
Per-case results ride on reports as plain data (``user_properties``), so the table and the
JSON file are built the same way with and without xdist, by the one process that writes them.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from . import __version__, benchmark_bridge, exports, gating, storage
from .errors import ConfigError, MeasurementError
from .options import Settings, add_options, read_settings
from .report import table, write_json_atomic
from .session import EndpointSession
from .spec import AUTO_MAX_REPEAT, SPECS, CaseSpec, build_spec, marker_help
from .yamlcases import is_case_file, load_cases

SETTINGS = pytest.StashKey[Settings]()
SESSION = pytest.StashKey[EndpointSession]()
AB_A = pytest.StashKey[EndpointSession]()  # --specperf-ab: SESSION is B (the candidate), this is A
BASELINE = pytest.StashKey[list[dict[str, Any]]]()


class SpecperfWarning(pytest.PytestWarning):
    """A comparison too noisy to decide, a baseline that could not be read, and the like."""
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
    if settings.ab:
        config.stash[AB_A] = EndpointSession(settings, url=settings.ab[0])
        url = settings.ab[1]
    if settings.compare is not None:
        config.stash[BASELINE] = _load_baseline(config, settings)
    session = EndpointSession(settings, url=url, model=model)
    session.progress = _progress_factory(config)
    config.stash[SESSION] = session
    if not _is_worker(config):
        config.pluginmanager.register(Reporter(config), "specperf-reporter")


def storage_folder(config: pytest.Config, settings: Settings) -> Path:
    """Saved runs live relative to the rootdir, not the cwd, so every invocation finds the same ones."""
    return config.rootpath / settings.storage


def _load_baseline(config: pytest.Config, settings: Settings) -> list[dict[str, Any]]:
    folder = storage_folder(config, settings)
    path = storage.find_run(folder, settings.compare or None)
    if path is None:
        what = f"saved run {settings.compare!r}" if settings.compare else "saved run"
        raise pytest.UsageError(f"--specperf-compare: no {what} in {folder}; save one first with --specperf-save")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = storage.load_run(path)
    if run is None:
        reason = str(caught[0].message) if caught else f"{path} could not be read"
        # A corrupt or old baseline is a warning and no comparison, never a crash.
        config.issue_config_time_warning(SpecperfWarning(f"{reason}; comparisons skipped"), stacklevel=2)
        return []
    return run.results


def pytest_unconfigure(config: pytest.Config) -> None:
    for key in (SESSION, AB_A):
        session = config.stash.get(key, None)
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bench = benchmark_bridge.wanted(config)
    for item in items:
        if isinstance(item, pytest.Function) and SPEC in item.stash:
            for name in ("specperf", "benchmark") if bench else ("specperf",):
                if name not in item.fixturenames:
                    item.fixturenames.append(name)  # marker cases need them even if they don't ask


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


def _measure_marked(item: pytest.Item) -> None:
    """Measure the item's marker case once; a run that cannot measure becomes a one-line setup error."""
    spec = item.stash.get(SPEC, None)
    if spec is None:
        return None
    config = item.config
    session = config.stash[SESSION]
    settings = config.stash[SETTINGS]
    gate = gating.Gate(settings.max_regression, settings.inconclusive)
    notes: list[str] = []
    try:
        auto = spec.repeat == "auto"
        if AB_A in config.stash and auto:
            a, one = config.stash[AB_A], dataclasses.replace(spec, repeat=1, max_repeat=None)  # a trial per round
            record, notes = gating.run_ab_auto(lambda: a.runner.run(one, item.nodeid),
                                               lambda: session.runner.run(one, item.nodeid),
                                               spec.max_repeat or AUTO_MAX_REPEAT, gate, spec.max_regression)
        elif AB_A in config.stash:
            a = config.stash[AB_A]
            record, notes = gating.run_ab(lambda: a.runner.run(spec, item.nodeid),
                                          lambda: session.runner.run(spec, item.nodeid),
                                          settings.ab_trials, gate, spec.max_regression)
        else:
            until = (gating.until_baseline(gate, item.nodeid, config.stash[BASELINE], spec.max_regression)
                     if auto and BASELINE in config.stash else None)
            result = session.runner.run(spec, item.nodeid, until=until)
            record = result.as_dict()
            record["nodeid"] = item.nodeid
            if BASELINE in config.stash:
                notes = gating.against_baseline(gate, record, config.stash[BASELINE], spec.max_regression,
                                                auto=auto)
    except (MeasurementError, ConfigError) as exc:
        reason = str(exc)
        _record(item, _error_record(item, spec, reason))
        tail = session.log_tail()
        pytest.fail(f"could not measure: {reason}" + (f"\nengine log tail:\n{tail}" if tail else ""), pytrace=False)
    for note in [*notes, *record.get("warnings", [])]:
        item.warn(SpecperfWarning(note))
    _record(item, record)
    item.stash[_RESULT_OBJ] = _ResultView(record)
    return None


class _ResultView:
    """Attribute access to a result dict (``specperf.result.decode_tps``), whatever produced it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"no result field {name!r}; fields: {', '.join(self._data)}") from None

    def as_dict(self) -> dict[str, Any]:
        """The plain result dict."""
        return dict(self._data)

    def __repr__(self) -> str:
        return f"Result({self._data.get('kind')}, decode_tps={self._data.get('decode_tps')})"


_RESULT_OBJ = pytest.StashKey[_ResultView]()


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
        for warning in result.warnings:
            self._item.warn(SpecperfWarning(warning))
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

    def load_sweep(self, **kwargs: Any) -> Any:
        """Measure a concurrency sweep now (same keywords as the marker)."""
        return self._direct("load_sweep", kwargs)


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
        bench = item.funcargs.get("benchmark") if SPEC in item.stash else None
        for r in item.stash.get(RESULTS, []) if bench is not None else []:
            problem = benchmark_bridge.feed(bench, r)
            if problem:
                item.warn(SpecperfWarning(problem))
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
            # JUnit XML writes the item's properties at teardown: flat, string-valued, one per field.
            item.user_properties.extend(exports.junit_properties(r))
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
        self.saved: Path | None = None

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
        s = self.settings
        if not self.results:
            return
        compared = s.compare is not None or s.ab is not None
        if s.markdown or os.environ.get("GITHUB_STEP_SUMMARY"):
            text = exports.markdown_summary(self.results, gating.comparisons_of(self.results) if compared else None)
            if s.markdown:
                _atomic_text(s.markdown, text)
            summary = os.environ.get("GITHUB_STEP_SUMMARY")
            if summary:
                with open(summary, "a", encoding="utf-8") as fh:
                    fh.write("## specperf\n\n" + text)
        if s.bencher:
            import json

            _atomic_text(s.bencher, json.dumps(exports.bencher_json(self.results), indent=2))
        if s.save is not None:
            meta = {"plugin_version": __version__, "endpoint": self.results[0].get("endpoint"),
                    "model": self.results[0].get("model"), "server": self.results[0].get("server")}
            self.saved = storage.save_run(storage_folder(self.config, s), self.results, meta, s.save or None,
                                          root=self.config.rootpath, redact=[s.api_key or ""])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        terminalreporter.section("specperf")
        for line in table(self.results):
            terminalreporter.write_line(line)
        if self.settings.json_path:
            terminalreporter.write_line(f"results written to {self.settings.json_path}")
        if self.saved is not None:
            terminalreporter.write_line(f"run saved as {self.saved}")


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
