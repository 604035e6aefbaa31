"""Responses request -> the JSON body vLLM's `/v1/chat/completions` expects.

Message rules (docs/conversion.md has the full table):
- a string `input` is one user message; `instructions` is a leading system message;
- user/system/developer messages flush the pending assistant message and are appended;
  a content list with exactly one text part becomes a plain string, any other list is kept as
  chat parts (`input_text` -> `text`, `input_image` -> `image_url`);
- assistant text, `reasoning` items and `function_call` items accumulate into ONE assistant
  message; reasoning goes (`reasoning_form`) inline as one `<think>...</think>` per non-empty
  content or summary part before the text, or, as NeMo Gym sends it, the first non-empty part
  alone in the `reasoning_content` / `reasoning` fields that chat templates such as gpt-oss's
  read (vLLM's reasoning parser is on), or is dropped;
- function tools go without `strict` (NeMo Gym's `_strip_hosted_only_tool_fields`): vLLM does
  not enforce it, and chat templates that print a function's unknown keys put it in the prompt;
- `function_call_output` flushes and becomes a `tool` message; flush at the end;
- the token-id fields of items are sent on the assistant message only with `keeps_token_ids`
  (NeMo RL's worker splices the earlier turns' exact tokens from them), never otherwise.

The result is a plain dict because it goes straight to orjson; its keys are the `ChatRequest`
fields (`ng_cli.protocol.chat`).
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from ng_cli.conversion.errors import ConversionError
from ng_cli.conversion.reasoning import wrap_reasoning
from ng_cli.protocol.responses import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    InputImage,
    InputItem,
    InputText,
    MessageItem,
    OutputText,
    ReasoningItem,
    Refusal,
    ResponsesRequest,
    ToolChoiceFunction,
)

__all__ = [
    "METADATA_CHAT_TEMPLATE_KWARGS",
    "METADATA_EXTRA_BODY",
    "ReasoningField",
    "ReasoningForm",
    "to_chat_messages",
    "to_chat_request",
    "without_hosted_only_tool_fields",
]

ReasoningForm = Literal["inline", "field", "drop"]
"""How earlier reasoning goes back to vLLM: `<think>` in content, message fields, or not at all."""
ReasoningField = Literal["both", "reasoning", "reasoning_content"]
"""Which message field(s) carry it in the "field" form: vLLM < 0.16 reads `reasoning_content`."""
_TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")

METADATA_CHAT_TEMPLATE_KWARGS = "chat_template_kwargs"
"""`metadata` key whose value is a JSON object string merged over the configured kwargs."""
METADATA_EXTRA_BODY = "extra_body"
"""`metadata` key whose value is a JSON object string merged over the configured extra_body."""

_RESERVED_KEYS = ("model", "messages")


def to_chat_request(
    request: ResponsesRequest,
    *,
    model: str,
    wants_token_ids: bool,
    replace_developer_role_with_system: bool = False,
    chat_template_kwargs: dict[str, Any] | None = None,
    extra_body: dict[str, Any] | None = None,
    reasoning_form: ReasoningForm = "inline",
    reasoning_field: ReasoningField = "both",
    keeps_token_ids: bool = False,
    forwards_request_chat_template_kwargs: bool = True,
) -> dict[str, Any]:
    """Translate a Responses request into vLLM's chat body; raises ConversionError (HTTP 400).

    Merge order, later wins: converted fields < config `extra_body` < the request's unknown
    top-level fields (what the OpenAI SDK's `extra_body=` produces) < `metadata["extra_body"]`.
    `chat_template_kwargs` are merged key by key: config < body < `metadata["chat_template_kwargs"]`.
    The token-id switches are applied last so nothing can turn them off.

    Earlier reasoning is sent in `reasoning_form` (the model server picks it from its config).
    `forwards_request_chat_template_kwargs` false leaves out the request's own top-level
    `chat_template_kwargs` (NeMo Gym's `forward_request_chat_template_kwargs`).
    """
    _reject_unsupported(request)
    body: dict[str, Any] = {
        "model": model,
        "messages": to_chat_messages(
            request.input,
            instructions=request.instructions,
            replace_developer_role_with_system=replace_developer_role_with_system,
            reasoning_form=reasoning_form,
            reasoning_field=reasoning_field,
            keeps_token_ids=keeps_token_ids,
        ),
    }
    _add_sampling(body, request)
    _add_tools(body, request)
    _add_response_format(body, request)
    metadata = request.metadata or {}
    _merge_extra(body, extra_body, source="config extra_body")
    extras = request.model_extra
    if extras and not forwards_request_chat_template_kwargs:
        extras = {key: value for key, value in extras.items() if key != "chat_template_kwargs"}
    _merge_extra(body, extras, source="request")
    _merge_extra(body, _metadata_object(metadata, METADATA_EXTRA_BODY), source="metadata.extra_body")
    template_kwargs = _merged_template_kwargs(
        chat_template_kwargs, body.get("chat_template_kwargs"), metadata
    )
    if template_kwargs:
        body["chat_template_kwargs"] = template_kwargs
    if wants_token_ids:
        body["logprobs"] = True
        body["top_logprobs"] = 0
        body["return_token_ids"] = True
        body["return_tokens_as_token_ids"] = True
    _check_single_choice(body)
    return body


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------


class _PendingAssistant:
    """Assistant text, reasoning and tool calls waiting to become one assistant message."""

    __slots__ = ("form", "reasoning", "reasoning_field", "text", "token_fields", "tool_calls")

    def __init__(self, form: ReasoningForm, reasoning_field: ReasoningField) -> None:
        self.form = form
        self.reasoning_field = reasoning_field
        self.reasoning: list[str] = []
        self.text: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.token_fields: dict[str, Any] = {}

    def flush_into(self, messages: list[dict[str, Any]]) -> None:
        if not (self.reasoning or self.text or self.tool_calls):
            return
        reasoning = [text for text in self.reasoning if text]  # NeMo Gym drops empty parts
        inline = wrap_reasoning(reasoning) if self.form == "inline" else ""
        message: dict[str, Any] = {"role": "assistant", "content": inline + "".join(self.text)}
        if self.form == "field" and reasoning:
            # NeMo Gym sends the first part only (`reasoning_matches[0]` of vllm_model's
            # `_preprocess_chat_completion_create_params`); the model saw one reasoning block.
            if self.reasoning_field in ("both", "reasoning_content"):
                message["reasoning_content"] = reasoning[0]
            if self.reasoning_field in ("both", "reasoning"):
                message["reasoning"] = reasoning[0]
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        message.update(self.token_fields)
        messages.append(message)
        self.reasoning, self.text, self.tool_calls, self.token_fields = [], [], [], {}


def to_chat_messages(
    items: str | list[InputItem],
    *,
    instructions: str | None = None,
    replace_developer_role_with_system: bool = False,
    reasoning_form: ReasoningForm = "inline",
    reasoning_field: ReasoningField = "both",
    keeps_token_ids: bool = False,
) -> list[dict[str, Any]]:
    """The chat `messages` for a Responses `input` (and `instructions`)."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages
    pending = _PendingAssistant(reasoning_form, reasoning_field)
    for index, item in enumerate(items):
        if keeps_token_ids and not isinstance(item, FunctionCallOutputItem):
            pending.token_fields.update(_token_fields(item))
        if isinstance(item, MessageItem):
            if item.role == "assistant":
                pending.text.append(_assistant_text(item.content, index))
                continue
            pending.flush_into(messages)
            role = item.role
            if role == "developer" and replace_developer_role_with_system:
                role = "system"
            messages.append({"role": role, "content": _chat_content(item.content, index)})
        elif isinstance(item, FunctionCallItem):
            pending.tool_calls.append(
                {
                    "id": item.call_id,
                    "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments},
                }
            )
        elif isinstance(item, ReasoningItem):
            if reasoning_form != "drop":
                pending.reasoning.extend(_reasoning_parts(item))
        elif isinstance(item, FunctionCallOutputItem):
            pending.flush_into(messages)
            output = item.output if isinstance(item.output, str) else _joined_text(item.output, index)
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": output})
        else:
            raise ConversionError(
                f"input[{index}]: item type {item.type!r} is not supported by vllm_model",
                param=f"input[{index}].type",
                hint="send message, reasoning, function_call and function_call_output items only",
            )
    pending.flush_into(messages)
    return messages


def _reasoning_parts(item: ReasoningItem) -> list[str]:
    """The full `content` text when present (one part), else one part per summary part."""
    if item.content:
        return ["".join(part.text for part in item.content)]
    return [part.text for part in item.summary or []]


def _token_fields(item: InputItem) -> dict[str, Any]:
    """The token-id fields an assistant-side item carries (the last such item of a turn wins)."""
    fields = {name: getattr(item, name, None) for name in _TOKEN_FIELDS}
    return {name: value for name, value in fields.items() if value is not None}


def _chat_content(content: str | list[ContentPart], index: int) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if len(content) == 1 and isinstance(content[0], InputText | OutputText):
        return content[0].text
    return [_chat_part(part, index, position) for position, part in enumerate(content)]


def _chat_part(part: ContentPart, index: int, position: int) -> dict[str, Any]:
    if isinstance(part, InputText | OutputText):
        return {"type": "text", "text": part.text}
    if isinstance(part, InputImage) and part.image_url:
        image: dict[str, Any] = {"url": part.image_url}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    raise _unsupported_part(part, index, position)


def _assistant_text(content: str | list[ContentPart], index: int) -> str:
    return content if isinstance(content, str) else _joined_text(content, index)


def _joined_text(parts: list[ContentPart], index: int) -> str:
    """Concatenate text parts (output_text, input_text, refusal); anything else is an error."""
    texts: list[str] = []
    for position, part in enumerate(parts):
        if isinstance(part, InputText | OutputText):
            texts.append(part.text)
        elif isinstance(part, Refusal):
            texts.append(part.refusal)
        else:
            raise _unsupported_part(part, index, position)
    return "".join(texts)


def _unsupported_part(part: ContentPart, index: int, position: int) -> ConversionError:
    return ConversionError(
        f"input[{index}].content[{position}]: content part type {part.type!r} is not supported here",
        param=f"input[{index}].content[{position}].type",
        hint="use input_text/output_text parts (input_image with an image_url in user messages)",
    )


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


def _reject_unsupported(request: ResponsesRequest) -> None:
    if request.stream:
        raise ConversionError("stream=true is not supported by vllm_model", param="stream")
    if request.background:
        raise ConversionError("background=true is not supported by vllm_model", param="background")
    if request.previous_response_id:
        raise ConversionError(
            "previous_response_id is not supported: vllm_model stores no responses",
            param="previous_response_id",
            hint="send the whole conversation in `input`",
        )


def _add_sampling(body: dict[str, Any], request: ResponsesRequest) -> None:
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.seed is not None:
        body["seed"] = request.seed
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.reasoning is not None and request.reasoning.effort is not None:
        body["reasoning_effort"] = request.reasoning.effort


def _add_tools(body: dict[str, Any], request: ResponsesRequest) -> None:
    """Wrap function tools; without tools, tool_choice/parallel_tool_calls are dropped."""
    if not request.tools:
        return
    tools: list[dict[str, Any]] = []
    for index, tool in enumerate(request.tools):
        if not isinstance(tool, FunctionTool):
            raise ConversionError(
                f"tools[{index}]: tool type {tool.type!r} is not supported by vllm_model",
                param=f"tools[{index}].type",
                hint="only function tools can run on a self-hosted model",
            )
        function: dict[str, Any] = {"name": tool.name}
        if tool.description is not None:
            function["description"] = tool.description
        if tool.parameters is not None:
            function["parameters"] = tool.parameters
        tools.append({"type": "function", "function": function})  # never `strict`: see below
    body["tools"] = tools
    if request.tool_choice is not None:
        body["tool_choice"] = _chat_tool_choice(request)
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls


_HOSTED_ONLY_FUNCTION_FIELDS = ("strict",)
"""Function-definition fields only hosted APIs act on. vLLM ignores `strict` (it keeps the key),
and templates that render a function's unknown keys (Nemotron's `render_extra_keys`) print it
into every prompt with tools; NeMo Gym 0.7.0 strips it before vLLM for that reason. `"strict":
true` also cost vLLM 0.26 44% of its tool-chat throughput on an H100 (issue #26)."""


def without_hosted_only_tool_fields(tools: Any) -> Any:
    """`tools` of a chat body with `strict` taken out of every function tool (a copy; other
    values are returned as they are)."""
    if not isinstance(tools, list):
        return tools
    cleaned: list[Any] = []
    for tool in tools:
        if (
            isinstance(tool, dict)
            and tool.get("type") == "function"
            and isinstance(tool.get("function"), dict)
        ):
            function = tool["function"]
            kept = {key: value for key, value in function.items() if key not in _HOSTED_ONLY_FUNCTION_FIELDS}
            tool = {**tool, "function": kept}
        cleaned.append(tool)
    return cleaned


def _chat_tool_choice(request: ResponsesRequest) -> str | dict[str, Any]:
    choice = request.tool_choice
    if isinstance(choice, str):
        return choice
    if isinstance(choice, ToolChoiceFunction):
        names = [tool.name for tool in request.tools or () if isinstance(tool, FunctionTool)]
        if choice.name not in names:
            raise ConversionError(
                f"tool_choice names function {choice.name!r}, which is not in tools {names}",
                param="tool_choice.name",
            )
        return {"type": "function", "function": {"name": choice.name}}
    kind = getattr(choice, "type", None)
    raise ConversionError(
        f"tool_choice of type {kind!r} is not supported by vllm_model",
        param="tool_choice",
        hint='use "auto", "none", "required" or {"type": "function", "name": ...}',
    )


def _add_response_format(body: dict[str, Any], request: ResponsesRequest) -> None:
    """`text.format` -> chat `response_format` (vLLM turns it into structured output)."""
    fmt = request.text.format if request.text is not None else None
    if fmt is None or fmt.type == "text":
        return
    if fmt.type == "json_object":
        body["response_format"] = {"type": "json_object"}
        return
    if fmt.type != "json_schema":
        raise ConversionError(f"text.format type {fmt.type!r} is not supported", param="text.format.type")
    schema: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.json_schema or {}}
    if fmt.description is not None:
        schema["description"] = fmt.description
    if fmt.strict is not None:
        schema["strict"] = fmt.strict
    body["response_format"] = {"type": "json_schema", "json_schema": schema}


# ---------------------------------------------------------------------------------------------
# extra_body, chat_template_kwargs, metadata
# ---------------------------------------------------------------------------------------------


def _metadata_object(metadata: dict[str, str], key: str) -> dict[str, Any] | None:
    """Parse `metadata[key]`, a JSON object in a string (metadata values must be strings)."""
    raw = metadata.get(key)
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConversionError(
            f"metadata.{key} is not valid JSON ({exc}): {raw[:200]!r}",
            param=f"metadata.{key}",
            hint=f'metadata values are strings: send metadata.{key} = \'{{"key": "value"}}\'',
        ) from None
    if not isinstance(value, dict):
        raise ConversionError(
            f"metadata.{key} must be a JSON object, got {type(value).__name__}: {raw[:200]!r}",
            param=f"metadata.{key}",
        )
    return value


def _merge_extra(body: dict[str, Any], extra: dict[str, Any] | None, *, source: str) -> None:
    if not extra:
        return
    for key in _RESERVED_KEYS:
        if key in extra:
            raise ConversionError(f"{source} may not set {key!r}: vllm_model sets it", param=key)
    if extra.get("stream"):
        raise ConversionError(f"{source} sets stream=true, which vllm_model does not support", param="stream")
    body.update(extra)


def _merged_template_kwargs(
    configured: dict[str, Any] | None, from_body: Any, metadata: dict[str, str]
) -> dict[str, Any]:
    merged: dict[str, Any] = dict(configured or {})
    if isinstance(from_body, dict):
        merged.update(from_body)
    per_request = _metadata_object(metadata, METADATA_CHAT_TEMPLATE_KWARGS)
    if per_request:
        merged.update(per_request)
    return merged


def _check_single_choice(body: dict[str, Any]) -> None:
    n = body.get("n")
    if n is not None and n != 1:
        raise ConversionError(
            f"n={n!r} is not supported: vllm_model returns exactly one choice (n=1)",
            param="n",
            hint="send n separate requests instead",
        )
