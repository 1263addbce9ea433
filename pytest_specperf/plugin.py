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

from . import __version__, benchmark_bridge, exports, gating, html_extras, live_progress, storage
from .errors import ConfigError, MeasurementError
from .files import write_text_atomic
from .options import STEP_SUMMARY, Settings, add_options, read_settings
from .report import table, write_json_atomic
from .report_files import ReportFiles
from .session import EndpointSession, SharedStart
from .spec import AUTO_MAX_REPEAT, SPECS, CaseSpec, CtxSweepSpec, build_spec, marker_help
from .yamlcases import is_case_file, load_cases

SETTINGS = pytest.StashKey[Settings]()
SESSION = pytest.StashKey[EndpointSession]()
AB_A = pytest.StashKey[EndpointSession]()  # --specperf-ab: SESSION is B (the candidate), this is A
BASELINE = pytest.StashKey[list[dict[str, Any]]]()
BASELINE_RUN = pytest.StashKey[storage.Run]()
BASELINE_DIFFS = pytest.StashKey[list[str]]()  # how the baseline was measured unlike this run
SHARED = pytest.StashKey[SharedStart]()  # xdist controller: starts the endpoint when a worker first needs it


class SpecperfWarning(pytest.PytestWarning):
    """A comparison too noisy to decide, a baseline that could not be read, and the like."""
SPEC = pytest.StashKey[CaseSpec]()
RESULTS = pytest.StashKey[list[dict[str, Any]]]()
PROP = "specperf"  # user_properties key carrying a result dict


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


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
    url = model = shared = None
    if _is_worker(config):
        # One simulator/engine for all workers, started by the controller when the first worker needs it.
        url = config.workerinput.get("specperf_url")  # type: ignore[attr-defined]
        model = config.workerinput.get("specperf_model")  # type: ignore[attr-defined]
        folder = config.workerinput.get("specperf_shared")  # type: ignore[attr-defined]
        shared = Path(folder) if folder else None
    source = "--endpoint"
    if settings.ab:
        config.stash[AB_A] = EndpointSession(settings, url=settings.ab[0], source="--specperf-ab")
        url, source = settings.ab[1], "--specperf-ab"
    if settings.compare is not None:
        config.stash[BASELINE] = _load_baseline(config, settings)
    session = EndpointSession(settings, url=url, model=model, source=source, shared=shared)
    session.progress = live_progress.install(config, _is_worker(config))
    config.stash[SESSION] = session
    if not _is_worker(config):
        config.pluginmanager.register(Reporter(config), "specperf-reporter")
        config.pluginmanager.register(ReportFiles(config, settings, config.stash.get(BASELINE, None)), "specperf-files")
        if html_extras.wanted(config):
            config.pluginmanager.register(html_extras.HtmlExtras(config.stash.get(BASELINE, None)), "specperf-html")


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
    config.stash[BASELINE_RUN] = run
    return run.results


def _baseline_differences(config: pytest.Config, session: EndpointSession) -> list[str]:
    """How the saved baseline was measured unlike this run (once per run, after the endpoint is known)."""
    if BASELINE_DIFFS not in config.stash:
        run = config.stash.get(BASELINE_RUN, None)
        config.stash[BASELINE_DIFFS] = storage.fingerprint_diff(run, _run_meta(session)) if run else []
    return config.stash[BASELINE_DIFFS]


def _run_meta(session: EndpointSession) -> dict[str, Any]:
    """What identifies this run's measurements: plugin, endpoint, model, server kind and version, machine."""
    info = session.client.info
    return {"plugin_version": __version__, "endpoint": session.client.url, "model": session.client.model,
            "server": info.kind if info else None, "server_version": info.details.get("version") if info else None,
            "machine": storage.machine_info()}


def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(SHARED, None)
    if shared is not None:
        shared.close()  # first: a start under way finishes, so the session below stops what it started
    for key in (SESSION, AB_A):
        session = config.stash.get(key, None)
        if session is not None:
            session.close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand every worker the endpoint's URL, or where to ask for it to be started.

    Nothing is started here: a run whose workers collect no perf case never starts a simulator or engine.
    """
    config = node.config
    session = config.stash[SESSION]
    if session.given_url is not None:
        node.workerinput["specperf_url"] = session.given_url
    else:
        if SHARED not in config.stash:
            config.stash[SHARED] = SharedStart(session)
        node.workerinput["specperf_shared"] = str(config.stash[SHARED].folder)
    if session.model:
        node.workerinput["specperf_model"] = session.model


def pytest_report_header(config: pytest.Config) -> str:
    s = config.stash[SETTINGS]
    if s.ab:
        target = f"A/B, A={s.ab[0]} (baseline), B={s.ab[1]} (candidate)"
    elif s.endpoint:
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
        if not cases:
            self.warn(SpecperfWarning(f"{self.path.name} holds no perf cases; add one, e.g. "
                                      "'my_case: {sustained: {tokens: 500}}', or delete the file"))
        for name, spec, kwargs, marks in cases:
            item = YamlCaseItem.from_parent(self, name=name, spec=spec)
            item.add_marker(getattr(pytest.mark, spec.KIND)(**kwargs))
            for m in marks:
                _register_yaml_mark(self.config, m, self.path.name)
                item.add_marker(m)
            yield item


def _register_yaml_mark(config: pytest.Config, name: str, file: str) -> None:
    """A mark a YAML case names is registered, as a conftest would, so it selects (-m) without a warning.

    Under --strict-markers it is left to pytest: an unregistered mark is then an error, as in Python tests.
    """
    if _strict_markers(config):
        return
    if name not in {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}:
        config.addinivalue_line("markers", f"{name}: named by perf cases in {file}")


def _strict_markers(config: pytest.Config) -> bool:
    for ini in ("strict_markers", "strict"):  # pytest 9 reads "strict" when "strict_markers" is unset
        try:
            value = config.getini(ini)
        except ValueError:  # an older pytest without that ini key
            continue
        if value is not None:
            return bool(value)
    return bool(getattr(config.option, "strict_markers", False))


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
    if result.get("verdict") in ("passed", "failed"):
        _hooks_verdict(item.config, result)
    item.stash.setdefault(RESULTS, []).append(result)


def _hooks_verdict(config: pytest.Config, result: dict[str, Any]) -> None:
    """Let the project's ``pytest_specperf_verdict`` hooks veto or annotate a judged case."""
    for change in config.hook.pytest_specperf_verdict(config=config, result=result):
        if not isinstance(change, dict):
            continue
        why = str(change.get("reason") or "no reason given")
        verdict = change.get("verdict")
        if verdict in ("passed", "failed") and verdict != result["verdict"]:
            was = result["verdict"] + (f": {result['reason']}" if result.get("reason") else "")
            result["verdict"] = verdict
            result["reason"] = f"{verdict} by pytest_specperf_verdict ({why}); the plugin said {was}"
        if change.get("note"):
            result.setdefault("notes", []).append(str(change["note"]))


def _error_record(item: pytest.Item, spec: CaseSpec, reason: str) -> dict[str, Any]:
    record = {"nodeid": item.nodeid, "kind": spec.KIND, "ctx": spec.ctx, "content": spec.content,
              "verdict": "error", "reason": reason}
    for name in ("tokens", "short", "long"):
        if hasattr(spec, name):
            record[name] = getattr(spec, name)
    if isinstance(spec, CtxSweepSpec):
        record["ctx"] = max(spec.ctxs)
    return record


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
                                                _baseline_differences(config, session), settings.compare_strict,
                                                auto=auto)
    except (MeasurementError, ConfigError) as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:  # failed outside the except block, so no "during handling of the above exception" chain
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
        __tracebackhide__ = True  # a misspelt field is the test's mistake: show its line, not this one
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
        try:
            spec = build_spec(kind, kwargs)
        except ConfigError as exc:
            raise ConfigError(f"specperf.{exc}") from None  # "specperf.sustained(): unknown keyword ..."
        done = self._item.stash.get(RESULTS, [])
        n = sum(1 for r in done if r.get("kind") == kind)
        call = 1 + sum(1 for r in done if "call" in r)  # tells a test's direct calls apart in the table
        try:
            result = self._session.runner.run(spec, f"{self._item.nodeid}#{kind}{n}")
        except MeasurementError as exc:
            _record(self._item, {**_error_record(self._item, spec, str(exc)), "call": call})
            raise
        result.nodeid = self._item.nodeid
        _record(self._item, {**result.as_dict(), "call": call})
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

    def rate(self, **kwargs: Any) -> Any:
        """Measure an open-loop rate case now (same keywords as the marker)."""
        return self._direct("rate", kwargs)

    def capacity(self, **kwargs: Any) -> Any:
        """Search the highest rate within the SLO now (same keywords as the marker)."""
        return self._direct("capacity", kwargs)


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
    message = ""
    try:
        res = yield
    except MeasurementError as exc:  # a direct call that could not measure: an error, as for a marker case
        item.stash[_DIRECT_ERROR] = True
        tail = item.config.stash[SESSION].log_tail()
        message = f"could not measure: {exc}" + (f"\nengine log tail:\n{tail}" if tail else "")
    except ConfigError as exc:  # a user mistake in a direct call or in using specperf.result: its one line
        message = str(exc)
    if message:
        pytest.fail(message, pytrace=False)  # outside the except: no "during handling" chain is shown
    if isinstance(item, pytest.Function):
        reason = _failed_reason(item)
        if reason:
            pytest.fail(reason, pytrace=False)
    return res


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when == "call" and report.failed and item.stash.get(_DIRECT_ERROR, False):
        report.specperf_error = True  # travels with the report (xdist copies its attributes)
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
_DIRECT_ERROR = pytest.StashKey[bool]()


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """A direct call that could not measure is an ERROR (as a marker case's setup error is), never FAILED."""
    if report.when == "call" and report.failed and getattr(report, "specperf_error", False):
        return "error", "E", ("ERROR", {"red": True})
    return None


# -- reporting ----------------------------------------------------------------------------------


class Reporter:
    """The one writer of the table and the output files (the controller under xdist), fed by reports.

    A write that fails mid-run (disk full, folder removed) is a warning: the run, its table and pytest's
    summary still complete. Paths were checked for writability before anything ran.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[SETTINGS]
        self.results: list[dict[str, Any]] = []
        self.saved: Path | None = None
        self._run_meta: dict[str, Any] | None = None
        self.write_errors: dict[str, str] = {}  # option -> what went wrong (first failure only)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PROP and isinstance(value, dict):
                self.results.append(value)
                self.write_json()  # after every case, so a killed run keeps what it measured

    def _write(self, option: str, path: Path | str, write: Any) -> bool:
        try:
            write()
        except OSError as exc:
            self.write_errors.setdefault(option, f"could not write {path} ({exc.strerror or exc})")
            return False
        self.write_errors.pop(option, None)
        return True

    def run_metadata(self) -> dict[str, Any]:
        """What the project's ``pytest_specperf_run_metadata`` hooks say about the deploy (asked once)."""
        if self._run_meta is None:
            self._run_meta = {}
            for part in self.config.hook.pytest_specperf_run_metadata(config=self.config):
                if isinstance(part, dict):
                    self._run_meta.update(part)
        return self._run_meta

    def write_json(self) -> None:
        """Write all results so far (atomically) if --specperf-json was given."""
        path = self.settings.json_path
        if path is None:
            return
        meta = {"endpoint": self.results[0].get("endpoint") if self.results else self.settings.endpoint,
                "run": self.run_metadata()}
        self._write("--specperf-json", path, lambda: write_json_atomic(path, self.results, meta,
                                                                       redact=[self.settings.api_key or ""]))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write_json()  # also on Ctrl-C: every case finished so far is in the file
        if self.results:
            self._write_summaries(_partial(session, exitstatus, self.results))
        for option, problem in self.write_errors.items():
            warnings.warn(SpecperfWarning(f"{option}: {problem}; the results are in the table below"), stacklevel=1)

    def _write_summaries(self, partial: str) -> None:
        s = self.settings
        compared = s.compare is not None or s.ab is not None
        files = self.config.pluginmanager.get_plugin("specperf-files")  # wrote --specperf-plots just before
        if s.markdown:
            md = s.markdown
            text = exports.markdown_summary(self.results, gating.comparisons_of(self.results) if compared else None,
                                            against="A" if s.ab else "baseline",
                                            plots=files.links(md) if files else None)
            self._write("--specperf-markdown", md, lambda: write_text_atomic(md, text))
            summary = os.environ.get(STEP_SUMMARY)
            if summary:  # only with --specperf-markdown: the plugin writes nothing it was not asked for

                def append() -> None:
                    with open(summary, "a", encoding="utf-8") as fh:
                        fh.write("## specperf\n\n" + text)

                self._write(f"${STEP_SUMMARY}", summary, append)
        if s.bencher:
            import json

            bencher = s.bencher
            text = json.dumps(exports.bencher_json(self.results), indent=2)
            self._write("--specperf-bencher", bencher, lambda: write_text_atomic(bencher, text))
        if s.save is not None:
            first = self.results[0]
            meta = {"plugin_version": __version__, "endpoint": first.get("endpoint"), "model": first.get("model"),
                    "server": first.get("server"), "server_version": first.get("server_version"),
                    "partial": partial, "run": self.run_metadata()}
            folder = storage_folder(self.config, s)

            def save() -> None:
                self.saved = storage.save_run(folder, self.results, meta, s.save or None, root=self.config.rootpath,
                                              redact=[s.api_key or ""])

            self._write("--specperf-save", folder, save)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        terminalreporter.section("specperf")
        for line in table(self.results):
            terminalreporter.write_line(line)
        if self.settings.json_path and "--specperf-json" not in self.write_errors:
            terminalreporter.write_line(f"results written to {self.settings.json_path}")
        if self.saved is not None:
            terminalreporter.write_line(f"run saved as {self.saved}")
        for option, problem in self.write_errors.items():
            terminalreporter.write_line(f"{option}: {problem}", red=True)


def _partial(session: pytest.Session, exitstatus: int, results: list[dict[str, Any]]) -> str:
    """Why a run is not a whole baseline ('' when it is): interrupted, stopped early, or cases that errored."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    if session.shouldstop or session.shouldfail:
        return f"stopped early: {session.shouldstop or session.shouldfail}"
    errors = sum(r.get("verdict") == "error" for r in results)
    return f"{errors} case(s) could not be measured" if errors else ""
