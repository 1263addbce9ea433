"""The simulator's truth per prompt category: found from the prompt text alone, with its own acceptance and drift."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pytest_specperf.prompts.files import PromptRecord, load_prompts
from pytest_specperf.sim import SimServer
from pytest_specperf.sim.profile import Profile, ProfileError, load_profile, profile_from_dict

SHIPPED = load_prompts("builtin:specbench-mini")
TOKENS = 400  # past math_reasoning's shift at 256, ~100 steps a request: ~400 steps a category


@pytest.fixture(scope="module")
def cat_sim() -> Iterator[SimServer]:
    """The shipped categories profile as llama-server (per-response draft counts), jitter off.

    ``late`` matches the same prompts as ``multi_turn`` but comes after it: the first rule in
    profile order must win, also in the subprocess (a profile handed over with sorted keys would
    put ``late`` first).
    """
    late = {"late": {"match": "^(Hi|Hello)", "accept_len": 7.5}}
    with SimServer("categories", speed=50, overrides={"dialect": "llamacpp", "jitter": 0.0, "categories": late}) as sim:
        yield sim


def _send(sim: SimServer, rec: PromptRecord, i: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request for the record: chat for even ``i``, completions for odd, so both routes classify."""
    body: dict[str, Any] = {"max_tokens": TOKENS, "ignore_eos": True, "seed": 7 + i, **(extra or {})}
    if i % 2 == 0:
        out = httpx.post(sim.url + "/v1/chat/completions", json={**body, "messages": rec.messages()}, timeout=60)
    else:
        out = httpx.post(sim.url + "/v1/completions", json={**body, "prompt": rec.text}, timeout=60)
    assert out.status_code == 200, out.text
    return out.json()


@pytest.fixture(scope="module")
def runs(cat_sim: SimServer) -> list[tuple[PromptRecord, dict[str, Any], dict[str, Any]]]:
    """(record, response, truth) for every shipped prompt, one request at a time."""
    out = []
    for i, rec in enumerate(SHIPPED.records):
        resp = _send(cat_sim, rec, i)
        out.append((rec, resp, cat_sim.truth(resp["id"])))
    return out


def test_every_shipped_prompt_is_recognised_as_its_category() -> None:
    profile = load_profile("categories")
    assert {r.category: profile.category_of(r.text) for r in SHIPPED.records} == {c: c for c in SHIPPED.categories()}
    assert all(profile.category_of("\n".join(m["content"] for m in r.messages())) == r.category
               for r in SHIPPED.records)
    assert profile.category_of("Continue the text above in the same style.") is None


def test_truth_records_the_category_the_text_shows(runs: list) -> None:
    assert [t["category"] for _, _, t in runs] == [r.category for r, _, _ in runs]


def _expected_accepted(profile: Profile, truth: dict[str, Any]) -> tuple[float, float]:
    """(mean, variance) of the accepted drafts the profile gives this request's decode steps (min-variance)."""
    mean = var = 0.0
    generated = truth["steps"][0]["tokens"]
    for st in truth["steps"][1:]:
        want = profile.accept_mean(truth["content_kind"], generated, truth["category"]) - 1.0
        frac = want - math.floor(want)
        if st["drafted"] > want:  # a full draft: floor(want) plus one more with probability frac
            mean += want
            var += frac * (1 - frac)
        else:  # a draft cut short near max_tokens accepts what it can
            mean += min(st["drafted"], want)
        generated += st["tokens"]
    return mean, var


def test_per_category_acceptance_is_the_profiles(cat_sim: SimServer, runs: list) -> None:
    """The server's own per-response counts add up to the truth per category, which follows the profile."""
    served: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    truth: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0])
    for rec, resp, rec_truth in runs:
        timings = resp["timings"]
        served[rec.category][0] += timings["draft_n_accepted"]
        served[rec.category][1] += timings["draft_n"]
        decode = rec_truth["steps"][1:]
        mean, var = _expected_accepted(cat_sim.profile, rec_truth)
        t = truth[rec.category]
        t[0] += sum(st["accepted"] for st in decode)
        t[1] += sum(st["drafted"] for st in decode)
        t[2] += mean
        t[3] += var
    rates, expected = {}, {}
    for cat, (acc, drafted, mean, var) in truth.items():
        assert served[cat] == [acc, drafted], cat  # the server's accounting is the truth, exactly
        # the profile: within 4 standard errors of its draws (seeded, so the draws are fixed)
        assert abs(acc - mean) <= max(4 * math.sqrt(var), 1.0), (cat, acc, mean)
        rates[cat], expected[cat] = acc / drafted, mean / drafted
    # the categories are told apart: the measured rates fall in the profile's order, all eight distinct
    assert sorted(rates, key=rates.__getitem__) == sorted(expected, key=expected.__getitem__)
    assert len(set(rates.values())) == len(SHIPPED.categories()) == 8


def test_a_category_drifts_as_its_profile_says(runs: list) -> None:
    """math_reasoning accepts 2 drafts a step until 256 tokens, then 1.2; qa never changes."""
    def phases(category: str) -> tuple[float, float]:
        before, after = [], []
        for rec, _, t in runs:
            if rec.category != category:
                continue
            generated = t["steps"][0]["tokens"]
            for st in t["steps"][1:-1]:  # the last step may be cut short
                (before if generated < 256 else after).append(st["accepted"])
                generated += st["tokens"]
        return sum(before) / len(before), sum(after) / len(after)

    early, late = phases("math_reasoning")
    assert early == pytest.approx(2.0, abs=0.05) and late == pytest.approx(1.2, abs=0.1)
    early, late = phases("qa")
    assert early == pytest.approx(late, abs=0.1) == pytest.approx(1.8, abs=0.1)


def test_the_category_comes_from_the_text_not_from_metadata(cat_sim: SimServer) -> None:
    """A client cannot tell the simulator the answer: fields and headers naming a category are ignored."""
    qa = next(r for r in SHIPPED.records if r.category == "qa")
    out = httpx.post(cat_sim.url + "/v1/completions", headers={"X-Category": "tool_call"}, timeout=60,
                     json={"prompt": qa.text, "max_tokens": 8, "category": "tool_call",
                           "metadata": {"category": "tool_call"}}).json()
    assert cat_sim.truth(out["id"])["category"] == "qa"


def test_rules_keep_their_order_through_a_round_trip() -> None:
    rules = {"zeta": {"match": "x", "accept_len": 2.0}, "alpha": {"match": "x", "accept_len": 3.0}}
    profile = load_profile("healthy", {"categories": rules})
    again = profile_from_dict(json.loads(profile.to_json()), name="again")
    assert list(again.categories) == ["zeta", "alpha"] and again.category_of("x") == "zeta"
    assert again.categories == profile.categories
    assert load_profile("healthy").categories == {}


@pytest.mark.parametrize(("categories", "message"), [
    (["qa"], "'categories': expected a mapping"),
    ({"qa": {"accept_len": 3.0}}, "'categories.qa': needs both match"),
    ({"qa": {"match": "(", "accept_len": 3.0}}, "'categories.qa.match': not a valid regular expression"),
    ({"qa": {"match": "Q", "accept_len": 9.0}}, "'categories.qa.accept_len': must be <= 8"),
    ({"qa": {"match": "Q", "accept_len": 3.0, "acept_shift": {}}}, "did you mean 'accept_shift'"),
    ({"qa": {"match": "Q", "accept_len": 3.0, "accept_shift": {"after_tokens": 9}}},
     "'categories.qa.accept_shift': expected a mapping of after_tokens and accept_len"),
    ({"qa": {"match": "", "accept_len": 3.0}}, "expected a non-empty regular expression"),
])
def test_bad_category_rules_name_the_key(categories: Any, message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)) as err:
        profile_from_dict({"categories": categories})
    assert "\n" not in str(err.value)
