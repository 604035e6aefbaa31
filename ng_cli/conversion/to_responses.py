"""vLLM chat completion -> Responses API response.

Output items, in this order:
1. reasoning from vLLM's own parser (`reasoning`, or `reasoning_content` before vLLM 0.16),
   only when `uses_reasoning_parser` is true (else ReasoningParserConflictError, per the seed);
2. with `uses_reasoning_parser`, the `<think>` blocks of the content, in order; all reasoning of
   the message is ONE reasoning item with one summary part per block (NeMo Gym's shape), whose
   status is "incomplete" when a block is unclosed (cut by max_tokens);
3. the remaining text as one assistant message, when it is not blank or when nothing else
   was produced (a response always has at least one item);
4. one `function_call` item per tool call (call_id = vLLM's tool call id).

finish_reason "length" makes the response `incomplete` (reason "max_output_tokens"); the item
that was cut (an unclosed reasoning block, else the last item) has status "incomplete". With token ids, the three fields go on the last item.

vLLM's answer is read as a plain dict on the hot path: only `message` and `usage` are validated
with the `ng_cli.protocol.chat` models; the logprobs are checked by `ng_cli.tokens.contract`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from ng_cli.conversion.errors import ReasoningParserConflictError
from ng_cli.conversion.overflow import empty_overflow_response, is_context_overflow
from ng_cli.conversion.reasoning import split_reasoning
from ng_cli.errors import InvalidOutputError
from ng_cli.protocol.chat import ChatCompletion, ChatMessage, ChatToolCall, ChatUsage
from ng_cli.protocol.responses import ResponsesRequest
from ng_cli.tokens.contract import attach_token_info, extract_token_info

__all__ = [
    "empty_overflow_response",
    "is_context_overflow",
    "response_envelope",
    "to_output_items",
    "to_response",
]

_Model = TypeVar("_Model", ChatMessage, ChatUsage)


def to_response(
    completion: Mapping[str, Any] | ChatCompletion,
    *,
    request: ResponsesRequest,
    model: str,
    uses_reasoning_parser: bool,
    wants_token_ids: bool,
    wants_log_probs: bool = True,
    prompt_token_ids_fallback: list[int] | None = None,
) -> dict[str, Any]:
    """Translate vLLM's chat completion into the Response JSON; raises InvalidOutputError.

    `prompt_token_ids_fallback` is the `/tokenize` result, needed only when vLLM does not
    return `prompt_token_ids` (see `ng_cli.tokens.contract.needs_prompt_tokenization`).
    """
    if isinstance(completion, ChatCompletion):
        completion = completion.model_dump(exclude_none=True)
    choice = _single_choice(completion)
    message = _validated(ChatMessage, choice.get("message"), "choices[0].message")
    finish_reason = choice.get("finish_reason")
    output = to_output_items(
        message, finish_reason=finish_reason, uses_reasoning_parser=uses_reasoning_parser
    )
    if wants_token_ids:
        info = extract_token_info(
            completion, prompt_token_ids_fallback=prompt_token_ids_fallback, with_log_probs=wants_log_probs
        )
        attach_token_info(output, info)
    body = response_envelope(request, model=model, output=output)
    if finish_reason == "length":
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    usage = completion.get("usage")
    if usage is not None:
        body["usage"] = _usage(_validated(ChatUsage, usage, "usage"))
    return body


def to_output_items(
    message: ChatMessage, *, finish_reason: str | None, uses_reasoning_parser: bool
) -> list[dict[str, Any]]:
    """The Responses output items of one generated chat message (see the module docstring)."""
    items: list[dict[str, Any]] = []
    parts: list[str] = []
    is_complete = True
    parsed = message.reasoning if message.reasoning is not None else message.reasoning_content
    if parsed:
        if not uses_reasoning_parser:
            raise _reasoning_conflict(message)
        parts.append(parsed)
    text = message.content or ""
    if uses_reasoning_parser:
        blocks, text = split_reasoning(text)
        parts.extend(block.text for block in blocks)
        is_complete = all(block.is_complete for block in blocks)
    if parts:  # one reasoning item, one summary part per block (as NeMo Gym returns it)
        items.append(_reasoning_item(parts, is_complete=is_complete))
    if text.strip() or not (items or message.tool_calls):
        items.append(_message_item(text))
    items.extend(_function_call_item(call) for call in message.tool_calls)
    if finish_reason == "length" and all(item["status"] != "incomplete" for item in items):
        items[-1]["status"] = "incomplete"
    return items


def _reasoning_item(parts: list[str], *, is_complete: bool) -> dict[str, Any]:
    return {
        "id": f"rs_{uuid.uuid4().hex}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text} for text in parts],
        "status": "completed" if is_complete else "incomplete",
    }


def _message_item(text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _function_call_item(call: ChatToolCall) -> dict[str, Any]:
    return {
        "id": f"fc_{uuid.uuid4().hex}",
        "type": "function_call",
        "call_id": call.id or f"call_{uuid.uuid4().hex}",
        "name": call.function.name,
        "arguments": call.function.arguments,
        "status": "completed",
    }


def _reasoning_conflict(message: ChatMessage) -> ReasoningParserConflictError:
    field = "reasoning" if message.reasoning is not None else "reasoning_content"
    return ReasoningParserConflictError(
        f"vLLM returned a {field!r} field, so it runs with --reasoning-parser, but this model "
        "server has uses_reasoning_parser: false; both would parse the same <think> text",
        hint="restart vLLM without --reasoning-parser (and set uses_reasoning_parser: true "
        "if the model writes <think> tags)",
    )


def response_envelope(
    request: ResponsesRequest, *, model: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    """The Response fields that echo the request, as OpenAI does; None-valued echoes are left out."""
    body: dict[str, Any] = {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "output": output,
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "tool_choice": _dumped(request.tool_choice) if request.tool_choice is not None else "auto",
        "tools": [tool.model_dump(exclude_none=True) for tool in request.tools or ()],
    }
    for name in ("instructions", "max_output_tokens", "metadata", "temperature", "top_p"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    for name in ("text", "reasoning"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value.model_dump(exclude_none=True, by_alias=True)
    return body


def _dumped(value: Any) -> Any:
    return value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else value


def _usage(usage: ChatUsage) -> dict[str, Any]:
    details = usage.prompt_tokens_details or {}
    return {
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens or usage.prompt_tokens + usage.completion_tokens,
        "input_tokens_details": {"cached_tokens": details.get("cached_tokens") or 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


def _single_choice(completion: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = completion.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], Mapping):
        shown = f"{len(choices)} choices" if isinstance(choices, list) else f"choices={choices!r}"
        raise InvalidOutputError(f"vLLM's chat completion must have exactly one choice (n=1), got {shown}")
    return choices[0]


def _validated(model_cls: type[_Model], value: Any, where: str) -> _Model:
    try:
        return model_cls.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        raise InvalidOutputError(
            f"vLLM's {where}{'.' + location if location else ''}: {first['msg']} (got {first.get('input')!r:.200})"
        ) from None
