"""Streamed chat deltas -> the Responses API's server-sent events, in the order OpenAI sends them.

    response.created, response.in_progress
    per item, as it starts:  response.output_item.added
      message:       content_part.added, output_text.delta..., (at the end) output_text.done,
                     content_part.done
      reasoning:     reasoning_summary_part.added, reasoning_summary_text.delta..., (at the end)
                     reasoning_summary_text.done, reasoning_summary_part.done (one part per block)
      function_call: function_call_arguments.delta..., (at the end) function_call_arguments.done
    response.output_item.done per item, then response.completed (or response.incomplete)

The final Response is `to_response` of the whole answer, exactly as without streaming (token ids
included); its items take the ids the stream announced, so the official SDK's stream helper can
match every `done` to its `added`. `<think>` tags are split while streaming when the model
server parses reasoning; a tag cut between two chunks is held back until it is whole.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ng_cli.conversion.chunks import ChunkDelta

__all__ = ["ResponseEvents", "ThinkSplitter", "terminal_event_type"]

Event = dict[str, Any]
_OPEN, _CLOSE = "<think>", "</think>"


def terminal_event_type(status: Any) -> str:
    """The event that ends a stream whose Response has `status`, as OpenAI names it."""
    return {"completed": "response.completed", "failed": "response.failed"}.get(status, "response.incomplete")


class ThinkSplitter:
    """Splits streamed text at `<think>` / `</think>` into (is_reasoning, starts_block, text)."""

    def __init__(self) -> None:
        self.in_think = False
        self.pending = ""

    def feed(self, text: str) -> list[tuple[bool, bool, str]]:
        buffer, self.pending = self.pending + text, ""
        pieces: list[tuple[bool, bool, str]] = []
        starts = False
        while True:
            tag = _CLOSE if self.in_think else _OPEN
            at = buffer.find(tag)
            if at < 0:
                held = next((k for k in range(len(tag) - 1, 0, -1) if buffer.endswith(tag[:k])), 0)
                self.pending = buffer[len(buffer) - held :]
                if buffer[: len(buffer) - held]:
                    pieces.append((self.in_think, starts, buffer[: len(buffer) - held]))
                return pieces
            if buffer[:at]:
                pieces.append((self.in_think, starts, buffer[:at]))
            buffer = buffer[at + len(tag) :]
            self.in_think = not self.in_think
            starts = self.in_think

    def flush(self) -> list[tuple[bool, bool, str]]:
        text, self.pending = self.pending, ""
        return [(self.in_think, False, text)] if text else []


@dataclass
class _Item:
    index: int
    item: dict[str, Any]
    parts: list[list[str]] = field(default_factory=list)
    """Text of each content part (message) or summary part (reasoning)."""


class ResponseEvents:
    """The events of one streamed Response; feed it chunk deltas, then the final Response."""

    def __init__(
        self, skeleton: dict[str, Any], *, splits_think_tags: bool, response_id: str | None = None
    ) -> None:
        self.response_id = response_id or f"resp_{uuid.uuid4().hex}"
        self.skeleton = {**skeleton, "id": self.response_id, "created_at": int(time.time())}
        self.splitter = ThinkSplitter() if splits_think_tags else None
        self.sequence = 0
        self.items: list[_Item] = []
        self.reasoning: _Item | None = None
        self.message: _Item | None = None
        self.pending_space = ""
        self.calls: dict[int, _Item] = {}

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def opening(self) -> list[Event]:
        """`response.created` and `response.in_progress`."""
        response = {**self.skeleton, "status": "in_progress", "output": []}
        return [
            self._event("response.created", response=response),
            self._event("response.in_progress", response=response),
        ]

    def on_delta(self, delta: ChunkDelta) -> list[Event]:
        """The events for what one chunk added."""
        events: list[Event] = []
        if delta.reasoning:
            events += self._reasoning(delta.reasoning, starts_block=False)
        if delta.content:
            pieces = self.splitter.feed(delta.content) if self.splitter else [(False, False, delta.content)]
            events += self._pieces(pieces)
        for call in delta.tool_calls:
            known = self.calls.get(call.index)
            if known is None:
                item = {
                    "id": f"fc_{uuid.uuid4().hex}",
                    "type": "function_call",
                    "call_id": call.id or f"call_{uuid.uuid4().hex}",
                    "name": call.name or "",
                    "arguments": "",
                    "status": "in_progress",
                }
                known = self.calls[call.index] = self._add(item, events)
                known.parts.append([])
            if call.arguments:
                known.parts[0].append(call.arguments)
                events.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        item_id=known.item["id"],
                        output_index=known.index,
                        delta=call.arguments,
                    )
                )
        return events

    def _pieces(self, pieces: list[tuple[bool, bool, str]]) -> list[Event]:
        events: list[Event] = []
        for is_reasoning, starts_block, text in pieces:
            events += self._reasoning(text, starts_block=starts_block) if is_reasoning else self._text(text)
        return events

    def _add(self, item: dict[str, Any], events: list[Event]) -> _Item:
        added = _Item(index=len(self.items), item=item)
        self.items.append(added)
        events.append(self._event("response.output_item.added", output_index=added.index, item=dict(item)))
        return added

    def _reasoning(self, text: str, *, starts_block: bool) -> list[Event]:
        events: list[Event] = []
        if self.reasoning is None:
            item = {
                "id": f"rs_{uuid.uuid4().hex}",
                "type": "reasoning",
                "summary": [],
                "status": "in_progress",
            }
            self.reasoning = self._add(item, events)
        reasoning = self.reasoning
        opens_part = not reasoning.parts or (starts_block and "".join(reasoning.parts[-1]) != "")
        if opens_part:  # a new block gets its own summary part (an empty last one is reused)
            reasoning.parts.append([])
            events.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=reasoning.item["id"],
                    output_index=reasoning.index,
                    summary_index=len(reasoning.parts) - 1,
                    part={"type": "summary_text", "text": ""},
                )
            )
        reasoning.parts[-1].append(text)
        events.append(
            self._event(
                "response.reasoning_summary_text.delta",
                item_id=reasoning.item["id"],
                output_index=reasoning.index,
                summary_index=len(reasoning.parts) - 1,
                delta=text,
            )
        )
        return events

    def _text(self, text: str, *, is_last: bool = False) -> list[Event]:
        events: list[Event] = []
        if self.message is None:
            if not (self.pending_space + text).strip() and not is_last:
                self.pending_space += text  # the final Response drops a blank message: wait and see
                return events
            text, self.pending_space = self.pending_space + text, ""
            item = {
                "id": f"msg_{uuid.uuid4().hex}",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self.message = self._add(item, events)
            self.message.parts.append([])
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=self.message.index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
            )
        self.message.parts[0].append(text)
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=self.message.item["id"],
                output_index=self.message.index,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return events

    def closing(self, final: dict[str, Any]) -> list[Event]:
        """Every item's `done` events and `response.completed` (or `.incomplete`) with `final`,
        whose items get the ids announced while streaming."""
        events = self._pieces(self.splitter.flush()) if self.splitter else []
        if (
            self.message is None
            and self.pending_space
            and any(i.get("type") == "message" for i in final.get("output", []))
        ):
            events += self._text("", is_last=True)  # an all-blank answer is the message after all
        streamed = {
            kind: [i for i in self.items if i.item["type"] == kind]
            for kind in ("reasoning", "message", "function_call")
        }
        output = [dict(item) for item in final.get("output", [])]
        matched: dict[int, dict[str, Any]] = {}
        for item in output:
            same_kind = streamed.get(item.get("type", ""), [])
            if same_kind:
                announced = same_kind.pop(0)
                item["id"] = announced.item["id"]
                if item["type"] == "function_call":
                    item["call_id"] = announced.item["call_id"]
                matched[announced.index] = item
            else:
                matched[self._add({**item, "status": "in_progress"}, events).index] = item
        for each in self.items:
            events += self._done(each, matched.get(each.index))
        body = {**final, "id": self.response_id, "created_at": self.skeleton["created_at"], "output": output}
        kind = terminal_event_type(body.get("status"))
        events.append(self._event(kind, response=body))
        return events

    def _done(self, known: _Item, final: dict[str, Any] | None) -> list[Event]:
        item_id, index, kind = known.item["id"], known.index, known.item["type"]
        texts = ["".join(part) for part in known.parts]
        if final is None:  # streamed, but the final answer has no such item: close it as streamed
            final = dict(known.item, status="completed")
            if kind == "message":
                final["content"] = [
                    {"type": "output_text", "text": texts[0] if texts else "", "annotations": []}
                ]
            elif kind == "reasoning":
                final["summary"] = [{"type": "summary_text", "text": text} for text in texts]
            else:
                final["arguments"] = texts[0] if texts else ""
        events: list[Event] = []
        if kind == "message":
            for position, part in enumerate(final.get("content") or []):
                common = {"item_id": item_id, "output_index": index, "content_index": position}
                events.append(
                    self._event("response.output_text.done", **common, text=part.get("text", ""), logprobs=[])
                )
                events.append(self._event("response.content_part.done", **common, part=part))
        elif kind == "reasoning":
            for position, part in enumerate(final.get("summary") or []):
                common = {"item_id": item_id, "output_index": index, "summary_index": position}
                events.append(
                    self._event("response.reasoning_summary_text.done", **common, text=part.get("text", ""))
                )
                events.append(self._event("response.reasoning_summary_part.done", **common, part=part))
        else:
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    name=final.get("name"),
                    arguments=final.get("arguments", ""),
                )
            )
        events.append(self._event("response.output_item.done", output_index=index, item=final))
        return events

    def error(self, message: str, *, code: str, status: int) -> Event:
        """OpenAI's `error` event, plus the `error` envelope the SDK raises `APIError` from."""
        envelope = {"message": message, "type": code, "code": status}
        return self._event("error", code=code, message=message, param=None, error=envelope)
