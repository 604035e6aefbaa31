"""An agent's `/v1/responses` with `stream: true`: one Response's events over the whole tool loop.

    response.created, response.in_progress                       (once, for the rollout)
    per model turn: the model server's own item events, relayed as they come, their
                    `output_index` moved past the items already in the trajectory
    per tool call:  output_item.added + output_item.done of its function_call_output
    response.completed (or .incomplete) with the whole trajectory, as `respond` returns it

The loop runs in a task that puts events on a queue, drained into the HTTP answer. A model call
that fails before it relayed anything is retried like an unstreamed one; a failure after that
ends the stream with an error event. A client that goes away cancels the task, and with it the
model or tool call in flight.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from ng_cli.conversion.response_events import terminal_event_type
from ng_cli.errors import NgError, UpstreamHTTPError
from ng_cli.servers.app import status_for
from ng_cli.servers.http import HttpClient, Timeouts
from ng_cli.servers.sse import encode_event

__all__ = ["AgentEvents", "open_agent_stream"]

_TURN_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})
_TURN_END = frozenset({"response.completed", "response.incomplete", "response.failed"})
_END = object()


class AgentEvents:
    """The event sink of one streamed rollout (its own response id and sequence numbers)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.response_id = f"resp_{uuid.uuid4().hex}"
        self.created_at = int(time.time())
        self.sequence = 0
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        skeleton = {key: params[key] for key in ("model", "tools", "instructions") if key in params}
        self.skeleton = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            **skeleton,
        }

    def emit(self, event: dict[str, Any]) -> None:
        self.queue.put_nowait({**event, "sequence_number": self.sequence})
        self.sequence += 1

    def start(self) -> None:
        response = {**self.skeleton, "status": "in_progress", "output": []}
        self.emit({"type": "response.created", "response": response})
        self.emit({"type": "response.in_progress", "response": response})

    def item(self, item: dict[str, Any], *, output_index: int) -> None:
        """An item the agent made (a tool's output): added and done at once."""
        self.emit({"type": "response.output_item.added", "output_index": output_index, "item": item})
        self.emit({"type": "response.output_item.done", "output_index": output_index, "item": item})

    def finish(self, response: dict[str, Any]) -> None:
        final = {**response, "id": self.response_id, "created_at": self.created_at}
        self.emit({"type": terminal_event_type(final.get("status", "completed")), "response": final})

    async def relay_turn(
        self,
        http: HttpClient,
        url: str,
        body: dict[str, Any],
        *,
        cookies: dict[str, str],
        timeouts: Timeouts,
        offset: int,
    ) -> dict[str, Any]:
        """One model call with `stream: true`: its item events relayed, its final Response returned."""
        async with http.stream_json(
            url, {**body, "stream": True}, timeouts=timeouts, headers=_cookie(cookies)
        ) as events:
            async for event in events:
                kind = event.get("type")
                if kind in _TURN_END and isinstance(event.get("response"), dict):
                    return dict(event["response"])
                if kind == "error" or "error" in event:
                    raise UpstreamHTTPError(
                        f"{url} streamed an error: {_message(event)}", status=502, body="", endpoint=url
                    )
                if kind in _TURN_LIFECYCLE:
                    continue
                if "output_index" in event:
                    event = {**event, "output_index": int(event["output_index"]) + offset}
                self.emit({key: value for key, value in event.items() if key != "sequence_number"})
        raise UpstreamHTTPError(
            f"{url} ended its stream without a final response", status=502, body="", endpoint=url
        )


async def open_agent_stream(
    params: dict[str, Any], run: Callable[[AgentEvents], Awaitable[dict[str, Any]]]
) -> AsyncIterator[bytes]:
    """Start `run(events)` (the tool loop) in a task; the SSE bytes of its events."""
    events = AgentEvents(params)
    events.start()

    async def loop() -> None:
        try:
            events.finish(await run(events))
        finally:
            events.queue.put_nowait(_END)

    task = asyncio.create_task(loop())
    return _drained(events, task)


async def _drained(events: AgentEvents, task: asyncio.Task[None]) -> AsyncIterator[bytes]:
    try:
        while (event := await events.queue.get()) is not _END:
            yield encode_event(event, event=event["type"])
        await task
    except NgError as error:
        envelope = {"message": error.message, "type": error.error_type, "code": status_for(error)}
        fields = {"code": error.error_type, "message": error.message, "param": None, "error": envelope}
        yield encode_event({"type": "error", "sequence_number": events.sequence, **fields}, event="error")
    finally:
        if not task.done():
            task.cancel()  # the client went away: stop the model and tool calls in flight


def _cookie(cookies: Mapping[str, str]) -> dict[str, str]:
    return {"Cookie": "; ".join(f"{key}={value}" for key, value in cookies.items())} if cookies else {}


def _message(event: Mapping[str, Any]) -> str:
    error = event.get("error")
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return str(error["message"])
    return str(event.get("message") or event)[:300]
