"""Draft acceptance from what servers expose: /metrics counter deltas, per-response fields, chunk sizes.

Definitions follow vLLM and llama.cpp: mean acceptance length = 1 + accepted / verify steps
(the bonus token included), acceptance rate = accepted / drafted. llama.cpp folds a request
into its counters only when the request ends, so scrapes bracket whole requests; per-window
acceptance comes from chunk sizes on servers that send one chunk per engine step.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from pytest_specperf.cases.result_parts import Acceptance, AcceptanceSample, Attribution
from pytest_specperf.endpoint.tls import tls

if TYPE_CHECKING:
    from pytest_specperf.endpoint.sse import Trace

# Counter sample names per server kind (docs/servers.md).
SERIES: dict[str, dict[str, str]] = {
    "vllm": {"steps": "vllm:spec_decode_num_drafts_total", "drafted": "vllm:spec_decode_num_draft_tokens_total",
             "accepted": "vllm:spec_decode_num_accepted_tokens_total",
             "per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos_total",
             "generated": "vllm:generation_tokens_total"},
    "llamacpp": {"steps": "llamacpp:spec_decode_num_drafts_total",
                 "drafted": "llamacpp:spec_decode_num_draft_tokens_total",
                 "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
                 "per_pos": "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                 "generated": "llamacpp:tokens_predicted_total"},
    "sglang": {"steps": "sglang:spec_verify_calls_total", "generated": "sglang:generation_tokens_total"},
}


def snapshot(text: str) -> dict[str, float]:
    """Counter samples by name, summed over label sets (engines, models); per-position kept apart."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            key = f"{s.name}{{position={s.labels['position']}}}" if "position" in s.labels else s.name
            out[key] = out.get(key, 0.0) + float(s.value)
    return out


def from_metrics(kind: str, before: dict[str, float], after: dict[str, float], completion_tokens: int,
                 streams_steps: int | None = None) -> Acceptance | None:
    """Acceptance from two scrapes around this case's requests; None when the server shows none."""
    names = SERIES.get(kind)
    if names is None:
        return None

    def delta(role: str) -> float | None:
        name = names.get(role)
        if name is None or name not in after:
            return None
        return after[name] - before.get(name, 0.0)

    steps = delta("steps")
    generated = delta("generated")
    contaminated = generated is not None and generated > completion_tokens * 1.02 + 2
    if kind == "sglang":
        if not steps:
            return None
        if contaminated:
            return _contaminated()
        return Acceptance(completion_tokens / steps, None, "metrics", True, steps=int(steps),
                          contaminated=contaminated,
                          note="SGLang counts no drafted tokens; mean length = generated / verify calls")
    accepted, drafted = delta("accepted"), delta("drafted")
    if not steps or accepted is None:
        return None
    if streams_steps is not None and steps > streams_steps * 1.05 + 2:
        contaminated = True
    per_pos = []
    i = 0
    while f"{names['per_pos']}{{position={i}}}" in after:
        key = f"{names['per_pos']}{{position={i}}}"
        per_pos.append((after[key] - before.get(key, 0.0)) / steps)
        i += 1
    if contaminated:
        return _contaminated()
    return Acceptance(1.0 + accepted / steps, accepted / drafted if drafted else None, "metrics", True,
                      steps=int(steps), drafted=int(drafted) if drafted is not None else None,
                      accepted=int(accepted), per_position=per_pos)


def _contaminated() -> Acceptance:
    # Other requests' steps are in the deltas: any figure from them would be wrong, so none is given.
    return Acceptance(None, None, "metrics", False, contaminated=True,
                      note="counters moved more than this case explains (other traffic on the server): "
                           "no figure")


def from_tgi_summary(before: dict[str, float], after: dict[str, float]) -> Acceptance | None:
    """TGI: ``tgi_request_skipped_tokens`` is a summary of n-1 per step (n = tokens of the step)."""
    s_name, c_name = "tgi_request_skipped_tokens_sum", "tgi_request_skipped_tokens_count"
    s0, s1 = before.get(s_name, 0.0), after.get(s_name)
    c0, c1 = before.get(c_name, 0.0), after.get(c_name)
    if s1 is None or c1 is None or c1 - c0 <= 0:
        return None
    # The prefill step adds a 0 sample, so this slightly understates the length: inferred, not exact.
    return Acceptance(1.0 + (s1 - s0) / (c1 - c0), None, "metrics", False, steps=int(c1 - c0),
                      note="TGI skipped-tokens summary; the prefill step is counted as a step")


def from_vllm_response(metrics: list[dict[str, Any]]) -> Acceptance | None:
    """vLLM ``--per-request-spec-decode-metrics``: ``metrics.speculative_decoding`` on the final chunk."""
    found = [m.get("speculative_decoding") for m in metrics if isinstance(m, dict)]  # not result data
    sd = [x for x in found if isinstance(x, dict) and x.get("num_spec_steps")]  # not result data
    if not sd:
        return None
    steps = sum(int(x["num_spec_steps"]) for x in sd)
    accepted = sum(int(x.get("num_accepted_draft_tokens", 0)) for x in sd)  # not result data
    drafted = sum(int(x.get("num_draft_tokens", 0)) for x in sd)  # not result data
    return Acceptance(1.0 + accepted / steps, accepted / drafted if drafted else None, "response", True,
                      steps=steps, drafted=drafted, accepted=accepted)


def from_sglang_details(details: list[dict[str, Any]]) -> Acceptance | None:
    """SGLang per-request counts: ``sglext.spec_tokens_details`` (or native ``meta_info``) ``spec_*`` fields."""
    ds = [d for d in details if isinstance(d, dict) and d.get("spec_verify_ct")]  # not result data
    if not ds:
        return None
    steps = sum(int(d["spec_verify_ct"]) for d in ds)
    if not all("spec_num_correct_drafts" in d for d in ds):
        # Older builds give only SGLang's own length (completion tokens / verify calls).
        lengths = [float(d.get("spec_accept_length", 0.0)) for d in ds]  # not result data
        mean = sum(n * int(d["spec_verify_ct"]) for n, d in zip(lengths, ds, strict=True)) / steps
        return Acceptance(mean, None, "response", False, steps=steps,
                          note="SGLang spec_accept_length (completion tokens / verify calls)")
    accepted = sum(int(d["spec_num_correct_drafts"]) for d in ds)
    drafted = sum(int(d.get("spec_num_proposed_drafts", 0)) for d in ds)  # not result data
    # Histogram index j = verify steps that accepted j drafts, so position k was accepted in
    # the steps that accepted more than k.
    hist: list[int] = []
    for d in ds:
        h = d.get("spec_correct_drafts_histogram") or []  # not result data
        hist += [0] * (len(h) - len(hist))
        for j, v in enumerate(h):
            hist[j] += int(v)
    per_pos = [sum(hist[k + 1:]) / steps for k in range(len(hist) - 1)] if sum(hist) == steps else []
    return Acceptance(1.0 + accepted / steps, accepted / drafted if drafted else None, "response", True,
                      steps=steps, drafted=drafted, accepted=accepted, per_position=per_pos)


def response_fields(traces: Iterable[Trace]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                       list[dict[str, Any]]]:
    """Per-request acceptance fields of each stream: (llama.cpp ``timings``, vLLM ``metrics``, SGLang
    ``sglext.spec_tokens_details``), each from the streams that carry it."""
    timings: list[dict[str, Any]] = []
    resp_metrics: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    for trace in traces:
        if trace.timings is not None:
            timings.append(trace.timings)
        if isinstance(trace.extras.get("metrics"), dict):  # not result data
            resp_metrics.append(trace.extras["metrics"])
        sglext = trace.extras.get("sglext")  # not result data
        if isinstance(sglext, dict) and isinstance(sglext.get("spec_tokens_details"), dict):  # not result data
            details.append(sglext["spec_tokens_details"])
    return timings, resp_metrics, details


def from_llamacpp_timings(timings: list[dict[str, Any]]) -> Acceptance | None:
    """Rate from llama.cpp's per-response ``timings.draft_n`` / ``draft_n_accepted`` (absent keys mean 0)."""
    drafted = sum(int(t.get("draft_n", 0)) for t in timings)  # not result data
    accepted = sum(int(t.get("draft_n_accepted", 0)) for t in timings)  # not result data
    if not timings:
        return None
    if drafted == 0:
        return Acceptance(None, None, "response", True, drafted=0, accepted=0, note="no drafts proposed")
    return Acceptance(None, accepted / drafted, "response", True, drafted=drafted, accepted=accepted,
                      note="steps are not in timings; mean length needs /metrics")


def from_chunks(tokens_per_chunk: float) -> Acceptance:
    """Inferred from chunk sizes on servers that send one chunk per engine step."""
    return Acceptance(tokens_per_chunk, None, "chunks", False,
                      note="one chunk per engine step assumed; merged chunks would inflate it")


class Scraper:
    """Scrapes /metrics every ``interval`` s in a thread during a stream, for acceptance over time.

    Only worth it where counters move per step (vLLM; not llama.cpp, which folds a request in at
    its end). Its own connection, and a scrape every half second, keep it off the stream's clock.
    """

    def __init__(self, url: str, kind: str, interval: float = 0.5, headers: dict[str, str] | None = None,
                 params: tuple[tuple[str, str], ...] = ()) -> None:
        self.url, self.kind, self.interval = url.rstrip("/"), kind, interval
        self._headers = headers or {}
        self._params = params  # the endpoint URL's query, sent on every request
        self.samples: list[tuple[float, dict[str, float]]] = []  # (perf_counter, snapshot)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="specperf-scraper", daemon=True)

    def _scrape(self, http: httpx.Client) -> None:
        try:
            resp = http.get(f"{self.url}/metrics")
            if resp.status_code == 200:
                self.samples.append((time.perf_counter(), snapshot(resp.text)))
        except (httpx.HTTPError, ValueError):
            pass  # a missed scrape only coarsens the series

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._scrape(self._http)
        self._scrape(self._http)

    def __enter__(self) -> Scraper:
        # The first scrape is taken here, before the request: one at send time would delay its TTFT.
        self._http = httpx.Client(headers=self._headers, params=self._params, timeout=5.0, verify=tls())
        self._scrape(self._http)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._http.close()

    def series(self, t0: float) -> list[AcceptanceSample]:
        """Mean acceptance length per scrape interval (``t_s``: the interval's end since t0)."""
        names = SERIES.get(self.kind)
        if not names or "accepted" not in names:
            return []
        out: list[AcceptanceSample] = []
        for (_, a), (tb, b) in itertools.pairwise(self.samples):
            steps = b.get(names["steps"], 0.0) - a.get(names["steps"], 0.0)
            if steps > 0:
                acc = b.get(names["accepted"], 0.0) - a.get(names["accepted"], 0.0)
                out.append(AcceptanceSample(t_s=tb - t0, mean_len=1.0 + acc / steps, steps=int(steps)))
        return out


#: A late rate at least this much below the early one is a slowdown worth splitting (smaller ones are noise,
#: whose split into shares is arbitrary: a 0.5% change can read as 300% acceptance, -200% step time).
SLOWDOWN_TO_SPLIT = 0.01


def slowdown_split(att: Attribution | Mapping[str, Any] | None) -> str:
    """How a slowdown splits between acceptance and step time ('acceptance 62%, step time 38%'), or why there is
    nothing to split; '-' without an attribution (a record, or its JSON as a mapping)."""
    if not att:
        return "-"
    if isinstance(att, Mapping):
        att = Attribution(**{k: v for k, v in att.items() if k in Attribution.__dataclass_fields__})
    a0, a1, s0, s1 = att.accept_early, att.accept_late, att.step_ms_early, att.step_ms_late
    if a0 is None or a1 is None or s0 is None or s1 is None or att.accept_share is None or att.step_share is None:
        return "-"
    try:
        change = (a1 / a0) * (s0 / s1) - 1
        shares = [round(float(v) * 100) for v in (att.accept_share, att.step_share)]  # ints: never "-0%"
    except (TypeError, ValueError, ZeroDivisionError):
        return "-"
    if not change <= -SLOWDOWN_TO_SPLIT:
        return f"none to split: late rate {change * 100:+.0f}% vs early".replace("-0%", "+0%")
    return f"acceptance {shares[0]}%, step time {shares[1]}%"
