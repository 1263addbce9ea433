"""``*.specperf.yaml`` perf cases as pytest items: measured in setup, judged in the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_specperf.cases.base import CaseSpec
from pytest_specperf.cases.yaml_cases import SUFFIXES, is_case_file, load_entries
from pytest_specperf.errors import ConfigError, MeasurementError
from pytest_specperf.pytest_plugin.invalid_cases import InvalidCase, check_for_run, warn_before_running
from pytest_specperf.pytest_plugin.keys import SETTINGS, SPEC, SpecperfWarning
from pytest_specperf.pytest_plugin.recording import failed_reason, measure_marked


def collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    """A ``*.specperf.yaml`` file's cases; a YAML file named on the command line that is not one says why it holds
    no cases (pytest alone would answer 'not found ... no match')."""
    if is_case_file(file_path):
        return YamlCaseFile.from_parent(parent, path=file_path)
    if file_path.suffix in (".yaml", ".yml"):
        if _named(parent.config, file_path):
            return NotACaseFile.from_parent(parent, path=file_path)
        # found in a folder: most YAML is not meant as cases, so it is named only if nothing at all is collected
        parent.config.stash.setdefault(UNREAD_YAML, []).append(file_path)
    return None


#: YAML files found in the folders given that are not case files (``unread_hint``)
UNREAD_YAML = pytest.StashKey[list[Path]]()


def unread_hint(config: pytest.Config, collected: int) -> list[str]:
    """Where a run collected nothing but found YAML files that are not case files: that case files end in
    .specperf.yaml, with the rename of the first (pytest alone says only 'no tests ran')."""
    unread = config.stash.get(UNREAD_YAML, [])
    if collected or not unread:
        return []
    first = unread[0]
    more = f" (and {len(unread) - 1} other YAML file(s))" if len(unread) > 1 else ""
    return [f"specperf: {first.name}{more} is not read as perf cases: case files end in {' or '.join(SUFFIXES)}; "
            f"rename it to {first.name.rsplit('.', 1)[0]}{SUFFIXES[0]}"]


def _named(config: pytest.Config, path: Path) -> bool:
    """Whether ``path`` was given on the command line itself (not found inside a folder given there)."""
    here = Path(config.invocation_params.dir)
    return any((here / str(arg).split("::")[0]).resolve() == path.resolve() for arg in config.args)


class NotACaseFile(pytest.File):
    """A YAML file named on the command line that the plugin does not read: its collection error says why."""

    def collect(self) -> Any:
        stem = self.path.name.rsplit(".", 1)[0]
        raise self.CollectError(f"{self.path.name} is not read as perf cases: case files end in "
                                f"{' or '.join(SUFFIXES)}; rename it to {stem}{SUFFIXES[0]}")


class YamlCaseFile(pytest.File):
    """A ``*.specperf.yaml`` file of perf cases."""

    def collect(self) -> Any:
        settings = self.config.stash[SETTINGS]
        try:
            cases = load_entries(self.path, settings.prompts)
        except ConfigError as exc:  # not readable as cases at all: the file is the error
            raise self.CollectError(str(exc)) from None
        if not cases:
            self.warn(SpecperfWarning(f"{self.path.name} holds no perf cases; add one, e.g. "
                                      "'my_case: {sustained: {tokens: 500}}', or delete the file"))
        for name, spec, kwargs, marks in cases:
            if not isinstance(spec, ConfigError):
                try:
                    check_for_run(spec, settings)
                except ConfigError as exc:
                    spec = ConfigError(f"{self.path.name}: case {name!r}: {exc}")
            if isinstance(spec, ConfigError):  # this case fails with its reason; the file's other cases run
                yield InvalidCase.from_parent(self, name=name, reason=str(spec))
                continue
            item = YamlCaseItem.from_parent(self, name=name, spec=spec)
            warn_before_running(item, spec)
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
        measure_marked(self)

    def runtest(self) -> None:
        reason = failed_reason(self)
        if reason:
            raise CaseFailed(reason)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed | MeasurementError | ConfigError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"specperf {self.spec.KIND}: {self.name}"
