"""Server-sent events: reading an upstream's stream and writing ours, as the OpenAI APIs do.

Chat Completions streams `data: <chunk>` lines ending with `data: [DONE]`; the Responses API
streams `event: <type>` + `data: <event>` pairs ending with a final event (`response.completed`,
`.incomplete`, `.failed`, or `error`). Both are plain SSE, parsed here once.

A stream that just stops (the connection closed cleanly before either end: a proxy that gave up,
a server that died between two chunks) is cut off, not finished: reading it raises at its end,
so no caller can pass cut text on as a complete answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import orjson

from ng_cli.errors import InvalidOutputError, UpstreamUnavailableError

__all__ = ["DONE", "FINAL_EVENT_TYPES", "MEDIA_TYPE", "encode_event", "iter_sse_json"]

MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"
FINAL_EVENT_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
"""The Responses events a stream ends with; OpenAI sends no `[DONE]` after them."""


def encode_event(data: Any, *, event: str | None = None) -> bytes:
    """One SSE message: an optional `event:` line and the JSON `data:` line."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


async def iter_sse_json(lines: AsyncIterable[bytes], *, source: str) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an SSE stream's `data:` fields, until `[DONE]` or a final event.

    A stream that ends before either raises `UpstreamUnavailableError` naming `source` (the URL).
    """
    data: list[bytes] = []
    finished = False
    async for raw in lines:
        line = raw.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
            continue
        if line or not data:
            continue  # `event:`, `id:`, comments; or a blank line with nothing pending
        payload, data = b"\n".join(data), []
        if payload == b"[DONE]":
            return
        event = _decoded(payload)
        finished = event.get("type") in FINAL_EVENT_TYPES
        yield event
    if data:  # the last event had no blank line after it
        payload = b"\n".join(data)
        if payload == b"[DONE]":
            return
        event = _decoded(payload)
        finished = event.get("type") in FINAL_EVENT_TYPES
        yield event
    if not finished:
        raise UpstreamUnavailableError(
            f"{source} ended its event stream before it was complete (no `data: [DONE]` and no final "
            "event): the connection closed mid-answer, so what it sent is cut off",
            endpoint=source,
        )


def _decoded(payload: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise InvalidOutputError(
            f"the upstream streamed an event that is not JSON: {payload[:200]!r}"
        ) from exc
    if not isinstance(value, dict):
        raise InvalidOutputError(f"the upstream streamed {type(value).__name__}, not a JSON object")
    return value
