"""Server-sent events: reading an upstream's stream and writing ours, as the OpenAI APIs do.

Chat Completions streams `data: <chunk>` lines ending with `data: [DONE]`; the Responses API
streams `event: <type>` + `data: <event>` pairs ending with a final event (`response.completed`,
`.incomplete`, `.failed`, or `error`). Both are plain SSE, parsed here once.

A stream that just stops (the connection closed cleanly before either end: a proxy that gave up,
a server that died between two chunks) is cut off, not finished: reading it raises at its end,
so no caller can pass cut text on as a complete answer.

Lines are split here, not by aiohttp, whose line reader refuses a line over 512 KiB: vLLM's first
chunk carries the prompt's token ids (about 7 bytes a token, so an 80k-token prompt is a 560 KB
line) and our final Responses event carries them again. A line may be up to `MAX_EVENT_BYTES`;
a longer one is a clear `InvalidOutputError`, never a crash of the reader.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import orjson

from ng_cli.errors import InvalidOutputError, UpstreamUnavailableError

__all__ = [
    "DONE",
    "FINAL_EVENT_TYPES",
    "MAX_EVENT_BYTES",
    "MEDIA_TYPE",
    "encode_event",
    "iter_lines",
    "iter_sse_json",
]

MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"
FINAL_EVENT_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
"""The Responses events a stream ends with; OpenAI sends no `[DONE]` after them."""
MAX_EVENT_BYTES = 64 * 1024 * 1024
"""Longest SSE line read: room for the token ids of a 1M-token prompt (~7 MB) many times over,
and a bound on what one broken upstream can make a reader hold."""


def encode_event(data: Any, *, event: str | None = None) -> bytes:
    """One SSE message: an optional `event:` line and the JSON `data:` line."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


async def iter_lines(
    chunks: AsyncIterable[bytes], *, source: str, max_line_bytes: int = MAX_EVENT_BYTES
) -> AsyncIterator[bytes]:
    """The lines of a byte stream, each with its newline (the last may lack one), however the
    chunks cut them; a long line costs time linear in its length."""
    pending = bytearray()
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if pending:
                pending += chunk[start : end + 1]
                line, pending = bytes(pending), bytearray()
            else:
                line = chunk[start : end + 1]
            _check_length(len(line), source, max_line_bytes)
            yield line
            start = end + 1
        pending += chunk[start:]
        _check_length(len(pending), source, max_line_bytes)
    if pending:
        yield bytes(pending)


def _check_length(size: int, source: str, max_line_bytes: int) -> None:
    if size > max_line_bytes:
        raise InvalidOutputError(
            f"{source} streamed an event line of more than {max_line_bytes} bytes; refused rather "
            "than held in memory"
        )


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
