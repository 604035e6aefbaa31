"""Pieces of a rollout's trajectory that every agent builds the same way: the request's input as
items, a tool's result as a `function_call_output` item, and `usage` summed over the turns."""

from __future__ import annotations

from typing import Any

import orjson

from ng_cli.errors import BadRequestError
from ng_cli.servers.http import PlainText

__all__ = ["add_usage", "function_call_output", "input_items", "user_message"]

_USAGE_COUNTS = ("input_tokens", "output_tokens", "total_tokens")
_USAGE_DETAILS = {"input_tokens_details": "cached_tokens", "output_tokens_details": "reasoning_tokens"}


def user_message(text: str) -> dict[str, Any]:
    """A user message item (what a plain string `input`, or an environment's observation, is)."""
    return {"type": "message", "role": "user", "content": text}


def input_items(value: Any) -> list[Any]:
    """The request's `input` as an item list: a plain string is one user message."""
    if isinstance(value, str):
        return [user_message(value)]
    if isinstance(value, list):
        return list(value)
    raise BadRequestError(
        f"responses_create_params.input must be a string or a list of items, got {_short(value)}"
    )


def function_call_output(call_id: str, result: Any) -> dict[str, Any]:
    """The item that hands a tool's result back to the model: as JSON, or a tool's plain-text
    answer (`PlainText`) as it came."""
    output = str(result) if isinstance(result, PlainText) else orjson.dumps(result).decode()
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def add_usage(total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """Sum of two Responses `usage` objects (token counts and their details)."""
    if not isinstance(usage, dict):
        return total
    summed = {key: (total or {}).get(key, 0) + int(usage.get(key) or 0) for key in _USAGE_COUNTS}
    for details, key in _USAGE_DETAILS.items():
        before = ((total or {}).get(details) or {}).get(key, 0)
        summed[details] = {key: before + int((usage.get(details) or {}).get(key) or 0)}
    return summed


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
