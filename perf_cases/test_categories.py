import pytest


# Draft acceptance, and every speculative figure with it, depends on the text. This case runs over a
# categorised prompt set (shipped with the plugin; put your own traffic in a JSON-lines file instead)
# and reports decode, TTFT and acceptance per category: a row per category under the case's own.
# `sample` keeps it quick (the same 4 prompts every run); `categories=[...]` would pick some.
# `--specperf-sim=categories` runs it on a simulator whose categories differ in acceptance.
@pytest.mark.sustained(prompts="builtin:specbench-mini", sample=4, tokens=300)
def test_per_category(specperf):
    r = specperf.result
    # one stream per prompt, each prompt's category and server-counted length recorded with it
    assert len(r.streams) == 4 and all(s["category"] and s["prompt_tokens"] for s in r.streams)
    assert sum(f["n"] for f in r.categories.values()) == 4
