"""The order the suite's tests are handed to xdist workers: the long modules first, one share per worker.

``--dist worksteal`` first gives each worker a contiguous run of the collection (the first worker the first
N/W tests, and so on) and later lets an idle worker take the back half of the longest queue. So what sits at
the head of a worker's run is done by that worker, early. Left in collection order, one worker got every engine
test at once, and a stolen tail could split a module whose fixture is a minute-long run, so two workers ran or
waited for it; at the end the last long test kept one worker busy while the others sat idle.

Here the long modules (seconds of wall time each took in a three-worker run on two cores) are spread over the
workers, the longest first onto the least loaded, each at the head of its worker's run and never split; the
rest keep their order behind them. Only the order changes: every worker collects the same list (xdist checks).
"""

from __future__ import annotations

import itertools
import os
from typing import TypeVar

#: Module -> seconds it took, measured (not a budget); a module missing here is short and keeps its place.
LONG_MODULES = {
    "tests/pytester/test_html_report.py": 90,
    "tests/pytester/test_interrupts.py": 80,
    "tests/http/test_replay_truth.py": 77,
    "tests/pytester/test_gating_e2e.py": 75,
    "tests/http/test_rate_truth.py": 74,
    "tests/pytester/test_plugin_e2e.py": 65,
    "tests/pytester/test_arms_e2e.py": 65,
    "tests/engine/test_engine_load.py": 63,
    "tests/engine/test_engine_perf_cases.py": 63,
    "tests/engine/test_engine_content.py": 56,
    "tests/pytester/test_comparison_charts.py": 53,
    "tests/engine/test_crossval.py": 45,
    "tests/http/test_open_loop_verdicts.py": 44,
    "tests/pytester/test_crossover_e2e.py": 38,
    "tests/pytester/test_load_trials_e2e.py": 33,
    "tests/engine/test_engine_arms.py": 31,
    "tests/pytester/test_history_accept.py": 30,
    "tests/pytester/test_readme_recipe.py": 28,
    "tests/engine/test_engine_categories.py": 25,
}

T = TypeVar("T")


def workers() -> int:
    """How many xdist workers this session has (1 without xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def order(items: list[T], module_of: dict[int, str], n_workers: int) -> list[T]:
    """``items`` reordered so that each of ``n_workers`` contiguous runs (sized as worksteal's first split) opens
    with its share of the long modules; ``module_of`` maps ``id(item)`` to its module's path."""
    if n_workers < 2:
        return items
    modules: dict[str, list[T]] = {}
    for it in items:
        modules.setdefault(module_of[id(it)], []).append(it)
    long = sorted((m for m in modules if m in LONG_MODULES), key=lambda m: -LONG_MODULES[m])
    loads = [0.0] * n_workers
    heads: list[list[T]] = [[] for _ in range(n_workers)]
    for m in long:  # longest first onto the least loaded worker
        i = loads.index(min(loads))
        heads[i] += modules[m]
        loads[i] += LONG_MODULES[m]
    rest = iter([it for it in items if module_of[id(it)] not in LONG_MODULES])
    out: list[T] = []
    left = len(items)
    for i in range(n_workers):
        size = left // (n_workers - i)  # worksteal's first split: what is left over the workers not yet served
        run = heads[i] + list(itertools.islice(rest, max(0, size - len(heads[i]))))
        out += run
        left -= len(run)
    return out + list(rest)
