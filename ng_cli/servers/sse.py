"""Server-sent events: reading an upstream's stream and writing ours, as the OpenAI APIs do.

Chat Completions streams `data: <chunk>` lines ending with `data: [DONE]`; the Responses API
streams `event: <type>` + `data: <event>` pairs. Both are plain SSE, parsed here once.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import orjson

from ng_cli.errors import InvalidOutputError

__all__ = ["DONE", "MEDIA_TYPE", "encode_event", "iter_sse_json"]

MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def encode_event(data: Any, *, event: str | None = None) -> bytes:
    """One SSE message: an optional `event:` line and the JSON `data:` line."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


async def iter_sse_json(lines: AsyncIterable[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an SSE stream's `data:` fields, until `[DONE]` or the end."""
    data: list[bytes] = []
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
        yield _decoded(payload)
    if data and b"\n".join(data) != b"[DONE]":
        yield _decoded(b"\n".join(data))


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
