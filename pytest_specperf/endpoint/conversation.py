"""One multi-turn conversation as plain data: its user messages and how each next turn's request is built.

Below the case kinds, so a worker process (``scale/``) builds a session's turns exactly as the pytest process
does: each turn repeats every earlier message, the model's own answers included, plus this turn's user message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_specperf.endpoint.concurrent import StreamOutcome, StreamRequest
from pytest_specperf.endpoint.sse import Trace

#: Completions has no roles: turns are joined as a plain transcript (the same text every later turn repeats).
_SPEAKERS = {"user": "User", "assistant": "Assistant"}


@dataclass
class Conversation:
    """One session's user messages (one per turn) and the messages sent so far."""

    users: list[str]
    seed: int
    turns: int
    api: str
    tokens: int
    temperature: float
    salt: str | None = None  # the session's own prefix-cache namespace: its turns reuse each other's, no one else's
    messages: list[dict[str, str]] = field(default_factory=list)

    def next_turn(self, turn: int, done: list[StreamOutcome]) -> StreamRequest | None:
        """The request of ``turn``: every earlier message, the last answer, and this turn's user message."""
        if turn >= self.turns:
            return None
        if done:
            trace = done[-1].trace
            if trace is None:
                return None
            self.messages.append({"role": "assistant", "content": answer_text(trace)})
        self.messages.append({"role": "user", "content": self.users[turn]})
        if self.api == "chat":
            return StreamRequest(prompt="", messages=tuple(dict(m) for m in self.messages), max_tokens=self.tokens,
                                 api="chat", seed=self.seed + turn, temperature=self.temperature, salt=self.salt)
        return StreamRequest(prompt=transcript(self.messages), max_tokens=self.tokens, api="completions",
                             seed=self.seed + turn, temperature=self.temperature, salt=self.salt)


def answer_text(trace: Trace) -> str:
    """The answer a later turn repeats as the assistant's message: content only (reasoning is not sent back,
    as chat templates of reasoning models drop it from history)."""
    out = []
    for c in trace.chunks:
        if c.reasoning < c.tokens:  # a chunk with answer tokens; a mixed one keeps its text whole
            out.append(c.text)
    return "".join(out)


def transcript(messages: list[dict[str, str]]) -> str:
    """A conversation as completions text: each turn repeated exactly, so every turn extends the last."""
    # An answer follows "Assistant:" exactly as it was generated (no space added), so the text of a turn
    # starts with the previous turn's prompt and answer, token for token where the tokenizer allows.
    lines = [f"Assistant:{m['content']}" if m["role"] == "assistant" else
             f"{_SPEAKERS.get(m['role'], m['role'])}: {m['content']}" for m in messages]
    return "\n\n".join(lines) + ("" if messages[-1]["role"] == "assistant" else "\n\nAssistant:")
