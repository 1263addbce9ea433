"""The ``specperf`` command over saved runs: list, show, compare (same verdicts as ``--specperf-compare``), report;
and over the history database: history (the recorded runs; ``--import`` adds saved runs), trend (a case's runs).

A bad run name or a corrupt file is one line on stderr and exit status 2; a regression (or a report that
could not be drawn) is exit status 1.
Never imports pytest.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_specperf.cases.result_parts import CaseComparison
from pytest_specperf.compare import gates as gating
from pytest_specperf.compare import trials as compare
from pytest_specperf.errors import ConfigError
from pytest_specperf.files import write_text_atomic
from pytest_specperf.history import trend as history_trend
from pytest_specperf.report.output import Meta
from pytest_specperf.report.registry import OUTPUTS
from pytest_specperf.report.table import table
from pytest_specperf.report.views import trend as trend_view
from pytest_specperf.report.views.base import CaseView
from pytest_specperf.storage import imports as history_imports
from pytest_specperf.storage import records as history_records
from pytest_specperf.storage import saved_runs as storage
from pytest_specperf.storage.schema import open_store
from pytest_specperf.storage.store import DEFAULT_FILE as DEFAULT_HISTORY
from pytest_specperf.storage.store import HistoryError, Store, Target, parse_target
from pytest_specperf.urls import redact_text, redact_url

DEFAULT_STORAGE = str(storage.DEFAULT_SUBDIR)


class UsageError(Exception):
    """A mistake of the caller: printed as one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specperf", description="Look at and compare runs saved with --specperf-save.")
    p.add_argument("--storage", type=Path, default=None,
                   help=f"folder of saved runs (default: {DEFAULT_STORAGE} in the current folder or the nearest "
                        "folder above it that has one, as pytest saves them under its rootdir)")
    sub = p.add_subparsers(dest="command", required=True, metavar="{list,show,compare,report,history,trend}")
    sub.add_parser("list", help="the saved runs, oldest first")
    show = sub.add_parser("show", help="a run's metadata and result table")
    show.add_argument("run", help="run name, number, file name, or path of a run or --specperf-json file")
    cmp = sub.add_parser("compare", help="judge NEW against BASE; exit status 1 on a regression")
    cmp.add_argument("base")
    cmp.add_argument("new")
    cmp.add_argument("--max-regression", type=float, default=0.05,
                     help="largest tolerated slowdown, as a fraction (default 0.05)")
    cmp.add_argument("--inconclusive", choices=("pass", "warn", "fail"), default="warn",
                     help="what a comparison too noisy to decide does (default warn)")
    cmp.add_argument("--strict", action="store_true",
                     help="judge runs measured differently (model, server version, machine, ...) as if comparable, "
                          "like --specperf-compare-strict")
    rep = sub.add_parser("report", help="write a run's self-contained HTML report")
    rep.add_argument("run")
    rep.add_argument("-o", "--output", required=True, type=Path, help="the HTML file to write")
    rep.add_argument("--baseline", help="a run to draw the comparisons' baseline trials from")
    hist = sub.add_parser("history", help="the runs recorded in the history database with their verdicts; "
                                          "'history accept RUN' accepts the change a run failed on (docs/history.md)")
    hist.add_argument("what", nargs="*", metavar="CASE | accept RUN",
                      help="a case (node id or a unique test-name suffix) to list alone; or 'accept RUN': the change "
                           "that run failed its history gate on is meant, and becomes the case's new normal")
    hist.add_argument("--case", help="with accept: accept only this case's change (node id or unique suffix)")
    hist.add_argument("--history", help=HISTORY_HELP)
    hist.add_argument("--import", dest="import_runs", action="store_true",
                      help="first import the saved runs of --storage (each file once) into the history")
    trend = sub.add_parser("trend", help="a case's runs, change points and the next run's predicted interval")
    trend.add_argument("case", help="the case's node id or a unique test-name suffix (a sweep point or load level: "
                                    "NODEID@ctx=N, NODEID@users=N)")
    trend.add_argument("--history", help=HISTORY_HELP)
    trend.add_argument("-o", "--output", type=Path, help="also draw the trend charts into this PNG or SVG file")
    return p


HISTORY_HELP = ("a SQLite file or postgresql:// URL (default: .specperf/history.sqlite in the current folder or the "
                "nearest folder above that has one)")


def default_storage(start: Path | None = None) -> Path:
    """``.specperf/runs`` in ``start`` (the current folder) or the nearest folder above that has one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / storage.DEFAULT_SUBDIR).is_dir():
            return folder / storage.DEFAULT_SUBDIR
    return here / storage.DEFAULT_SUBDIR


def load(folder: Path, name: str) -> storage.Run:
    """The run ``name`` designates, or UsageError saying why it cannot be used."""
    path = storage.find_run(folder, name)
    if path is None:
        known = ", ".join(p.stem for p in storage.list_runs(folder)[-5:])
        hint = f"known: {known}" if known else f"no saved runs in {folder}; save one with pytest --specperf-save"
        raise UsageError(f"no run {name!r} in {folder} ({hint}); `specperf list` shows them")
    run, why = storage.read_run(path)
    if run is None:
        raise UsageError(_why(why))
    return run


def _why(warning: str) -> str:
    # storage warns "specperf: skipping run file P: why" (it skips); here the file was asked for by name.
    return warning.removeprefix("specperf: ").replace("skipping run file ", "run file ", 1)


def _verdicts(results: list[dict[str, Any]]) -> str:
    counts = Counter(str(r.get("verdict") or "-") for r in results)
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def check_folder(folder: Path, given: bool) -> None:
    """UsageError unless ``folder`` can hold saved runs: a file never can; a missing folder only by default."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--storage {folder} is a file; give the folder of saved runs (pytest --specperf-save "
                         f"writes them to {DEFAULT_STORAGE} under its rootdir)")
    if given and not folder.exists():
        raise UsageError(f"--storage {folder}: no such folder; give the folder of saved runs (pytest "
                         f"--specperf-save writes them to {DEFAULT_STORAGE} under its rootdir)")


def cmd_list(folder: Path) -> int:
    """One line per saved run; files that could not be read are named, on stdout and once more on stderr."""
    paths = storage.list_runs(folder)
    skipped = [f"{p.name} (not a run file name, NNNN_name.json)" for p in sorted(folder.glob("*.json"))
               if p not in paths] if folder.is_dir() else []
    if not paths:
        print(f"no saved runs in {folder}; save one with pytest --specperf-save")
    for path in paths:
        run, reason = storage.read_run(path)
        if run is None:
            why = _why(reason)
            print(f"{path.stem}  unreadable: {why}")
            skipped.append(f"{path.name} ({why.split(': ', 1)[-1]})")
            continue
        commit_id, dirty = run.commit.get("id"), run.commit.get("dirty")  # not result data
        commit = str(commit_id or "-")[:12] + ("-dirty" if dirty else "")
        print(f"{run.label}  {run.created or '-'}  commit {commit}  {run.server or '-'} {run.model or '-'}  "
              f"{len(run.results)} results: {_verdicts(run.results)}")
    if skipped:
        print(f"specperf: skipped {len(skipped)} file(s) in {folder}: {'; '.join(skipped)}", file=sys.stderr)
    return 0


def cmd_show(run: storage.Run) -> int:
    """A run's metadata and its result table."""
    print(f"run {run.label} ({run.path})")
    for label, value in (("created", run.created), ("endpoint", run.endpoint), ("model", run.model),
                         ("server", " ".join(x for x in (run.server, run.server_version) if x)),
                         ("commit", run.commit.get("id")), ("plugin", run.plugin_version)):  # not result data
        print(f"  {label}: {value or '-'}")
    for line in table(run.results):
        print(line)
    return 0


def judge(base: storage.Run, new: storage.Run, max_regression: float, inconclusive: str, strict: bool = False
          ) -> tuple[list[CaseComparison], list[CaseComparison]]:
    """Every case of ``new`` against ``base`` exactly as ``--specperf-compare`` does; (comparisons, failing)."""
    gate = gating.Gate(max_regression, inconclusive)
    differences = storage.fingerprint_diff(base, new)
    try:
        baseline, fresh = base.typed_results(), new.typed_results()
    except ConfigError as exc:  # a result no version wrote: the one line that says to upgrade
        raise UsageError(str(exc)) from None
    # records built afresh from the run's data, so judging them leaves ``new`` as read; its own comparisons
    # (against its baseline then) are not this judgement's.
    for r in fresh:
        r.comparisons = None
        gating.against_baseline(gate, r, baseline, differences=differences, strict=strict)
    ccs = gating.comparisons_of(fresh)
    ours = {r.nodeid for r in fresh}
    ccs += [CaseComparison(b.nodeid, None, None, "missing", "only in the baseline")
            for b in baseline if b.nodeid not in ours]
    fail, _ = compare.gate(ccs, inconclusive)
    return ccs, fail


def cmd_compare(base: storage.Run, new: storage.Run, max_regression: float, inconclusive: str,
                strict: bool = False) -> int:
    """Print each comparison; 1 if any case regressed (or was inconclusive under --inconclusive=fail)."""
    if not 0 < max_regression < 1:
        raise UsageError(f"--max-regression={max_regression:g} must be between 0 and 1, e.g. 0.05")
    for diff in storage.fingerprint_diff(base, new):
        print(f"warning: not the same set-up, {diff}")
    ccs, fail = judge(base, new, max_regression, inconclusive, strict)
    print(f"{new.label} against {base.label}:")
    for cc in ccs:
        where = cc.nodeid + ("" if cc.ctx is None else f" @ ctx {cc.ctx}")
        print(f"  {cc.verdict:12} {where} {cc.metric or ''}: {cc.reason}")
    counts = Counter(cc.verdict for cc in ccs)
    print(", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "nothing to compare")
    return 1 if fail else 0


def cmd_report(run: storage.Run, output: Path, baseline: storage.Run | None) -> int:
    """Write the run's HTML report."""
    if output.is_dir():
        raise UsageError(f"-o {output} is a folder; give a file name, e.g. -o report.html")
    output.parent.mkdir(parents=True, exist_ok=True)  # as the plugin's outputs (files.write_temp) do
    meta = {"endpoint": run.endpoint, "model": run.model, "server": run.server, "server_version": run.server_version,
            "commit": run.commit, "machine": run.machine, "plugin_version": run.plugin_version,
            "created": run.created}
    report = OUTPUTS["html"]()
    try:
        report.write(run.results, Meta(about=meta, baseline=baseline.results if baseline else None), output)
    except OSError:
        raise
    except Exception as exc:  # a drawing bug: one line naming it, never a traceback (charts that fail are notes)
        print(f"specperf: error: the report of {run.label} could not be drawn ({type(exc).__name__}: {exc}); "
              "the run file is intact, please report this with it", file=sys.stderr)
        return 1
    print(f"report of {run.label} written to {output}")
    return 0


def default_history(start: Path | None = None) -> Path:
    """``.specperf/history.sqlite`` in ``start`` (the current folder) or the nearest folder above that has one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / DEFAULT_HISTORY).is_file():
            return folder / DEFAULT_HISTORY
    return here / DEFAULT_HISTORY


def open_history(given: str | None, *, create: bool = False) -> Store:
    """The history database, its schema current; UsageError naming the fix when there is none or it is unusable."""
    try:
        target = parse_target(given, Path.cwd()) if given else Target(path=default_history())
        if target.path is not None and not create and not target.path.exists():
            raise UsageError(f"no history at {target.path}; record one with pytest --specperf-history (or "
                             "--specperf-save), or import saved runs with specperf history --import")
        return open_store(Store(target))
    except HistoryError as exc:
        raise UsageError(str(exc)) from None


def resolve_case(text: str, known: Sequence[str], store: Store) -> str:
    """The one case ``text`` names among ``known``: itself, or the one whose node id ends in ``::text`` or ``/text``
    (a test name, with or without its parameters); UsageError when none or several do."""
    if text in known:
        return text
    def bare(k: str) -> str:
        return k.split("[", 1)[0] if "[" in k and "@" not in k else k
    matches = [k for k in known if k.endswith(("::" + text, "/" + text)) or bare(k).endswith(("::" + text, "/" + text))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(f"{text!r} matches {len(matches)} cases in history {store.target.shown()}: "
                         f"{', '.join(matches)}; give one of them")
    near = [k for k in known if text in k][:5] or list(known[:5])
    raise UsageError(f"no runs of {text!r} in history {store.target.shown()}"
                     + (f"; known cases include: {', '.join(near)}" if near else ""))


def cmd_history(store: Store, folder: Path | None, case: str | None = None) -> int:
    """One line per recorded run, oldest first, with its verdicts and each failed case's reason (after importing
    ``folder``'s saved runs, when given); ``case`` (a node id or unique suffix) lists that case's lines alone."""
    try:
        if folder is not None:
            done, skipped = history_imports.import_folder(store, folder)
            print(f"imported {len(done)} run(s) from {folder}" + (f"; skipped {len(skipped)}: {'; '.join(skipped)}"
                                                                 if skipped else ""))
        runs = history_records.runs(store)
        verdicts = history_records.run_verdicts(store)
        held = history_records.held_runs(store)
        nodeid = None if case is None else resolve_case(case, history_records.nodeids(store), store)
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    if not runs:
        print(f"no runs in history {redact_url(store.target.shown())}")
    for r in runs:
        commit = str(r["commit_id"] or "-")[:12] + ("-dirty" if r["dirty"] else "")
        server = " ".join(x for x in (r["server"], r["server_version"]) if x) or "-"
        partial = f"  partial: {r['partial']}" if r["partial"] else ""
        cases = [v for v in verdicts.get(r["id"], []) if nodeid is None or v[0] == nodeid]
        if nodeid is not None and not cases:
            continue
        counts = Counter(v for _, v, _ in cases)
        print(f"run {r['id']}  {r['created'] or '-'}  {r['name'] or '-'}  commit {commit}  {server} "
              f"{r['model'] or '-'}  {len(cases) or r['cases']} case(s): "
              f"{', '.join(f'{n} {v}' for v, n in sorted(counts.items())) or '-'}{partial}")
        held_here = {key for _, run, key, _ in held if run == r["id"]}
        for node, verdict, reason in cases:
            if verdict in ("failed", "error"):
                print(f"  {verdict.upper()} {node}: {reason or 'no reason given'}")
            mine = sorted(k for k in held_here if k == node or k.startswith(node + "@"))  # a node id may hold @
            if mine:
                print(f"  held out of the prediction: {', '.join(mine)} (failed its history gate; if the change is "
                      f"meant: specperf history accept {r['id']})")
    return 0


def cmd_accept(store: Store, run: str, case: str | None) -> int:
    """Accept the change run ``run`` failed its history gate on (all its held cases, or ``case``'s)."""
    if not run.isdigit():
        raise UsageError(f"history accept {run!r}: give a run number, as `specperf history` lists them")
    run_id = int(run)
    try:
        held = history_records.held_runs(store)
        keys = None
        if case is not None:
            # a unit (``NODEID@users=N``) or a whole case by its node id: a sweep's every level or point
            known = {k for _, _, k, _ in held} | set(history_records.case_keys(store))
            known |= set(history_records.nodeids(store))
            key = resolve_case(case, sorted(known), store)
            keys = [k for _, _, k, _ in held if k == key or k.startswith(key + "@")]
        done = history_records.accept(store, run_id, keys, when=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    if not done:
        others = sorted({run for _, run, _, _ in held})
        raise UsageError(f"run {run_id} holds no case that failed its history gate"
                         + (f" (for {case})" if case else "") + "; runs that do: "
                         + (", ".join(map(str, others)) if others else "none"))
    for key, later in done:
        print(f"accepted the change of {key} at run {run_id}: its history starts anew there"
              + (f"; other held run(s) {', '.join(map(str, later))} released" if later else ""))
    return 0


#: how the table names and shows each gated metric: its label, the statistic of the streams it shows, the unit
SHOWN_AS = {"decode_tps": ("decode", "p50 of the streams", "tok/s"), "ttft_s": ("ttft", "p50 of the streams", "ms"),
            "total_tps": ("total", "aggregate", "tok/s")}


def shown(value: float | None, metric: str) -> str:
    """A figure as the table writes it: seconds as whole ms, rates to one decimal."""
    if value is None:
        return "-"
    unit = SHOWN_AS.get(metric, ("", "", "ms" if metric.endswith("_s") else ""))[2]
    if unit == "ms":
        return f"{value * 1000:.0f} ms"
    return f"{value:.1f}" + (f" {unit}" if unit else "")


def span(lo: float, hi: float, metric: str) -> str:
    """An interval as the table writes its figures, the unit once: '[98.6, 101.0] tok/s'."""
    a, b = shown(lo, metric), shown(hi, metric)
    unit = b.partition(" ")[2]
    return f"[{a.partition(' ')[0]}, {b.partition(' ')[0]}]" + (f" {unit}" if unit else "")


def cmd_trend(store: Store, case: str, output: Path | None) -> int:
    """A case's trend per gated metric as text (and as charts in ``output``)."""
    try:
        key = resolve_case(case, history_records.case_keys(store), store)
        facts = history_trend.run_facts(store, key)
        entries, notes = history_trend.trend(store, key, facts=facts)
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    for note in notes:
        print(f"note: {note}")
    for e in entries:
        name, stat, _ = SHOWN_AS.get(e.metric, (e.metric, "", ""))
        print(f"{e.key} {e.metric}: {e.runs} run(s); shown: {name} as the table shows it ({stat or 'its value'}), "
              "then the history gate's judged figure, the geometric mean of the trials, with its 95% interval")
        changes = {c.index: c for c in e.changes}
        for i, s in enumerate(e.series, start=e.first_shown):
            f = facts.get(s.run, history_trend.RunFacts(None))
            gate = ""
            if f.failed_gate:
                # the run failed on another metric: this one's row says so, not that this metric failed
                other = (f" on {', '.join(sorted(f.failed_metrics))} ({e.metric} passed)"
                         if f.failed_metrics and e.metric not in f.failed_metrics else "")
                gate = "  FAILED its history gate" + other + (", held out of the prediction" if f.held else "") + (
                    f", change accepted {f.accepted}" if f.accepted else "")
            elif f.verdict:
                gate = f"  {f.verdict}"
            failed = e.metric in f.failed_metrics
            before = facts.get(e.series[i - e.first_shown - 1].run) if i > e.first_shown else None
            first = i in changes and failed and (before is None or e.metric not in before.failed_metrics)
            mark = (f"  <- change {changes[i].effect:+.1%} began" + (" (first run to fail its history gate)"
                                                                    if first else "")) if i in changes else ""
            table_figure = shown(f.figures.get(e.metric), e.metric)
            print(f"  run {s.run:>5}  {s.created or '-':20}  {s.commit:12}  {name} {table_figure}"
                  f"  judged {shown(s.value, e.metric)} {span(s.lo, s.hi, e.metric)}{gate}{mark}")
        if e.interval is not None and e.predicted is not None:  # a prediction: all four of its fields set
            print(f"  next run's judged figure predicted {shown(e.predicted, e.metric)} in "
                  f"{span(e.interval[0], e.interval[1], e.metric)} "
                  f"(run-to-run {e.between or 0.0:.1%}, within-run {e.within or 0.0:.1%})")
    if output is not None:
        if output.suffix.lower() not in (".png", ".svg"):
            raise UsageError(f"-o {output}: give a .png or .svg file name")
        from pytest_specperf.report import drawing

        image = drawing.case_image(CaseView(charts=trend_view.trend_charts(entries)), output.suffix[1:].lower(),
                                   salt=case, title=f"{case}: trend")
        write_text_atomic(output, image)  # its folder created if missing, as the plugin's outputs
        print(f"trend of {case} drawn to {output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specperf`` command."""
    args = _parser().parse_args(argv)
    folder = args.storage if args.storage is not None else default_storage()
    try:
        check_folder(folder, given=args.storage is not None and args.command == "list")
        if args.command == "list":
            return cmd_list(folder)
        if args.command == "show":
            return cmd_show(load(folder, args.run))
        if args.command == "compare":
            return cmd_compare(load(folder, args.base), load(folder, args.new), args.max_regression,
                               args.inconclusive, args.strict)
        if args.command in ("history", "trend"):
            with open_history(args.history, create=args.command == "history" and args.import_runs) as store:
                if args.command == "history":
                    what = list(args.what)
                    if what[:1] == ["accept"]:
                        if len(what) != 2:
                            raise UsageError("history accept takes one run number: specperf history accept RUN "
                                             "[--case CASE]")
                        return cmd_accept(store, what[1], args.case)
                    if len(what) > 1 or args.case is not None:
                        raise UsageError("history takes one case (or 'accept RUN [--case CASE]'), e.g. specperf "
                                         "history test_single_user")
                    return cmd_history(store, folder if args.import_runs else None, what[0] if what else None)
                return cmd_trend(store, args.case, args.output)
        baseline = load(folder, args.baseline) if args.baseline else None
        return cmd_report(load(folder, args.run), args.output, baseline)
    except UsageError as exc:  # a database's own error text may quote the URL it was given: masked
        print(f"specperf: error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"specperf: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
