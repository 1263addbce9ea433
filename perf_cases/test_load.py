from collections import Counter

import pytest


# Speculative decoding's gain shrinks as the batch grows: verifying drafts spends compute the batch
# already needs. Per level: per-user decode (median and 10th-percentile user), aggregate tok/s and the
# knee; under --specperf-ab, B's speedup over A per level and the first level where B is slower for users.
@pytest.mark.load_sweep(concurrency=[1, 2, 4, 8], tokens=128, ctx=1000)
def test_load_curve(specperf):
    levels = specperf.result.levels
    # Every user of every level was measured: a stream the server dropped or cut short is an error, not a row.
    # Under --specperf-ab or repeat a level keeps every trial's streams, each saying its trial.
    for lv in levels:
        per_trial = Counter(s.get("trial") for s in lv["streams"])
        assert set(per_trial.values()) == {lv["concurrency"]}, (lv["concurrency"], per_trial)
