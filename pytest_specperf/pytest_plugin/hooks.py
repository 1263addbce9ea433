"""pytest hooks for pytest-specperf: options, markers, fixtures, collection, verdicts, summary.

Thin by design: measurement lives in the runner and below, which never import pytest.
Per-case results ride on reports as plain data (``user_properties``), so the table and the
JSON file are built the same way with and without xdist, by the one process that writes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.registry import SPECS, build_spec, marker_help
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.pytest_plugin import html_extras, interrupts, live_progress
from pytest_specperf.pytest_plugin.fixture import SpecperfFixture
from pytest_specperf.pytest_plugin.invalid_cases import check_for_run, invalid_in_place_of, warn_before_running
from pytest_specperf.pytest_plugin.keys import (
    AB_A,
    ARMS,
    BASELINE,
    BASELINE_RUN,
    DIRECT_ERROR,
    HISTORY,
    PROP,
    RESULTS,
    SENT,
    SESSION,
    SETTINGS,
    SHARED,
    SPEC,
    Recorded,
    SpecperfWarning,
)
from pytest_specperf.pytest_plugin.options import add_options, read_settings
from pytest_specperf.pytest_plugin.recording import failed_reason, is_worker, measure_marked, storage_folder
from pytest_specperf.pytest_plugin.report_writer import ReportWriter
from pytest_specperf.pytest_plugin.yaml_items import collect_file, unread_hint
from pytest_specperf.report import pytest_benchmark as benchmark_bridge
from pytest_specperf.report.junit import junit_properties
from pytest_specperf.run.target import EndpointSession, SharedStart, arm_name
from pytest_specperf.settings import Settings
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage.store import DEFAULT_FILE, Target
from pytest_specperf.urls import redact_text


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)

def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_specperf.pytest_plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)

def pytest_configure(config: pytest.Config) -> None:
    for line in marker_help().values():
        config.addinivalue_line("markers", line)
    try:
        settings = read_settings(config)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS] = settings
    interrupts.install(config)  # Ctrl-C and SIGTERM: stop within seconds in any phase, keep the run as partial
    url = model = shared = None
    if is_worker(config):
        # One simulator/engine for all workers, started by the controller when the first worker needs it.
        url = config.workerinput.get("specperf_url")  # type: ignore[attr-defined]
        model = config.workerinput.get("specperf_model")  # type: ignore[attr-defined]
        folder = config.workerinput.get("specperf_shared")  # type: ignore[attr-defined]
        shared = Path(folder) if folder else None
    source = "--endpoint"
    if settings.ab:
        config.stash[AB_A] = EndpointSession(settings, url=settings.ab[0], source="--specperf-ab")
        url, source = settings.ab[1], "--specperf-ab"
    if settings.arms:
        url, source = dict(settings.arms)[settings.arms_baseline or settings.arms[0][0]], "--specperf-arms"
    if settings.compare is not None:
        config.stash[BASELINE] = _load_baseline(config, settings)
    session = EndpointSession(settings, url=url, model=model, source=source, shared=shared)
    if settings.arms:  # the baseline arm is the session itself; the others are sessions of their own
        config.stash[ARMS] = {name: session if u == url else EndpointSession(settings, url=u, source=source)
                              for name, u in settings.arms}
    elif settings.engine_arms:  # one local engine per arm, each started when first measured
        names = [arm_name(k) for k in settings.engine_arms]
        baseline = names.index(settings.arms_baseline or names[0])  # _arms set it: the named arm or the first
        session = EndpointSession(settings, engine_arm=settings.engine_arms[baseline])
        config.stash[ARMS] = {name: session if name == settings.arms_baseline else
                              EndpointSession(settings, engine_arm=k) for name, k in zip(names, settings.engine_arms,
                                                                                         strict=True)}
    session.progress = live_progress.install(config, is_worker(config))
    config.stash[SESSION] = session
    if settings.history is not None or (settings.save is not None and not is_worker(config)):
        # Imported here, not at the top: the history and its judging stack (0.3 s of CPU) serve only a run given
        # --specperf-history or --specperf-save, and every other pytest process would import them unused.
        from pytest_specperf.history.session import HistorySession, target_of

        if settings.history is not None:
            config.stash[HISTORY] = HistorySession(target_of(settings.history))
        else:  # a saved run is recorded in the default history
            config.stash[HISTORY] = HistorySession(Target(path=config.rootpath / DEFAULT_FILE), gating=False)
    if not is_worker(config):
        base = config.stash.get(BASELINE, None)
        config.pluginmanager.register(ReportWriter(config, base), "specperf-reporter")
        if html_extras.wanted(config):
            extras = html_extras.HtmlExtras(config, base)
            config.pluginmanager.register(extras, "specperf-html")

def _load_baseline(config: pytest.Config, settings: Settings) -> list[Recorded]:
    folder = storage_folder(config, settings)
    path = storage.find_run(folder, settings.compare or None)
    if path is None:
        what = f"saved run {settings.compare!r}" if settings.compare else "saved run"
        raise pytest.UsageError(f"--specperf-compare: no {what} in {folder}; save one first with --specperf-save")
    run, reason = storage.read_run(path)
    if run is None:
        # A corrupt or old baseline is a warning and no comparison, never a crash.
        config.issue_config_time_warning(SpecperfWarning(f"{reason}; comparisons skipped"), stacklevel=2)
        return []
    try:
        results = run.typed_results()
    except ConfigError as exc:  # a result no version wrote: as an unreadable baseline, a warning
        config.issue_config_time_warning(SpecperfWarning(f"{path}: {exc}; comparisons skipped"), stacklevel=2)
        return []
    config.stash[BASELINE_RUN] = run
    return results

def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(SHARED, None)
    if shared is not None:
        shared.close()  # first: a start under way finishes, so the session below stops what it started
    history = config.stash.get(HISTORY, None)
    if history is not None:
        history.close()
    for key in (SESSION, AB_A):
        session = config.stash.get(key, None)
        if session is not None:
            session.close()
    for arm in config.stash.get(ARMS, {}).values():
        if arm is not config.stash.get(SESSION, None):
            arm.close()

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
    elif s.engine_arms:
        target = (f"local {s.engine} engine arms " + ", ".join(arm_name(k) for k in s.engine_arms)
                  + f" (baseline {s.arms_baseline}), started on first use")
    elif s.arms:
        target = "arms " + ", ".join(f"{n}={u}" + (" (baseline)" if n == s.arms_baseline else "") for n, u in s.arms)
    elif s.endpoint:
        target = s.endpoint
    elif s.engine:
        target = f"local {s.engine} engine ({s.engine_preset}), started on first use"
    else:
        target = f"embedded simulator '{s.sim}'" + (f" x{s.sim_speed:g}" if s.sim_speed != 1 else "") + \
            ", started on first use"
    return f"specperf: endpoint={redact_text(target)}, max_drift={s.max_drift:g}, timeout={s.timeout:g}s"

def _marker_spec(item: pytest.Item) -> CaseSpec | None:
    found = [(name, item.get_closest_marker(name)) for name in SPECS]
    found = [(n, m) for n, m in found if m is not None]
    if len(found) > 1:
        raise ConfigError(f"one perf marker per test, found {', '.join(n for n, _ in found)}")
    if not found:
        return None
    name, mark = found[0]
    assert mark is not None
    return build_spec(name, mark.kwargs, mark.args, base=item.path.parent,
                      default_prompts=item.config.stash[SETTINGS].prompts)

@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    """Validate perf markers where tests are made: a misspelt keyword fails that test alone, unmeasured."""
    res = yield
    items = res if isinstance(res, list) else [res] if res is not None else []
    out: list[Any] = []
    for item in items:
        if isinstance(item, pytest.Function):
            try:
                spec = _marker_spec(item)
                if spec is not None:
                    check_for_run(spec, item.config.stash[SETTINGS])
            except ConfigError as exc:  # this case fails with its reason; the module's other cases still run
                out.append(invalid_in_place_of(item, str(exc)))
                continue
            if spec is not None:
                item.stash[SPEC] = spec
                warn_before_running(item, spec)
        out.append(item)
    return out if isinstance(res, list) else out[0] if out else res

def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    return collect_file(parent, file_path)

def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    return unread_hint(config, len(items))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bench = benchmark_bridge.wanted(config)
    for item in items:
        if isinstance(item, pytest.Function) and SPEC in item.stash:
            for name in ("specperf", "benchmark") if bench else ("specperf",):
                if name not in item.fixturenames:
                    item.fixturenames.append(name)  # marker cases need them even if they don't ask

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
    measure_marked(item)
    return SpecperfFixture(item, request.config.stash[SESSION])

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # A failed floor is the diagnosis: report it instead of running the body's own asserts.
    if isinstance(item, pytest.Function):
        bench = item.funcargs.get("benchmark") if SPEC in item.stash else None
        for r in item.stash.get(RESULTS, []) if bench is not None else []:
            problem = benchmark_bridge.feed(bench, to_dict(r))
            if problem:
                item.warn(SpecperfWarning(problem))
        reason = failed_reason(item)
        if reason:
            pytest.fail(reason, pytrace=False)
    message = ""
    try:
        res = yield
    except MeasurementError as exc:  # a direct call that could not measure: an error, as for a marker case
        item.stash[DIRECT_ERROR] = True
        tail = item.config.stash[SESSION].log_tail()
        message = f"could not measure: {exc}" + (f"\nengine log tail:\n{tail}" if tail else "")
    except ConfigError as exc:  # a user mistake in a direct call or in using specperf.result: its one line
        message = str(exc)
    if message:
        pytest.fail(message, pytrace=False)  # outside the except: no "during handling" chain is shown
    if isinstance(item, pytest.Function):
        reason = failed_reason(item)
        if reason:
            pytest.fail(reason, pytrace=False)
    return res

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when == "call" and report.failed and item.stash.get(DIRECT_ERROR, False):
        report.specperf_error = True  # travels with the report (xdist copies its attributes)
    results = item.stash.get(RESULTS, [])
    sent = item.stash.get(SENT, 0)
    if results[sent:] and (call.when == "call" or report.failed):
        for r in results[sent:]:
            r.nodeid = item.nodeid
            data = to_dict(r)  # plain data: what xdist sends to the controller
            report.user_properties.append((PROP, data))
            # JUnit XML writes the item's properties at teardown: flat, string-valued, one per field.
            item.user_properties.extend(junit_properties(data))
        item.stash[SENT] = len(results)
    return report

def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """A direct call that could not measure is an ERROR (as a marker case's setup error is), never FAILED."""
    if report.when == "call" and report.failed and getattr(report, "specperf_error", False):
        return "error", "E", ("ERROR", {"red": True})
    return None
