"""A whole JSON answer -> the events a stream of it would have carried.

Some OpenAI-compatible servers ignore `stream: true` and answer with the whole JSON body. Read
as server-sent events, that body has no `data:` line, so it used to look like an empty (or, once
streams were checked, a cut-off) stream, and a tool call in it was lost. `events_of_whole_answer`
gives the events instead, so every stream reader (vllm_model's relays, openai_model's relay, the
agents' turn relay) takes it as it takes a real stream:

    chat.completion  -> one `chat.completion.chunk` whose delta is the message (tool calls indexed)
    response         -> response.created ... output items ... response.completed (ids kept)
    {"error": ...}   -> itself (every reader already ends on an error event)
"""

from __future__ import annotations

from typing import Any

from ng_cli.conversion.response_events import ResponseEvents
from ng_cli.errors import InvalidOutputError

__all__ = ["completion_as_chunk", "events_of_whole_answer"]


def events_of_whole_answer(answer: Any, *, source: str) -> list[dict[str, Any]]:
    """The stream events `answer` stands for; `source` (the URL) names it in the error."""
    if isinstance(answer, dict) and ("error" in answer or answer.get("object") == "error"):
        return [answer]
    kind = answer.get("object") if isinstance(answer, dict) else type(answer).__name__
    if kind == "chat.completion":
        return [completion_as_chunk(answer)]
    if kind == "response":
        events = ResponseEvents(_skeleton(answer), splits_think_tags=False, response_id=answer.get("id"))
        return [*events.opening(), *events.closing(answer)]
    raise InvalidOutputError(
        f"{source} answered `stream: true` with a whole JSON body that is neither a chat completion "
        f"nor a Response (object {kind!r}), so there is no stream to relay"
    )


def completion_as_chunk(completion: dict[str, Any]) -> dict[str, Any]:
    """A whole `chat.completion` as the one chunk that adds up to it (usage and token ids kept)."""
    return {
        **completion,
        "object": "chat.completion.chunk",
        "choices": [_as_delta_choice(choice) for choice in completion.get("choices") or []],
    }


def _as_delta_choice(choice: dict[str, Any]) -> dict[str, Any]:
    message = dict(choice.get("message") or {})
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        message["tool_calls"] = [
            {**call, "index": index} if isinstance(call, dict) else call for index, call in enumerate(calls)
        ]
    delta_choice = {key: value for key, value in choice.items() if key != "message"}
    return {**delta_choice, "index": choice.get("index", 0), "delta": message}


def _skeleton(response: dict[str, Any]) -> dict[str, Any]:
    """The Response as it was before its output (what `response.created` carries)."""
    return {key: value for key, value in response.items() if key not in ("output", "usage", "status")}
