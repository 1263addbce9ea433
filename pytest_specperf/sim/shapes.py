"""Per-dialect response shapes: how one generation is written out (SSE chunks or one JSON body)."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from pytest_specperf.sim.engine import Engine, GenRequest
from pytest_specperf.sim.profile import Profile
from pytest_specperf.sim.tokenizer import token_piece

#: vLLM writes ``vllm-<version>-<hash>`` on its final usage chunk and non-streamed bodies.
SYSTEM_FINGERPRINT = "vllm-0.0.0+specperf-sim"
REASONING_KEY = {"vllm": "reasoning", "sglang": "reasoning_content", "llamacpp": "reasoning_content"}


class ResponseSink:
    """Formats one generation for its route, dialect and stream mode."""

    def __init__(self, engine: Engine, request: web.Request, req: GenRequest, opts: dict[str, Any]) -> None:
        self.engine = engine
        self.p: Profile = engine.profile
        self.request = request
        self.req = req
        self.opts = opts
        self.dialect = self.p.dialect
        self.created = int(time.time())
        self.response: web.StreamResponse | None = None
        self.ids: list[int] = []
        self.reasoning_left = self.p.reasoning_tokens if req.route == "chat" else 0
        self.content_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.prefill_done_at = 0.0
        self.reasoning_key = self.p.reasoning_key or REASONING_KEY[self.dialect]
        self.reasoning_sent = 0  # reasoning tokens written so far
        self.cached = 0  # prompt tokens the prefix cache held (set from the truth record at the first step)
        self.pending: list[int] = []  # decode tokens held back by stream_interval, not yet written
        self.held: list[bytes] | None = []  # a hold=E@N fault's events, not yet written (None once released)
        self.held_since = 0.0

    # common pieces --------------------------------------------------------------------------

    def _usage(self, completion: int, where: str = "body") -> dict[str, Any]:
        """``usage`` as the dialect writes it ``where``: "chunk" (continuous stats), "final" (the usage chunk)
        or "body" (non-streamed). vLLM leaves the details out of streamed completions and its final chunk,
        and writes ``completion_tokens_details: null`` on chat chunks; cached prompt tokens and reasoning
        tokens appear where each server reports them."""
        prompt = len(self.req.prompt_ids)
        out: dict[str, Any] = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                               "completion_tokens": completion}
        details = self._prompt_details() if where != "chunk" else None
        if self.dialect != "vllm":
            out["prompt_tokens_details"] = details
        elif where == "body":
            out.update(prompt_tokens_details=details, completion_tokens_details=None)
        else:
            if details is not None:
                out["prompt_tokens_details"] = details
            if where == "chunk" and self.req.route == "chat":
                out["completion_tokens_details"] = None
        if self.p.reasoning_tokens and self.req.route == "chat" and self.dialect != "llamacpp":
            # vLLM (and SGLang) with a reasoning parser count the reasoning tokens sent so far
            out["completion_tokens_details"] = {"reasoning_tokens": min(self.reasoning_sent, completion)}
        return out

    def _prompt_details(self) -> dict[str, Any] | None:
        """``usage.prompt_tokens_details`` as each server fills it (only on the final usage)."""
        if self.dialect == "llamacpp":
            return {"cached_tokens": self.cached}
        if not self.p.cache_report:  # vLLM without --enable-prompt-tokens-details, SGLang without --enable-cache-report
            return None
        if self.dialect == "sglang" and not self.cached:
            return None  # SGLang leaves the details out when nothing was cached
        return {"cached_tokens": self.cached}

    def _spec_decoding(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """vLLM ``metrics.speculative_decoding`` (``--per-request-spec-decode-metrics detailed``): this request's
        own verify steps, from the recorded truth; None where the profile does not ask for it."""
        if not (self.p.spec_metrics and self.p.speculation and self.dialect == "vllm"):
            return None
        k = self.p.drafts_per_step
        steps = [s for s in record["steps"] if s.get("phase") != "prefill" and s["drafted"] > 0]
        hist = [0] * (k + 1)
        for s in steps:
            hist[s["accepted"]] += 1
        accepted, drafted = sum(s["accepted"] for s in steps), sum(s["drafted"] for s in steps)
        out: dict[str, Any] = {
            "mean_acceptance_length": 1.0 + accepted / len(steps) if steps else 1.0,
            "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
            "acceptance_histogram": hist, "num_spec_steps": len(steps), "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": drafted, "num_spec_tokens": k,
            "per_step_accepted": [s["accepted"] for s in steps] or None,
            "per_step_drafted": [s["drafted"] for s in steps] or None}
        return out

    def _timings(self, record: dict[str, Any] | None, predicted_n: int) -> dict[str, Any]:
        steps = record["steps"] if record else []
        prompt_ms = steps[0]["step_ms"] if steps else 0.0
        predicted_ms = 1000.0 * (time.monotonic() - self.prefill_done_at) if self.prefill_done_at else 0.0
        n_prompt = len(self.req.prompt_ids)
        n_prompt -= self.cached  # llama.cpp: prompt_n counts the tokens it evaluated, cache_n the ones it reused
        out: dict[str, Any] = {
            "cache_n": self.cached, "prompt_n": n_prompt, "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / n_prompt if n_prompt else 0.0,
            "prompt_per_second": 1000.0 * n_prompt / prompt_ms if prompt_ms else 0.0,
            "predicted_n": predicted_n, "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / predicted_n if predicted_n else 0.0,
            "predicted_per_second": 1000.0 * (predicted_n - 1) / predicted_ms if predicted_ms else 0.0,
        }
        if record:
            drafted = sum(s["drafted"] for s in steps)
            if drafted:  # llama.cpp leaves the keys out when nothing was drafted
                out["draft_n"] = drafted
                out["draft_n_accepted"] = sum(s["accepted"] for s in steps)
        return out

    def _sglext(self, record: dict[str, Any], completion: int) -> dict[str, Any]:
        """SGLang's ``sglext.spec_tokens_details`` (``return_spec_tokens_details``): one request's verify counts."""
        decode = [s for s in record["steps"] if s.get("phase") != "prefill"]
        verify = len(decode)
        correct = sum(s["accepted"] for s in decode)
        proposed = sum(s["drafted"] for s in decode)
        hist = [0] * max(self.p.max_accept, self.p.drafts_per_step + 1)
        for s in decode:
            hist[s["accepted"]] += 1
        return {"spec_tokens_details": {
            "spec_accept_rate": correct / proposed if proposed else 0.0,
            "spec_accept_length": completion / verify if verify else 0.0,  # SGLang's own definition
            "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": proposed, "spec_verify_ct": verify,
            "spec_correct_drafts_histogram": hist}}

    def _split(self, ids: list[int]) -> tuple[str, str]:
        """(reasoning text, content text) of a step: the first reasoning_tokens go to reasoning."""
        k = min(self.reasoning_left, len(ids))
        self.reasoning_left -= k
        self.reasoning_sent += k
        return "".join(token_piece(t) for t in ids[:k]), "".join(token_piece(t) for t in ids[k:])

    def _choice_fields(self, choice: dict[str, Any], ids: list[int], where: str = "body") -> dict[str, Any]:
        """The per-dialect fields a choice carries ``where`` ("chunk" or "body"): asked-for token ids, and vLLM's
        null-valued fields (its streamed chat chunks have ``stop_reason`` only once they finish)."""
        token_ids = list(ids) if self.opts["return_ids"] else None
        if self.dialect != "vllm":
            if token_ids is not None:
                choice["token_ids"] = token_ids
            return choice
        chat = self.req.route == "chat"
        if not (chat and where == "chunk" and choice["finish_reason"] is None):
            choice["stop_reason"] = None
        if not chat and where == "chunk":
            choice["prompt_token_ids"] = None
        choice["token_ids"] = token_ids
        if where == "body":
            if not chat:
                choice.update(prompt_logprobs=None, prompt_token_ids=None)
            choice["routed_experts"] = None
        return choice

    def _head(self, obj: str) -> dict[str, Any]:
        head: dict[str, Any] = {"id": self.req.id, "object": obj, "created": self.created, "model": self.p.model}
        if self.dialect == "llamacpp":
            head["system_fingerprint"] = "b0-specperf-sim"
        return head

    @staticmethod
    def _sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    # Sink protocol --------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.req.stream:
            return
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache", "X-Request-Id": self.req.id})
        await resp.prepare(self.request)
        self.response = resp

    async def step(self, ids: list[int], generated: int, finish_reason: str | None) -> float | None:
        first = not self.ids
        self.ids.extend(ids)
        if first:
            self.prefill_done_at = time.monotonic()
            rec = self.engine.truth.get(self.req.id)
            self.cached = rec["cached_tokens"] if rec else 0
        if self.req.stream and self.dialect == "llamacpp":
            data = self._llamacpp_events(ids, generated, first)
        else:
            if self.req.stream and not first and self.p.stream_interval > 1:
                # vLLM --stream-interval N: a chunk once N tokens are pending, so a chunk is no longer a step
                self.pending.extend(ids)
                if len(self.pending) < self.p.stream_interval and finish_reason is None:
                    return None
                ids, self.pending = self.pending, []
            reasoning, content = self._split(ids)
            if not self.req.stream:
                self.reasoning_parts.append(reasoning)
                self.content_parts.append(content)
                return None
            data = self._step_chunk(ids, reasoning, content, generated, first, finish_reason)
        return await self._write_step(data, generated - len(ids), finish_reason is not None)

    async def _write_step(self, data: bytes, sent: int, last: bool) -> float | None:
        """Write one step's events; returns when they went to the socket (None while a fault holds them).

        A ``hold=E@N`` fault is a buffering proxy in front of the server: once N tokens were sent it keeps the
        next E steps' events and writes them at once (the engine steps on undisturbed)."""
        assert self.response is not None
        f = self.req.faults
        if f.hold_events and self.held is not None and sent >= f.hold_at:
            if not self.held:
                self.held_since = time.monotonic()
            self.held.append(data)
            if len(self.held) < f.hold_events and not last:
                return None
            return await self._release(len(self.held) - 1)  # the engine records this step once it is handed over
        at = time.monotonic()
        await self.response.write(data)
        return at

    async def _release(self, recorded: int) -> float:
        """Write the held events at once; the truth's held steps get their real write time and the fault its record.
        Returns the write's time."""
        assert self.response is not None and self.held
        events, self.held = self.held, None
        now = time.monotonic()
        await self.response.write(b"".join(events))
        rec = self.engine.truth.live(self.req.id)
        if rec is None:
            return now
        for entry in rec["steps"][len(rec["steps"]) - recorded:] if recorded else []:
            # the truth's t_s is when a step's events were written; server_t_s when the server handed them over
            entry["server_t_s"], entry["t_s"] = entry["t_s"], now - self.req.arrival
        rec["faults"].append({"kind": "hold", "at_token": self.req.faults.hold_at, "events": len(events),
                              "held_s": now - self.held_since, "t_s": now - self.req.arrival})
        return now

    def _step_chunk(self, ids: list[int], reasoning: str, content: str, generated: int, first: bool,
                    finish_reason: str | None) -> bytes:
        """vLLM / SGLang: one chunk per engine step carrying all of its tokens."""
        route, o = self.req.route, self.opts
        continuous = o["continuous"] and (o["include_usage"] or self.dialect == "sglang")
        out = b""
        if route == "chat":
            if first:  # the role chunk comes with the first output, carrying no tokens
                role: dict[str, Any] = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                        "finish_reason": None}
                if o["return_ids"]:
                    role["token_ids"] = []
                chunk = {**self._head("chat.completion.chunk"), "choices": [role]}
                if continuous:
                    chunk["usage"] = self._usage(0, "chunk")
                if self.dialect == "vllm":
                    chunk.update(prompt_token_ids=None, prompt_text=None)
                out += self._sse(chunk)
            delta: dict[str, Any] = {}
            if reasoning:
                delta[self.reasoning_key] = reasoning
            if content or not reasoning:
                delta["content"] = content
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            head = self._head("chat.completion.chunk")
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish_reason}
            head = self._head("text_completion")
        chunk = {**head, "choices": [self._choice_fields(choice, ids, "chunk")]}
        if continuous:
            chunk["usage"] = self._usage(generated, "chunk")
        return out + self._sse(chunk)

    def _llamacpp_events(self, ids: list[int], generated: int, first: bool) -> bytes:
        """llama-server: one event per token, so a step's accepted drafts arrive as a burst."""
        out = b""
        route = self.req.route
        if route == "chat" and first:
            out += self._sse({**self._head("chat.completion.chunk"),
                              "choices": [{"finish_reason": None, "index": 0,
                                           "delta": {"role": "assistant", "content": None}}]})
        n = generated - len(ids)
        for token in ids:
            n += 1
            reasoning, content = self._split([token])
            if route == "chat":
                delta = {self.reasoning_key: reasoning} if reasoning else {"content": content}
                ev: dict[str, Any] = {**self._head("chat.completion.chunk"),
                                      "choices": [{"finish_reason": None, "index": 0, "delta": delta}]}
            else:
                ev = {**self._head("text_completion"),
                      "choices": [{"text": content, "index": 0, "logprobs": None, "finish_reason": None}]}
            if self.opts["timings_per_token"]:
                ev["timings"] = self._timings(None, n)
            out += self._sse(ev)
        return out

    async def malformed(self) -> None:
        if self.response is not None:
            await self.response.write(b'data: {"id": "' + self.req.id.encode() + b'", "choices": [{"text": \n\n')

    def abort(self) -> None:
        transport = self.request.transport
        if transport is not None:
            transport.abort()

    async def finish(self, record: dict[str, Any]) -> None:
        if self.held and self.response is not None:  # the request ended before the proxy held all it would
            await self._release(len(self.held))
        if self.pending and self.response is not None:  # steps held back when the request ended early
            ids, self.pending = self.pending, []
            reasoning, content = self._split(ids)
            await self.response.write(self._step_chunk(ids, reasoning, content, len(self.ids), False, None))
        n = len(self.ids)
        reason = record["finish_reason"] or "length"
        if not self.req.stream:
            self.response = web.json_response(self._body(record, reason), headers={"X-Request-Id": self.req.id})
            return
        assert self.response is not None
        o = self.opts
        out = b""
        if self.dialect == "llamacpp":
            timings = self._timings(record, n)
            if self.req.route == "chat":
                final: dict[str, Any] = {**self._head("chat.completion.chunk"),
                                         "choices": [{"finish_reason": reason, "index": 0, "delta": {}}]}
                if o["include_usage"]:
                    out += self._sse(final)
                    final = {**self._head("chat.completion.chunk"), "choices": [], "usage": self._usage(n)}
                final["timings"] = timings  # timings ride on the last event
            else:
                final = {**self._head("text_completion"),
                         "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": reason}],
                         "usage": self._usage(n), "timings": timings}
            out += self._sse(final)
        else:
            obj = "chat.completion.chunk" if self.req.route == "chat" else "text_completion"
            if o["spec_details"]:  # SGLang sends it as an extra chunk with no choices
                out += self._sse({**self._head(obj), "choices": [], "sglext": self._sglext(record, n)})
            if o["include_usage"]:
                final = {**self._head(obj), "choices": [], "usage": self._usage(n, "final")}
                if self.dialect == "vllm":  # per-request metrics ride on this chunk only
                    final["system_fingerprint"] = SYSTEM_FINGERPRINT
                    sd = self._spec_decoding(record)
                    if sd is not None:
                        final["metrics"] = {"speculative_decoding": sd}
                out += self._sse(final)
        out += b"data: [DONE]\n\n"
        await self.response.write(out)
        await self.response.write_eof()

    def _body(self, record: dict[str, Any], reason: str) -> dict[str, Any]:
        n = len(self.ids)
        reasoning, content = "".join(self.reasoning_parts), "".join(self.content_parts)
        if self.req.route == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if self.dialect == "vllm":  # vLLM writes every message field, null when unused
                message.update(refusal=None, annotations=None, audio=None, function_call=None,
                               reasoning=None)
            if reasoning:
                message[self.reasoning_key] = reasoning
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}
            head = self._head("chat.completion")
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": reason}
            head = self._head("text_completion")
        body = {**head, "choices": [self._choice_fields(choice, self.ids)], "usage": self._usage(n)}
        if self.dialect == "vllm":
            body = self._vllm_body(body, record)
        if self.dialect == "llamacpp":
            body["timings"] = self._timings(record, n)
        if self.opts["spec_details"]:
            body["sglext"] = self._sglext(record, n)
        return body

    def _vllm_body(self, body: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """vLLM's non-streamed body: its null-valued top-level fields and ``metrics`` (null unless asked for)."""
        out = {k: body[k] for k in ("id", "object", "created", "model", "choices")}
        out.update(service_tier=None, system_fingerprint=SYSTEM_FINGERPRINT, usage=body["usage"])
        if self.req.route == "chat":
            out.update(prompt_logprobs=None, prompt_token_ids=None, prompt_text=None)
        out.update(kv_transfer_params=None, ec_transfer_params=None)
        sd = self._spec_decoding(record)
        out["metrics"] = None if sd is None else {
            "time_to_first_token_ms": None, "generation_time_ms": None, "queue_time_ms": None, "mean_itl_ms": None,
            "tokens_per_second": None, "speculative_decoding": sd}
        return out
