"""Saved runs: versioned JSON files, one per session, for ``--specperf-save`` and ``--specperf-compare``.

Never imports pytest. Modelled on pytest-benchmark's file storage, minus its flaws: the
folder is relative to a root the caller passes (the pytest rootdir), not the cwd; a bad file is skipped with a
warning, never an exception; two writers never clobber each other's file.

Public API
----------
``default_folder(root) -> Path``
    ``root / ".specperf" / "runs"``.
``save_run(folder, results, meta, name=None, *, root=None, redact=()) -> Path``
    Writes ``NNNN_<name>.json`` (next counter; ``<name>`` = ``name``, else the short commit id with ``-dirty``,
    else ``run``; sanitised to ``[A-Za-z0-9._-]``) atomically: temp file, fsync, then a hard link to the final
    name, which fails rather than overwrite a file another writer just claimed (``os.replace`` where hard links
    are unsupported); the file gets the mode of an ordinary new file (umask applied). ``meta`` keys
    ``plugin_version``, ``endpoint``, ``model``, ``server`` (detected kind),
    ``server_version`` go to the top level, anything else under ``"meta"``; ``meta["commit"]`` overrides
    ``commit_info(root or cwd)``. Every string in ``redact`` (API keys) is replaced by ``***`` in the file.
``load_run(path) -> Run | None``
    ``None`` plus one ``SpecperfStorageWarning`` line for an unreadable, truncated or non-JSON file, another
    format, a newer or unknown version, or missing fields. Also reads a ``--specperf-json`` report file
    (``"format": "pytest-specperf/1"``). Loading normalises: optional fields missing from older files get defaults.
``list_runs(folder) -> list[Path]``
    Run files (``NNNN_*.json``) by counter, oldest first; ``[]`` for a missing folder.
``find_run(folder, name=None) -> Path | None``
    ``None`` -> the latest. Otherwise an existing file path (as given, or inside ``folder``), else a run whose
    counter (``3`` or ``0003``), full stem (``0003_main``), file name, or part after the counter (``main``) equals
    ``name`` or ``name`` as sanitised when saved (``feature/x`` -> ``feature-x``); several matches -> the latest.
``commit_info(path=None) -> dict``, ``machine_info() -> dict``, ``job_info() -> dict``
    Never raise. ``commit_info`` gives ``id`` ("unversioned" outside git, "unknown" plus ``error`` if git fails),
    ``branch``, ``time``, ``dirty``, ``project``. ``machine_info`` hashes the host name (``host_id``) instead of
    storing it. ``job_info`` keeps the CI job/run ids found in the environment, so trials can be grouped by job.
``fingerprint(run_or_meta) -> dict``, ``fingerprint_diff(base, cand) -> list[str]``
    ``model``, ``server``, ``server_version``, ``plugin_version``, ``machine`` (the client's, see ``machine_key``):
    a baseline is only comparable under the same fingerprint; the caller decides whether a difference makes the
    comparison inconclusive. A run saved with ``partial`` set (interrupted, stopped by ``-x``, or with errored
    cases) is never the default baseline of ``find_run``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_specperf.cases.json_form import to_dict
from pytest_specperf.cases.results import Recorded, Result
from pytest_specperf.cases.saved_results import load_record
from pytest_specperf.files import write_temp
from pytest_specperf.urls import redact_url

FORMAT = "pytest-specperf/run"
VERSION = 1
#: what ``report.json_file.write_json_atomic`` writes for ``--specperf-json``; loadable as a baseline too.
REPORT_FORMAT = "pytest-specperf/1"
DEFAULT_SUBDIR = Path(".specperf") / "runs"
TOP_META = ("plugin_version", "endpoint", "model", "server", "server_version")
FINGERPRINT_KEYS = ("model", "server", "server_version", "plugin_version", "machine")
#: CI variables that identify the job: runs from different jobs differ by a per-job offset (docs/statistics.md).
JOB_ENV = ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB", "GITHUB_SHA", "GITHUB_REF_NAME", "CI_PIPELINE_ID",
           "CI_JOB_ID", "CI_COMMIT_SHA", "BUILDKITE_BUILD_ID", "BUILDKITE_JOB_ID", "BUILD_ID", "BUILD_NUMBER")

_RUN_RE = re.compile(r"^(\d{4,})_(.+)\.json$")


class SpecperfStorageWarning(UserWarning):
    """A saved run that could not be used (the run is skipped, never fatal)."""


@dataclass
class Run:
    """A loaded run file."""

    path: Path
    results: list[dict[str, Any]]
    version: int = VERSION
    format: str = FORMAT
    counter: int | None = None
    name: str = ""
    created: str = ""
    plugin_version: str = ""
    endpoint: str | None = None
    model: str | None = None
    server: str | None = None
    server_version: str | None = None
    commit: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    job: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    partial: str = ""  # why the run stopped early ("" for a complete run): never a default baseline

    def typed_results(self) -> list[Recorded]:
        """The results as records (``saved_results.load_record``: a case that could not be measured as its
        ``ErrorRecord``). ConfigError (one line) for a result no version of the plugin wrote.

        ``results`` keep the data as read, for the callers that still read mappings (report/ of `specperf show`)."""
        return [load_record(r) for r in self.results]

    @property
    def label(self) -> str:
        """The file's stem, e.g. ``0003_main``."""
        return self.path.stem


def default_folder(root: Path | str) -> Path:
    """Where runs live by default: under the pytest rootdir, not the cwd."""
    return Path(root) / DEFAULT_SUBDIR


def _git(args: Sequence[str], cwd: Path) -> str:
    # GIT_OPTIONAL_LOCKS=0: `git status` must not take index.lock while someone commits in the same checkout.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, env=env, check=True)
    return done.stdout.strip()


def commit_info(path: Path | str | None = None) -> dict[str, Any]:
    """Git commit of the checkout holding ``path`` (default cwd); never raises."""
    info: dict[str, Any] = {"id": "unversioned", "branch": None, "time": None, "dirty": False, "project": None}
    try:
        cwd = Path(path) if path is not None else Path.cwd()
        if not cwd.is_dir():
            cwd = cwd.parent
        info["project"] = cwd.resolve().name
        try:
            top = _git(["rev-parse", "--show-toplevel"], cwd)
        except subprocess.CalledProcessError:
            return info  # not inside a git checkout
        info["project"] = Path(top).name
        info["id"] = _git(["rev-parse", "HEAD"], cwd)
        info["branch"] = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
        info["time"] = _git(["show", "-s", "--format=%cI", "HEAD"], cwd)
        info["dirty"] = bool(_git(["status", "--porcelain", "--untracked-files=no"], cwd))
    except Exception as exc:  # git missing, timed out, no commits yet, unsafe ownership, ...
        info["id"] = "unknown"
        info["error"] = _one_line(exc)
    return info


def _host_id() -> str:
    # A hash, so run files can be shared without naming the machine, yet runs from one host still group together.
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:12]


def machine_info() -> dict[str, Any]:
    """Client machine fingerprint (platform, Python, CPUs, hashed host name); never raises."""
    probes = {
        "system": platform.system, "release": platform.release, "machine": platform.machine,
        "python_implementation": platform.python_implementation, "python_version": platform.python_version,
        "cpu_count": os.cpu_count, "host_id": _host_id,
    }
    info: dict[str, Any] = {}
    for key, probe in probes.items():
        try:
            info[key] = probe()
        except Exception:
            info[key] = None
    return info


def job_info() -> dict[str, Any]:
    """CI job identifiers present in the environment; never raises."""
    try:
        return {k: os.environ[k] for k in JOB_ENV if os.environ.get(k)}
    except Exception:
        return {}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


def _jsonable(obj: Any) -> Any:
    # Never fail a save on an odd value (pytest-benchmark's SafeJSONEncoder idea).
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        with contextlib.suppress(Exception):
            return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays
        with contextlib.suppress(Exception):
            return obj.tolist()
    return f"UNSERIALIZABLE[{type(obj).__name__}]"


def slug(text: str) -> str:
    """A run name as it appears in a file name (``[A-Za-z0-9._-]``; '' when nothing is left)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80]


def _counter(path: Path) -> int | None:
    m = _RUN_RE.match(path.name)
    return int(m.group(1)) if m else None


def list_runs(folder: Path | str) -> list[Path]:
    """Run files in ``folder``, oldest (lowest counter) first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if _RUN_RE.match(p.name) and p.is_file()]
    return sorted(found, key=lambda p: (_counter(p) or 0, p.name))


def _next_counter(folder: Path) -> int:
    runs = list_runs(folder)
    return max((_counter(p) or 0 for p in runs), default=0) + 1


def _run_label(name: str | None, commit: dict[str, Any]) -> str:
    """The file name's label: the run's name, else the commit (with -dirty), else "run"."""
    if name:
        label = slug(name)
    elif commit.get("id") not in (None, "unknown", "unversioned"):  # not result data: a commit's git facts
        label = str(commit["id"])[:12] + ("-dirty" if commit.get("dirty") else "")  # not result data
    else:
        label = "run"
    return label or "run"


def _top(result: Recorded, key: str) -> str | None:
    """A result's endpoint, model, server or server version (an error record has none of them)."""
    if not isinstance(result, Result):
        return None
    value: str | None = {"endpoint": result.endpoint, "model": result.model, "server": result.server,
                         "server_version": result.server_version}[key]
    return value


def run_meta(results: Sequence[Recorded] = (), *, root: Path | str | None = None,
             **known: Any) -> dict[str, Any]:
    """What identifies a run's measurements, built one way for the saved run, the HTML header and the baseline
    check: plugin version, endpoint, model, server kind and version (the first result's, or ``known`` where no
    result says), this machine, the commit of ``root`` (when given) and the time."""
    meta: dict[str, Any] = {"plugin_version": _package_version()}
    for key in TOP_META[1:]:
        if key == "server_version":
            found = next((_top(r, key) for r in results if _top(r, key)), None)
        else:
            found = _top(results[0], key) if results else None
        meta[key] = found if found is not None else known.get(key)
    if isinstance(meta.get("endpoint"), str):  # not result data: a URL given here may be unmasked
        meta["endpoint"] = redact_url(meta["endpoint"])
    meta["machine"] = machine_info()
    if root is not None:
        meta["commit"] = commit_info(root)
    meta["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return meta


def save_run(folder: Path | str, results: Sequence[Recorded], meta: dict[str, Any],
             name: str | None = None, *,
             root: Path | str | None = None, redact: Iterable[str] = ()) -> Path:
    """Write a run file atomically into ``folder`` (created if needed) and return its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    given = meta.get("commit")  # not result data: the run's metadata
    commit = given if isinstance(given, dict) else commit_info(root)
    label = _run_label(name, commit)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "plugin_version": meta.get("plugin_version") or _package_version(),  # not result data: the run's metadata
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "name": name or "",
        "partial": str(meta.get("partial") or ""),  # not result data: the run's metadata
        **{k: meta.get(k) for k in TOP_META[1:]},
        "commit": commit,
        "machine": machine_info(),
        "job": job_info(),
        "meta": {k: v for k, v in meta.items() if k not in (*TOP_META, "commit", "partial")},
        "results": [to_dict(r) for r in results],
    }
    text = json.dumps(doc, indent=2, default=_jsonable)
    for secret in redact:
        if secret:
            text = text.replace(secret, "***")
    tmp = write_temp(folder, text + "\n", ".specperf-run-")
    try:
        for _ in range(1000):
            target = folder / f"{_next_counter(folder):04d}_{label}.json"
            try:
                os.link(tmp, target)  # fails if the name exists: a concurrent writer never loses its file
            except FileExistsError:
                continue
            except OSError:  # no hard links here (some network/FAT file systems)
                if target.exists():
                    continue
                os.replace(tmp, target)
            return target
        raise OSError(f"could not claim a run file name in {folder}")
    finally:
        tmp.unlink(missing_ok=True)


def _package_version() -> str:
    try:
        from pytest_specperf.version import __version__
    except Exception:
        return ""
    return __version__


def _warn(path: Path, why: str) -> None:
    warnings.warn(f"specperf: skipping run file {path}: {why}", SpecperfStorageWarning, stacklevel=3)


def read_run(path: Path | str) -> tuple[Run | None, str]:
    """``load_run`` for callers that show why a run cannot be used: the run and "", or None and the reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = load_run(path)
    if run is not None:
        return run, ""
    return None, str(caught[0].message) if caught else f"{path} could not be read"


def load_run(path: Path | str) -> Run | None:
    """Read a run file; ``None`` with a one-line warning when it cannot be used."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _warn(path, f"cannot read it ({_one_line(exc)})")
        return None
    if not text.strip():
        _warn(path, "empty file")
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        _warn(path, f"not valid JSON, truncated or corrupt ({_one_line(exc)})")
        return None
    if not isinstance(doc, dict):
        _warn(path, f"expected a JSON object, found {type(doc).__name__}")
        return None
    fmt = doc.get("format")  # not result data: the run file's JSON
    version: object  # an int once checked below
    if fmt == REPORT_FORMAT:
        version = 0  # a --specperf-json report: same result fields, fewer run fields
    elif fmt == FORMAT:
        version = doc.get("version")  # not result data: the run file's JSON
        if not isinstance(version, int) or isinstance(version, bool):
            _warn(path, f"format version {version!r} is not an integer")
            return None
        if version > VERSION:
            _warn(path, f"written by a newer pytest-specperf (format version {version} > {VERSION}); upgrade to use it")
            return None
        if version < 1:
            _warn(path, f"unknown format version {version}")
            return None
    else:
        _warn(path, f"not a pytest-specperf run (format {fmt!r})")
        return None
    results = doc.get("results")  # not result data: the run file's JSON
    if not isinstance(results, list):
        _warn(path, "missing field 'results' (a list)")
        return None
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("nodeid"), str) or not r["nodeid"]:  # not result data
            _warn(path, f"results[{i}] has no 'nodeid'")
            return None
    return _normalize(path, doc, version, results)


def _normalize(path: Path, doc: dict[str, Any], version: int, results: list[dict[str, Any]]) -> Run:
    # Defaults for fields older files lack; a newer format version adds its fill-ins here.
    def text(key: str) -> str | None:
        v = doc.get(key)
        return None if v is None else str(v)

    def obj(key: str) -> dict[str, Any]:
        v = doc.get(key)
        return v if isinstance(v, dict) else {}

    normalized = []
    for r in results:
        r = dict(r)
        r.setdefault("kind", "")
        r.setdefault("verdict", "")
        r.setdefault("reason", "")
        normalized.append(r)
    counter = _counter(path)
    m = _RUN_RE.match(path.name)
    name = str(doc.get("name") or (m.group(2) if m else path.stem))  # not result data: the run file's JSON
    known = {"format", "version", "name", "created", "results", "commit", "machine", "job", "meta", "partial",
             *TOP_META}
    meta = obj("meta") if version >= 1 else {k: v for k, v in doc.items() if k not in known}
    fmt = str(doc.get("format"))  # not result data: the run file's JSON
    return Run(path=path, results=normalized, version=version, format=fmt, counter=counter, name=name,
               created=text("created") or "", plugin_version=text("plugin_version") or "",
               endpoint=text("endpoint"), model=text("model"), server=text("server"),
               server_version=text("server_version"), commit=obj("commit"), machine=obj("machine"), job=obj("job"),
               meta=meta, partial=str(doc.get("partial") or ""))  # not result data: the run file's JSON


def find_run(folder: Path | str, name: str | None = None) -> Path | None:
    """The run file ``name`` designates (see the module docstring), or ``None``."""
    folder = Path(folder)
    if name is not None:
        for candidate in (Path(name), folder / name):
            if candidate.is_file():
                return candidate
    runs = list_runs(folder)
    if name is None:
        return next((p for p in reversed(runs) if not _is_partial(p)), None)
    matches = []
    for p in runs:
        m = _RUN_RE.match(p.name)
        if m is None:
            continue
        counter, rest = m.group(1), m.group(2)
        named = name in (p.name, p.stem, rest, counter) or slug(name) == rest  # "a/b" was saved as "a-b"
        if named or (name.isdigit() and int(name) == int(counter)):
            matches.append(p)
    return matches[-1] if matches else None


def _is_partial(path: Path) -> bool:
    """Whether a run file says it stopped early (unreadable files count as not partial: load_run warns)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and bool(doc.get("partial"))  # not result data: the run file's JSON


def machine_key(machine: dict[str, Any] | None) -> str | None:
    """The client machine in one comparable string (hashed host, CPUs, OS, architecture), or None if unknown."""
    if not machine or not machine.get("host_id"):  # not result data: the machine's facts
        return None
    return "{host_id}/{cpu_count} cpus/{system} {machine}".format(**{k: machine.get(k) for k in
                                                                     ("host_id", "cpu_count", "system", "machine")})


def fingerprint(run_or_meta: Run | dict[str, Any]) -> dict[str, Any]:
    """The fields a baseline must share with the candidate to be comparable."""
    if isinstance(run_or_meta, Run):
        out = {k: getattr(run_or_meta, k) for k in FINGERPRINT_KEYS}
    else:
        out = {k: run_or_meta.get(k) for k in FINGERPRINT_KEYS}
    out["machine"] = machine_key(out["machine"]) if isinstance(out["machine"], dict) else out["machine"]
    out["plugin_version"] = out["plugin_version"] or None
    return out


def fingerprint_diff(base: Run | dict[str, Any], cand: Run | dict[str, Any]) -> list[str]:
    """One line per differing fingerprint field, e.g. ``"model: 'a' (baseline) != 'b' (now)"``; [] if comparable.

    A field unknown on either side (None) is not a difference.
    """
    fb, fc = fingerprint(base), fingerprint(cand)
    return [f"{k}: {fb[k]!r} (baseline) != {fc[k]!r} (now)" for k in FINGERPRINT_KEYS
            if fb[k] is not None and fc[k] is not None and str(fb[k]) != str(fc[k])]
