"""README's A/B recipe ("Where speculation stops paying") runs as written: two simulators, then the load case."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
from support.load_helpers import true_decode

REPO = Path(__file__).resolve().parents[2]


def _recipe() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Where speculation stops paying", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "README lost the A/B recipe's bash block"
    return block.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_recipe_order_and_options_table() -> None:
    lines = [line for line in _recipe().splitlines() if line.strip()]
    first_pytest = next(i for i, line in enumerate(lines) if line.startswith("pytest "))
    assert sum(line.startswith("specperf-sim ") for line in lines[:first_pytest]) == 2  # servers first
    assert "-k load" in lines[first_pytest]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    options = next(line for line in readme.splitlines() if line.startswith("| `--specperf-sim`"))
    from pytest_specperf.sim.profile import builtin_profiles

    for name in builtin_profiles():
        assert f"`{name}`" in options, f"the options table omits the {name} profile"


def test_recipe_runs_as_written(tmp_path: Path) -> None:
    a, b = _free_port(), _free_port()
    out = tmp_path / "r.json"
    script = (_recipe().replace("8000", str(a)).replace("8001", str(b))
              .replace("specperf-sim ", f"{sys.executable} -m pytest_specperf.sim ")
              .replace("\npytest ", f"\n{sys.executable} -m pytest ")
              .replace(f"{b}\n", f"{b} --specperf-json={out} -p no:cacheprovider; echo pytest-exit=$?\n", 1))
    assert "pytest-exit" in script and "\nkill " in script
    # Before the simulators stop: B's records of the steps it really took, for every stream at the top level.
    fetch = tmp_path / "truth.py"
    fetch.write_text(f"""import json, httpx
top = json.load(open({str(out)!r}))["results"][0]["levels"][-1]
recs = [httpx.get("http://127.0.0.1:{b}/sim/truth/" + s["response_id"]).json() for s in top["streams"]]
json.dump(recs, open({str(tmp_path / 'truth.json')!r}, "w"))
""")
    script = script.replace("\nkill ", f"\n{sys.executable} {fetch}\nkill ")
    done = subprocess.Popen(["bash", "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        text, _ = done.communicate(timeout=600)
    finally:
        if done.poll() is None:
            os.killpg(done.pid, signal.SIGTERM)
    # The recipe's pair: B is slower for users at 8 users, so the case fails there, as the README says.
    assert "pytest-exit=1" in text or "pytest-exit=0" in text, text[-3000:]
    assert ("1 failed" in text or "1 passed" in text) and "deselected" in text  # -k load picks the one load case
    banners = [line for line in text.splitlines() if line.startswith("specperf-sim listening")]
    assert any("speculation=false" in line for line in banners), banners  # A's banner shows its --set
    [r] = json.loads(out.read_text())["results"]
    assert r["kind"] == "load_sweep" and r["ab"]["trials"] == 5
    # The simulator's model: speculation loses from about 6 users (batching.yaml), so at 8 of [1, 2, 4, 8].
    assert r["crossover"]["users"] == 8, r["crossover"]["text"]
    # At 8 users B is about 19% slower per user. On a quiet machine that fails the case, as the README says. On a
    # busy one (CI's workers beside the sims) five trials may spread too wide to show more than the 5% allowed:
    # then the comparison is inconclusive, never passed, and the case passes, its body (every user measured) too.
    at_8 = [c for c in r["comparisons"] if c["users"] == 8 and c["metric"] == "decode_tps"]
    assert len(at_8) == 1, r["comparisons"]
    if r["verdict"] == "failed":
        assert "at 8 users: decode_tps -" in r["reason"] and at_8[0]["verdict"] == "regressed", r["reason"]
        assert "pytest-exit=1" in text and "1 failed" in text
        assert "B slower for users from 8 users" in text
    else:
        # Too wide to decide: the crossover note says so at the same level, never that B pays there.
        assert at_8[0]["verdict"] == "inconclusive" and at_8[0]["comparison"]["effect"] < 0, (at_8, text[-3000:])
        assert "pytest-exit=0" in text and "1 passed" in text, text[-3000:]
        assert re.search(r"B (slower|not shown faster) for users from 8 users", text), text[-3000:]
    # B's per-user decode at 8 users, as the table shows it, against B's own records of its steps.
    top = r["levels"][-1]
    truth = [true_decode(rec) for rec in json.loads((tmp_path / "truth.json").read_text())]
    assert len(truth) == len(top["streams"]) >= 8
    assert abs(top["decode_tps"] / float(np.median(truth)) - 1) < 0.03, (top["decode_tps"], truth)
    # The row shows B at 8 users as the arms table does (its geometric mean over trials), so the two agree.
    row = next(line for line in text.splitlines() if line.startswith("  @ 8 users"))
    b_at_8 = next(lv for lv in r["arms"]["levels"] if lv["users"] == 8)["arms"]["B"]["decode_tps"]
    assert f" {b_at_8:.1f} " in row and f"{b_at_8:.1f} [" in text, row
