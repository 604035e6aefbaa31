"""One rollout row as the report's browser shows it: a chat, compact and without token id lists.

The row keeps everything the trainer needs (token ids, logprobs), which is most of its bytes;
the browser needs the text, each tool call with its arguments and output, the reward and the
verifier's other fields, and token *counts* per model turn. `compact` keeps just that, and
caps very long texts, so a 100k-rollout report stays a file a browser opens.

Compact form (short keys: it is repeated for every rollout):
    {"in": [item], "out": [item], "tok": [[prompt, generated] | null per model turn],
     "fields": {key: value}, "status": str, "why": str | null, "line": int}
    item: {"k": "msg", "role", "text"} | {"k": "reason", "text"} | {"k": "call", "name", "args", "id"}
          | {"k": "result", "id", "text"} | {"k": "other", "type", "text"};  model items carry "turn".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY

__all__ = ["MAX_TEXT_CHARS", "compact", "first_user_text", "model_turns"]

MAX_TEXT_CHARS = 20_000
_NOT_FIELDS = frozenset({"responses_create_params", "response", "agent_ref", TASK_KEY, ROLLOUT_KEY})
_MAX_FIELD_CHARS = 300


def compact(row: Mapping[str, Any], *, line: int) -> dict[str, Any]:
    """The browser's view of one output row (see the module docstring)."""
    params = row.get("responses_create_params")
    response = row.get("response")
    response = response if isinstance(response, Mapping) else {}
    output = response.get("output")
    out, tokens = _output_items(output if isinstance(output, list) else [])
    details = response.get("incomplete_details")
    return {
        "in": _input_items(params.get("input") if isinstance(params, Mapping) else None),
        "out": out,
        "tok": tokens if any(t is not None for t in tokens) else [],
        "fields": _fields(row),
        "status": str(response.get("status") or "unknown"),
        "why": details.get("reason") if isinstance(details, Mapping) else None,
        "line": line,
    }


def first_user_text(row: Mapping[str, Any]) -> str:
    """The first user message of the row's input (what the task table shows as the prompt)."""
    params = row.get("responses_create_params")
    items = _input_items(params.get("input") if isinstance(params, Mapping) else None)
    return next((item["text"] for item in items if item.get("role") == "user"), "")


def model_turns(output: Any) -> int:
    """Model calls in a trajectory: runs of model items between tool outputs."""
    if not isinstance(output, list):
        return 0
    turns, in_turn = 0, False
    for item in output:
        is_model = not (isinstance(item, Mapping) and item.get("type") == "function_call_output")
        turns += is_model and not in_turn
        in_turn = is_model
    return turns


def _input_items(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"k": "msg", "role": "user", "text": _capped(value)}]
    if not isinstance(value, list):
        return []
    return [_item(item) for item in value if isinstance(item, Mapping)]


def _output_items(output: list[Any]) -> tuple[list[dict[str, Any]], list[list[int] | None]]:
    """Items with their model turn, and [prompt, generated] token counts per turn when present."""
    items: list[dict[str, Any]] = []
    tokens: list[list[int] | None] = []
    in_turn = False
    for raw in output:
        if not isinstance(raw, Mapping):
            continue
        item = _item(raw)
        is_model = item["k"] != "result"
        if is_model and not in_turn:
            tokens.append(None)
        in_turn = is_model
        if is_model:
            item["turn"] = len(tokens) - 1
            counts = _token_counts(raw)
            if counts is not None:
                tokens[-1] = counts
        items.append(item)
    return items, tokens


def _item(raw: Mapping[str, Any]) -> dict[str, Any]:
    kind = raw.get("type")
    if kind == "function_call":
        return {
            "k": "call",
            "name": str(raw.get("name")),
            "args": _capped(_pretty(raw.get("arguments"))),
            "id": raw.get("call_id"),
        }
    if kind == "function_call_output":
        return {"k": "result", "id": raw.get("call_id"), "text": _capped(_pretty(raw.get("output")))}
    if kind == "reasoning":
        parts = raw.get("summary") or raw.get("content") or []
        return {"k": "reason", "text": _capped(_text_of(parts))}
    if kind in (None, "message") and "role" in raw:
        return {"k": "msg", "role": str(raw.get("role")), "text": _capped(_text_of(raw.get("content")))}
    return {"k": "other", "type": str(kind), "text": _capped(orjson.dumps(raw, default=str).decode())}


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text of each part."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    texts = []
    for part in content:
        if isinstance(part, Mapping):
            text = part.get("text", part.get("refusal"))
            texts.append(str(text) if text is not None else f"[{part.get('type', 'part')}]")
        else:
            texts.append(str(part))
    return "\n".join(texts)


def _pretty(value: Any) -> str:
    """JSON text indented for reading; anything that is not JSON as it is."""
    if not isinstance(value, str):
        return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2).decode()
    try:
        return orjson.dumps(orjson.loads(value), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return value


def _token_counts(raw: Mapping[str, Any]) -> list[int] | None:
    prompt, generated = raw.get("prompt_token_ids"), raw.get("generation_token_ids")
    if not isinstance(prompt, list) and not isinstance(generated, list):
        return None
    return [
        len(prompt) if isinstance(prompt, list) else 0,
        len(generated) if isinstance(generated, list) else 0,
    ]


def _fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The reward and every other top-level key: the verifier's numbers and the row's own."""
    fields: dict[str, Any] = {}
    for key, value in row.items():
        if key in _NOT_FIELDS:
            continue
        if value is None or isinstance(value, bool | int | float):
            fields[key] = value
        else:
            text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
            fields[key] = text if len(text) <= _MAX_FIELD_CHARS else text[:_MAX_FIELD_CHARS] + "…"
    return fields


def _capped(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n… ({len(text) - MAX_TEXT_CHARS} more characters in the JSONL row)"
