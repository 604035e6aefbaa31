"""Tool calls in generated text, parsed as vLLM's tool parsers do (for token-exact generations).

A token-exact prompt goes to vLLM's `/v1/completions`, which parses nothing, so the model server
turns the text into content and tool calls itself. One small interface, `ToolCallParser`, with
one implementation per model family; `hermes` matches vLLM's `Hermes2ProToolParser`
(`vllm/tool_parsers/hermes_tool_parser.py`), checked against it over real generations in
tests/engine/test_token_exact.py:
- no `<tool_call>` in the text: all of it is content, no calls;
- else every `<tool_call>...</tool_call>` (or a last unclosed `<tool_call>...`) is one JSON
  object `{"name", "arguments"}`; arguments are re-serialised with `json.dumps(...,
  ensure_ascii=False)`; the content is the text before the first `<tool_call>` (None if empty);
- any call that is not such JSON: no calls, and the whole text is content (as vLLM does).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["TOOL_CALL_PARSERS", "HermesToolCallParser", "ParsedCall", "ParsedOutput", "ToolCallParser"]


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call: the function name and its arguments as JSON text."""

    name: str
    arguments: str
    call_id: str = field(default_factory=lambda: f"chatcmpl-tool-{uuid.uuid4().hex}")

    def as_chat(self) -> dict[str, Any]:
        """The call as a chat message's `tool_calls` entry."""
        return {
            "id": self.call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """Generated text split into what the user sees and the tool calls."""

    content: str | None
    tool_calls: list[ParsedCall]


class ToolCallParser(Protocol):
    """Split generated text into content and tool calls (one implementation per model family)."""

    def parse(self, text: str) -> ParsedOutput: ...


class HermesToolCallParser:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes, Qwen2.5, Qwen3)."""

    start = "<tool_call>"
    _calls = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)

    def parse(self, text: str) -> ParsedOutput:
        if self.start not in text:
            return ParsedOutput(text, [])
        try:
            calls = [_call(json.loads(closed or unclosed)) for closed, unclosed in self._calls.findall(text)]
        except (ValueError, TypeError, KeyError):
            return ParsedOutput(text, [])
        content = text[: text.find(self.start)]
        return ParsedOutput(content or None, calls)


def _call(value: Any) -> ParsedCall:
    """vLLM reads `["name"]` and `["arguments"]` of the object; anything else fails the parse."""
    if not isinstance(value, dict):
        raise TypeError("a tool call must be a JSON object")
    name = value["name"]
    if not isinstance(name, str):
        raise TypeError("a tool call's name must be a string")
    return ParsedCall(name, json.dumps(value["arguments"], ensure_ascii=False))


TOOL_CALL_PARSERS: dict[str, ToolCallParser] = {"hermes": HermesToolCallParser()}
"""Parser per `tool_call_parser` config value (vLLM's `--tool-call-parser` names)."""
