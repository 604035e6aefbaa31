"""`nemo_gym.openai_utils`: the OpenAI-shaped models NeMo Gym's servers read, as pydantic models.

NeMo Gym subclasses the OpenAI SDK's types; servers only read attributes (`item.type`, `.name`,
`.arguments`, `content[i].text`, `response.output_text`) and dump them. These models give the same
attributes without the SDK: the item types servers inspect are typed, every other item keeps its
fields as attributes (extra="allow"), so nothing a model returned is dropped. Their client for an
endpoint given by URL, `NeMoGymAsyncOpenAI`, is in `openai_client` and exported here as theirs is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from ng_cli.nemo_gym_compat.api.openai_client import (
    RATE_LIMIT_ERROR_CODES,
    RETRY_ERROR_CODES,
    NeMoGymAsyncOpenAI,
    PermanentEndpointError,
)
from ng_cli.nemo_gym_compat.api.server_utils import MAX_NUM_TRIES

__all__ = [
    "MAX_NUM_TRIES",
    "RATE_LIMIT_ERROR_CODES",
    "RETRY_ERROR_CODES",
    "NeMoGymAsyncOpenAI",
    "NeMoGymChatCompletion",
    "NeMoGymChatCompletionCreateParamsNonStreaming",
    "NeMoGymChatCompletionMessage",
    "NeMoGymChoice",
    "NeMoGymEasyInputMessage",
    "NeMoGymFunctionCallOutput",
    "NeMoGymMessage",
    "NeMoGymResponse",
    "NeMoGymResponseCreateParamsNonStreaming",
    "NeMoGymResponseFunctionToolCall",
    "NeMoGymResponseInput",
    "NeMoGymResponseInputItem",
    "NeMoGymResponseInputTokensDetails",
    "NeMoGymResponseOutputItem",
    "NeMoGymResponseOutputMessage",
    "NeMoGymResponseOutputRefusal",
    "NeMoGymResponseOutputText",
    "NeMoGymResponseOutputTokensDetails",
    "NeMoGymResponseReasoningItem",
    "NeMoGymResponseUsage",
    "NeMoGymSummary",
    "PermanentEndpointError",
    "accumulate_response_usage",
]


class _Open(BaseModel):
    """Keeps unknown fields, readable as attributes (the SDK's models do the same)."""

    model_config = ConfigDict(extra="allow")


class NeMoGymSummary(_Open):
    text: str
    type: Literal["summary_text"] = "summary_text"


class NeMoGymResponseReasoningItem(_Open):
    id: str = ""
    summary: list[NeMoGymSummary] = Field(default_factory=list)
    type: Literal["reasoning"] = "reasoning"
    encrypted_content: str | None = None
    content: list[dict[str, Any]] | None = None


class NeMoGymResponseOutputText(_Open):
    annotations: list[Any] = Field(default_factory=list)
    text: str
    type: Literal["output_text"] = "output_text"
    logprobs: list[Any] | None = None


class NeMoGymResponseOutputRefusal(_Open):
    refusal: str
    type: Literal["refusal"] = "refusal"


def _content_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "refusal" if kind == "refusal" else "output_text"


NeMoGymContent = Annotated[
    Annotated[NeMoGymResponseOutputText, Tag("output_text")]
    | Annotated[NeMoGymResponseOutputRefusal, Tag("refusal")],
    Discriminator(_content_tag),
]


class NeMoGymResponseOutputMessage(_Open):
    id: str = ""
    content: list[NeMoGymContent] = Field(default_factory=list)
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    type: Literal["message"] = "message"


class NeMoGymEasyInputMessage(_Open):
    content: str | list[dict[str, Any]]
    role: Literal["user", "assistant", "system", "developer"]
    type: Literal["message"] = "message"


class NeMoGymMessage(_Open):
    content: list[dict[str, Any]]
    role: Literal["user", "system", "developer"]
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    type: Literal["message"] = "message"


class NeMoGymFunctionCallOutput(_Open):
    call_id: str
    output: str | list[dict[str, Any]]
    type: Literal["function_call_output"] = "function_call_output"
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class NeMoGymResponseFunctionToolCall(_Open):
    arguments: str
    call_id: str
    name: str
    type: Literal["function_call"] = "function_call"
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class _OtherItem(_Open):
    """An item type no server here inspects field by field (web search, MCP, computer use ...)."""

    type: str


def _item_tag(value: Any) -> str:
    """Which model an item is: by `type`, and for messages by role and content (as NeMo Gym's)."""
    get = value.get if isinstance(value, dict) else lambda key, default=None: getattr(value, key, default)
    kind = get("type")
    if kind in (None, "message"):
        role = get("role")
        content = get("content")
        if role == "assistant" and isinstance(content, list) and get("id") is not None:
            return "output_message"
        if role == "assistant" and isinstance(content, list) and content:
            first = content[0]
            first_type = first.get("type") if isinstance(first, dict) else getattr(first, "type", None)
            if first_type in ("output_text", "refusal"):
                return "output_message"
        return "easy_message"
    if kind in ("function_call", "function_call_output", "reasoning"):
        return str(kind)
    return "other"


_ITEMS = (
    Annotated[NeMoGymResponseOutputMessage, Tag("output_message")]
    | Annotated[NeMoGymEasyInputMessage, Tag("easy_message")]
    | Annotated[NeMoGymResponseFunctionToolCall, Tag("function_call")]
    | Annotated[NeMoGymFunctionCallOutput, Tag("function_call_output")]
    | Annotated[NeMoGymResponseReasoningItem, Tag("reasoning")]
    | Annotated[_OtherItem, Tag("other")]
)
NeMoGymResponseInputItem = Annotated[_ITEMS, Discriminator(_item_tag)]
NeMoGymResponseOutputItem = Annotated[_ITEMS, Discriminator(_item_tag)]
NeMoGymResponseInput = list[NeMoGymResponseInputItem]
"""A request's input as a list of items (toolsandbox_agent types its transcript with it)."""


class NeMoGymResponseCreateParamsNonStreaming(_Open):
    """A Responses request; `tools` stay dicts (the SDK's are TypedDicts), items are models."""

    input: str | list[NeMoGymResponseInputItem]
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    metadata: dict[str, Any] | None = None
    model: str | None = None
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    temperature: float | None = None
    text: dict[str, Any] | None = None
    tool_choice: Any = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    top_logprobs: int | None = None
    top_p: float | None = None
    truncation: str | None = None
    user: str | None = None
    stream: Literal[False] | None = None


class _IncompleteDetails(_Open):
    """The SDK's `Response.incomplete_details`: servers read `.reason` (`max_output_tokens`: a
    truncated answer, which arena and indirect_prompt_injection score 0)."""

    reason: str | None = None


class NeMoGymResponseInputTokensDetails(_Open):
    cached_tokens: int | None = None


class NeMoGymResponseOutputTokensDetails(_Open):
    reasoning_tokens: int | None = None


class NeMoGymResponseUsage(_Open):
    """NeMo Gym's `ResponseUsage`, read by attribute (speed_bench: `usage.output_tokens`); a count
    a model server left out is None, not a made-up 0 (NeMo Gym requires the three totals)."""

    input_tokens: int | None = None
    input_tokens_details: NeMoGymResponseInputTokensDetails | None = None
    output_tokens: int | None = None
    output_tokens_details: NeMoGymResponseOutputTokensDetails | None = None
    total_tokens: int | None = None

    @classmethod
    def sum_from_list(cls, usages: Iterable[NeMoGymResponseUsage]) -> NeMoGymResponseUsage:
        """The usages added up (NeMo Gym's); an empty list is zero counts, as NeMo Gym starts."""
        zero = cls(
            input_tokens=0,
            input_tokens_details=NeMoGymResponseInputTokensDetails(cached_tokens=0),
            output_tokens=0,
            output_tokens_details=NeMoGymResponseOutputTokensDetails(reasoning_tokens=0),
            total_tokens=0,
        )
        total = zero
        for usage in usages:
            total = accumulate_response_usage(total, usage) or zero
        return total


class _ResponseError(_Open):
    """The SDK's `ResponseError` (`code`, `message`)."""

    code: str | None = None
    message: str | None = None


class NeMoGymResponse(_Open):
    """A Responses API answer; `output_text` joins the text of its assistant messages.

    `id`, `created_at`, `model` and `output` are required, as in the SDK's model: an error body
    parsed as a Response must fail, never read as an empty answer (a judge that failed would
    otherwise score 0 instead of failing the row)."""

    id: str
    created_at: float
    model: str
    object: Literal["response"] = "response"
    output: list[NeMoGymResponseOutputItem]
    parallel_tool_calls: bool = True
    tool_choice: Any = "auto"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    usage: NeMoGymResponseUsage | None = None
    incomplete_details: _IncompleteDetails | None = None
    status: str | None = None
    error: _ResponseError | None = None
    """The SDK's `Response.error` (None unless the model server failed the response):
    structured_outputs reads it to tell an API error from a wrong answer."""

    @property
    def output_text(self) -> str:
        return "".join(
            part.text
            for item in self.output
            if isinstance(item, NeMoGymResponseOutputMessage)
            for part in item.content
            if isinstance(part, NeMoGymResponseOutputText)
        )


class NeMoGymFunction(_Open):
    arguments: str
    name: str


class NeMoGymChatCompletionMessageToolCall(_Open):
    id: str
    function: NeMoGymFunction
    type: Literal["function"] = "function"


class NeMoGymChatCompletionMessage(_Open):
    content: str | None = None
    role: Literal["assistant"] = "assistant"
    tool_calls: list[NeMoGymChatCompletionMessageToolCall] | None = None
    reasoning_content: str | None = None


class NeMoGymChoice(_Open):
    finish_reason: str | None = None
    index: int = 0
    message: NeMoGymChatCompletionMessage
    logprobs: Any = None


class NeMoGymChatCompletion(_Open):
    id: str = ""
    choices: list[NeMoGymChoice]
    created: int = 0
    model: str = ""
    object: Literal["chat.completion"] = "chat.completion"
    usage: dict[str, Any] | None = None


class NeMoGymChatCompletionCreateParamsNonStreaming(_Open):
    """A chat request; messages and tools stay dicts (the SDK's params are TypedDicts)."""

    messages: list[dict[str, Any]]
    model: str | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    stream: Literal[False] | None = None


def _add_counts(left: int | None, right: int | None) -> int | None:
    """A sum of two counts; an unknown count (None) makes the sum unknown, never a made-up 0."""
    return None if left is None or right is None else left + right


def accumulate_response_usage(
    total: NeMoGymResponseUsage | None, additional: NeMoGymResponseUsage | None
) -> NeMoGymResponseUsage | None:
    """`total` plus `additional`, detail counts included (NeMo Gym's, for agents that sum turns)."""
    if additional is None:
        return total
    if total is None:
        return additional.model_copy(deep=True)
    result = total.model_copy(deep=True)
    result.input_tokens = _add_counts(result.input_tokens, additional.input_tokens)
    result.output_tokens = _add_counts(result.output_tokens, additional.output_tokens)
    result.total_tokens = _add_counts(result.total_tokens, additional.total_tokens)
    if result.input_tokens_details is not None and additional.input_tokens_details is not None:
        result.input_tokens_details.cached_tokens = _add_counts(
            result.input_tokens_details.cached_tokens, additional.input_tokens_details.cached_tokens
        )
    if result.output_tokens_details is not None and additional.output_tokens_details is not None:
        result.output_tokens_details.reasoning_tokens = _add_counts(
            result.output_tokens_details.reasoning_tokens, additional.output_tokens_details.reasoning_tokens
        )
    return result
