"""Relay an upstream's event stream unchanged (openai_model's `stream: true`).

The upstream speaks the OpenAI APIs already, so its events go out as they come: Responses
events keep their `event:` line, chat chunks end with `[DONE]`. As with vllm_model, the call
fails over until the first event; after it, a failure ends the stream with an error event, and
a client that goes away closes the upstream connection (counted as aborted).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from ng_cli.errors import NgError
from ng_cli.servers.app import status_for
from ng_cli.servers.sse import DONE, encode_event
from ng_cli.upstream.client import UpstreamClient
from ng_cli.upstream.metrics import UpstreamMetrics

__all__ = ["open_relay"]


async def open_relay(
    client: UpstreamClient,
    metrics: UpstreamMetrics,
    path: str,
    body: dict[str, Any],
    *,
    session_id: str | None,
) -> AsyncIterator[bytes]:
    """The SSE bytes of `POST <path>` with `body`, once the upstream has sent its first event."""
    stack = AsyncExitStack()
    events = await stack.enter_async_context(client.stream(path, body, session_id=session_id))
    return _relayed(stack, events, metrics, is_chat=path.endswith("/chat/completions"))


async def _relayed(
    stack: AsyncExitStack, events: AsyncIterator[dict[str, Any]], metrics: UpstreamMetrics, *, is_chat: bool
) -> AsyncIterator[bytes]:
    sequence = 0
    try:
        async with stack:
            try:
                async for event in events:
                    sequence = int(event.get("sequence_number", sequence)) + 1
                    metrics.record_usage(_usage_of(event))
                    yield encode_event(event, event=None if is_chat else event.get("type"))
            except NgError as error:
                envelope = {"message": error.message, "type": error.error_type, "code": status_for(error)}
                if is_chat:
                    yield encode_event({"error": envelope})
                else:
                    fields = {"code": error.error_type, "message": error.message, "param": None}
                    yield encode_event(
                        {"type": "error", "sequence_number": sequence, **fields, "error": envelope},
                        event="error",
                    )
            if is_chat:
                yield DONE
    except (asyncio.CancelledError, GeneratorExit):
        metrics.aborted.inc()
        raise


def _usage_of(event: dict[str, Any]) -> Any:
    """Usage from a chat chunk, or from a Responses terminal event (in chat's names)."""
    if "usage" in event and event.get("object") == "chat.completion.chunk":
        return event["usage"]
    response = event.get("response")
    usage = (
        response.get("usage")
        if isinstance(response, dict) and event.get("type") == "response.completed"
        else None
    )
    if isinstance(usage, dict):
        return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    return None
