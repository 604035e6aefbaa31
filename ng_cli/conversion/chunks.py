"""vLLM's streamed chat chunks -> the chat completion they add up to, and each chunk's delta.

A streamed answer is converted twice: its deltas become Responses events as they arrive
(`response_events`), and the whole, added up here, goes through `to_response` exactly like a
non-streamed answer, so the final event carries the same items, usage and token ids (vLLM's
`return_token_ids` puts `prompt_token_ids` on the first chunk and `token_ids` on each choice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ng_cli.errors import InvalidOutputError

__all__ = ["ChunkAccumulator", "ChunkDelta", "ToolCallDelta"]


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of one tool call: `index` names the call; id and name come with its first piece."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True)
class ChunkDelta:
    """What one chunk adds to the (single) choice."""

    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()


@dataclass
class _ToolCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAccumulator:
    """Adds up `chat.completion.chunk`s of a one-choice stream (n == 1)."""

    def __init__(self) -> None:
        self.envelope: dict[str, Any] = {}
        self.content: list[str] = []
        self.reasoning: dict[str, list[str]] = {}
        self.tool_calls: dict[int, _ToolCall] = {}
        self.finish_reason: str | None = None
        self.token_ids: list[int] | None = None
        self.logprobs: list[Any] | None = None
        self.prompt_token_ids: list[int] | None = None
        self.usage: dict[str, Any] | None = None

    def add(self, chunk: dict[str, Any]) -> ChunkDelta:
        """Take one chunk in; returns what it added to the message."""
        for key in ("id", "created", "model"):
            if key in chunk and key not in self.envelope:
                self.envelope[key] = chunk[key]
        if isinstance(chunk.get("prompt_token_ids"), list):
            self.prompt_token_ids = chunk["prompt_token_ids"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list) or any(
            not isinstance(c, dict) or c.get("index", 0) != 0 for c in choices
        ):
            raise InvalidOutputError(
                f"vLLM streamed a chunk with choices other than one index-0 choice: {str(choices)[:200]}"
            )
        if not choices:
            return ChunkDelta()  # the usage chunk
        return self._add_choice(choices[0])

    def _add_choice(self, choice: dict[str, Any]) -> ChunkDelta:
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
        # extended in place: a new list per chunk would copy the whole answer at every token
        if isinstance(choice.get("token_ids"), list):
            if self.token_ids is None:
                self.token_ids = []
            self.token_ids.extend(choice["token_ids"])
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(logprobs["content"])
        delta = choice.get("delta") or {}
        content = delta.get("content") or ""
        if content:
            self.content.append(content)
        reasoning = ""
        for name in ("reasoning", "reasoning_content"):  # vLLM >= 0.16 names it `reasoning`
            if delta.get(name):
                reasoning = delta[name]
                self.reasoning.setdefault(name, []).append(reasoning)
        calls = tuple(_tool_call_delta(raw) for raw in delta.get("tool_calls") or [])
        for call in calls:
            known = self.tool_calls.setdefault(call.index, _ToolCall())
            known.id = known.id or call.id
            known.name = known.name or call.name or ""
            known.arguments.append(call.arguments)
        return ChunkDelta(content=content, reasoning=reasoning, tool_calls=calls)

    def completion(self) -> dict[str, Any]:
        """The non-streamed `chat.completion` this stream is equivalent to."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        for name, parts in self.reasoning.items():
            message[name] = "".join(parts)
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.arguments)},
            }
            for _, call in sorted(self.tool_calls.items())
        ]
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        if self.logprobs is not None:
            choice["logprobs"] = {"content": self.logprobs}
        if self.token_ids is not None:
            choice["token_ids"] = self.token_ids
        completion: dict[str, Any] = {**self.envelope, "object": "chat.completion", "choices": [choice]}
        if self.prompt_token_ids is not None:
            completion["prompt_token_ids"] = self.prompt_token_ids
        if self.usage is not None:
            completion["usage"] = self.usage
        return completion


def _tool_call_delta(raw: Any) -> ToolCallDelta:
    if not isinstance(raw, dict) or not isinstance(raw.get("index", 0), int):
        raise InvalidOutputError(
            f"vLLM streamed a tool call delta that is not an object with an index: {raw!r:.200}"
        )
    function = raw.get("function") or {}
    return ToolCallDelta(
        index=raw.get("index", 0),
        id=raw.get("id") or None,
        name=function.get("name") or None,
        arguments=function.get("arguments") or "",
    )
