"""Prometheus ``/metrics`` per dialect, with the names and update timing of the real servers.

- vllm: ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total``, ``..._num_accepted_tokens_per_pos_total{position}`` (labels
  ``engine``, ``model_name``; ``_created`` samples as prometheus_client writes them), plus
  ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``, ``vllm:num_requests_running``;
  counters move on every decode step while requests run.
- llamacpp: ``llamacpp:*`` counters folded in only when a request finishes; per-position
  series only after the first finished speculative request; the ``*_tokens_seconds`` gauges
  average over the window between two scrapes (reset on each scrape).
- sglang: gauges ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` over the last
  window of ``DECODE_LOG_INTERVAL`` decode steps; counters ``sglang:spec_verify_calls_total``
  and ``sglang:generation_tokens_total{is_streaming}`` added per finished request.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

VLLM_FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
DECODE_LOG_INTERVAL = 40  # SGLang --decode-log-interval default
LLAMACPP_DISABLED = "This server does not support metrics endpoint. Start it with `--metrics`"


def _fmt(v: float) -> str:
    return repr(float(v))


class _Text:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for suffix_labels, value in samples:
            self.lines.append(f"{name}{suffix_labels} {_fmt(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class SimMetrics:
    """Counters of one simulated server; updated from the engine, rendered per dialect."""

    def __init__(self, dialect: str, model: str, max_accept: int) -> None:
        self.dialect = dialect
        self.model = model
        self.k = max(0, max_accept - 1)
        self.created = time.time()
        self.start_unix = int(self.created)
        # live counters (vllm semantics: per step)
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.per_pos = [0] * self.k
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.running = 0
        self.finished: dict[str, int] = defaultdict(int)
        # folded at request end (llamacpp, sglang)
        self.done: dict[str, float] = defaultdict(float)
        self.done_per_pos = [0] * self.k
        self.done_spec_requests = 0
        self.done_gen_by_stream: dict[str, int] = defaultdict(int)
        self.bucket: dict[str, float] = defaultdict(float)  # llamacpp: tokens/ms since the last scrape
        # sglang window gauges
        self.win = [0, 0, 0]  # steps, accepted, drafted
        self.win_count = 0
        self.accept_length_gauge = 0.0
        self.accept_rate_gauge = 0.0

    def on_prefill(self, prompt_tokens: int) -> None:
        """A request finished its prefill."""
        self.prompt_tokens += prompt_tokens
        self.generation_tokens += 1

    def on_step(self, accepted: int, drafted: int, tokens: int) -> None:
        """One decode step of one request."""
        self.generation_tokens += tokens
        if drafted > 0:
            self.drafts += 1
            self.draft_tokens += drafted
            self.accepted += accepted
            for i in range(accepted):
                self.per_pos[i] += 1
        w = self.win
        w[0] += 1
        w[1] += accepted
        w[2] += drafted
        self.win_count += 1
        if self.win_count >= DECODE_LOG_INTERVAL:
            self.accept_length_gauge = (w[0] + w[1]) / w[0]
            self.accept_rate_gauge = w[1] / w[2] if w[2] else 0.0
            self.win = [0, 0, 0]
            self.win_count = 0

    def on_finish(self, record: dict[str, Any]) -> None:
        """A request ended (any reason): fold it into the per-request counters."""
        steps = record["steps"]
        decode = [s for s in steps if s["phase"] == "decode"]
        reason = record.get("finish_reason") or "abort"
        self.finished[reason if reason in VLLM_FINISH_REASONS else "abort"] += 1  # a dropped stream is an abort
        d = self.done
        prompt_ms = steps[0]["step_ms"] if steps else 0.0
        predicted_ms = 1000.0 * (steps[-1]["t_s"] - steps[0]["t_s"]) if len(steps) > 1 else 0.0
        n = record["completion_tokens"]
        d["prompt_tokens"] += record["prompt_tokens"]
        d["prompt_seconds"] += prompt_ms / 1000.0
        d["tokens_predicted"] += n
        d["tokens_predicted_seconds"] += predicted_ms / 1000.0
        d["n_decode"] += (1 if steps else 0) + sum(1 for s in decode if s["drafted"] == 0)
        d["n_tokens_max"] = max(d["n_tokens_max"], record["prompt_tokens"] + n)
        drafted = sum(s["drafted"] for s in decode)
        d["draft_tokens"] += drafted
        d["accepted"] += sum(s["accepted"] for s in decode)
        d["drafts"] += sum(1 for s in decode if s["drafted"] > 0)
        d["verify_calls"] += len(decode)
        for s in decode:
            for i in range(s["accepted"]):
                self.done_per_pos[i] += 1
        if drafted:
            self.done_spec_requests += 1
        self.done_gen_by_stream["true" if record["stream"] else "false"] += n
        b = self.bucket
        b["prompt_tokens"] += record["prompt_tokens"]
        b["prompt_ms"] += prompt_ms
        b["predicted_tokens"] += n
        b["predicted_ms"] += predicted_ms

    # rendering ------------------------------------------------------------------------------

    def render(self, enabled: bool = True) -> tuple[int, str, dict[str, str]]:
        """(HTTP status, body, headers) for ``GET /metrics`` in this dialect."""
        if self.dialect == "llamacpp":
            if not enabled:
                return 501, LLAMACPP_DISABLED, {}
            return 200, self._llamacpp(), {"Content-Type": "text/plain; version=0.0.4",
                                            "Process-Start-Time-Unix": str(self.start_unix)}
        if self.dialect == "sglang":
            if not enabled:
                return 404, "Not Found", {}
            return 200, self._sglang(), {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        return 200, self._vllm(enabled and self.k > 0), {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}

    def _vllm(self, spec: bool) -> str:
        t = _Text()
        lab = f'engine="0",model_name="{self.model}"'

        def counter(name: str, help_text: str, rows: list[tuple[str, float]]) -> None:
            # vLLM's prometheus_client writes each counter's _created samples as a gauge family of their own.
            base = name[: -len("_total")]
            t.lines.append(f"# HELP {name} {help_text}")
            t.lines.append(f"# TYPE {name} counter")
            for labels, value in rows:
                t.lines.append(f"{name}{{{labels}}} {_fmt(value)}")
            t.lines.append(f"# HELP {base}_created {help_text}")
            t.lines.append(f"# TYPE {base}_created gauge")
            for labels, _ in rows:
                t.lines.append(f"{base}_created{{{labels}}} {_fmt(self.created)}")

        t.family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                 [(f"{{{lab}}}", self.running)])
        t.family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                 [(f"{{{lab}}}", 0)])
        counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", [(lab, self.prompt_tokens)])
        counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
                [(lab, self.generation_tokens)])
        # Every finish reason vLLM knows has a sample from the start, in its order; labels sorted by name.
        counter("vllm:request_success_total", "Count of successfully processed requests.",
                [(f'engine="0",finished_reason="{r}",model_name="{self.model}"', self.finished.get(r, 0))
                 for r in VLLM_FINISH_REASONS])
        if spec:
            counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", [(lab, self.drafts)])
            counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
                    [(lab, self.draft_tokens)])
            counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
                    [(lab, self.accepted)])
            counter("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                    "Accepted tokens per draft position.",
                    [(f'{lab},position="{i}"', v) for i, v in enumerate(self.per_pos)])
        return t.text()

    def _llamacpp(self) -> str:
        t = _Text()
        d, b = self.done, self.bucket
        prompt_tps = 1000.0 * b["prompt_tokens"] / b["prompt_ms"] if b["prompt_ms"] else 0.0
        pred_tps = 1000.0 * b["predicted_tokens"] / b["predicted_ms"] if b["predicted_ms"] else 0.0
        self.bucket = defaultdict(float)  # the gauges average over the window between two scrapes
        rows = [
            ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", d["prompt_tokens"]),
            ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from cache.", 0),
            ("prompt_seconds_total", "counter", "Prompt process time", d["prompt_seconds"]),
            ("tokens_predicted_total", "counter", "Number of generation tokens processed.", d["tokens_predicted"]),
            ("tokens_predicted_seconds_total", "counter", "Predict process time", d["tokens_predicted_seconds"]),
            ("n_decode_total", "counter", "Total number of llama_decode() calls", d["n_decode"]),
            ("n_tokens_max", "counter", "Largest observed n_tokens.", d["n_tokens_max"]),
            ("spec_decode_num_draft_tokens_total", "counter", "Total draft tokens generated", d["draft_tokens"]),
            ("spec_decode_num_accepted_tokens_total", "counter", "Total draft tokens accepted by the target model",
             d["accepted"]),
            ("spec_decode_num_drafts_total", "counter", "Total speculative decoding verification steps", d["drafts"]),
            ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", prompt_tps),
            ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", pred_tps),
            ("requests_processing", "gauge", "Number of requests processing.", self.running),
            ("requests_deferred", "gauge", "Number of requests deferred.", 0),
            ("n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call",
             1.0 if self.running else 0.0),
        ]
        for name, kind, help_text, value in rows:
            t.family(f"llamacpp:{name}", kind, help_text, [("", value)])
        if self.done_spec_requests:
            t.family("llamacpp:spec_decode_num_accepted_tokens_per_pos_total", "counter",
                     "Accepted draft tokens per position",
                     [(f'{{position="{i}"}}', v) for i, v in enumerate(self.done_per_pos)])
        return t.text()

    def _sglang(self) -> str:
        t = _Text()
        lab = f'model_name="{self.model}"'
        t.family("sglang:num_running_reqs", "gauge", "The number of running requests.", [(f"{{{lab}}}", self.running)])
        t.family("sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
                 [(f"{{{lab}}}", self.accept_length_gauge)])
        t.family("sglang:spec_accept_rate", "gauge", "The average acceptance rate of speculative decoding.",
                 [(f"{{{lab}}}", self.accept_rate_gauge)])
        t.family("sglang:spec_num_steps", "gauge", "The number of speculative decoding steps.",
                 [(f"{{{lab}}}", self.k)])
        t.family("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                 [(f"{{{lab}}}", self.done["prompt_tokens"])])
        t.family("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.",
                 [(f'{{{lab},is_streaming="{s}"}}', self.done_gen_by_stream.get(s, 0)) for s in ("false", "true")])
        t.family("sglang:spec_verify_calls_total", "counter", "The number of verify calls.",
                 [(f"{{{lab}}}", self.done["verify_calls"])])
        return t.text()
