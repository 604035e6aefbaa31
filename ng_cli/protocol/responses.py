"""OpenAI Responses API wire shapes: the request, its input/output items, and the response.

Inbound shapes keep unknown fields (`extra="allow"`), as vLLM's `OpenAIBaseModel` does, so a
newer client never breaks us. Every item may carry the three token-id fields of the RL contract
(`prompt_token_ids`, `generation_token_ids`, `generation_log_probs`): they travel unchanged from
one turn's output to the next turn's input and are never sent to vLLM as message fields.

Item and content-part unions are discriminated on `type` by a function (not a pydantic tag), so
an item with `role` and no `type` is a message, and an unknown `type` becomes `OtherItem` /
`OtherPart` that the conversion can reject with a precise message instead of a pydantic dump.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, SkipValidation, Tag

__all__ = [
    "ContentPart",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "IncompleteDetails",
    "InputImage",
    "InputItem",
    "InputText",
    "InputTokensDetails",
    "MessageItem",
    "OtherItem",
    "OtherPart",
    "OtherTool",
    "OutputText",
    "OutputTokensDetails",
    "ReasoningConfig",
    "ReasoningItem",
    "ReasoningText",
    "Refusal",
    "Response",
    "ResponseUsage",
    "ResponsesRequest",
    "SummaryText",
    "TextConfig",
    "TextFormat",
    "TokenIdFields",
    "Tool",
    "ToolChoice",
    "ToolChoiceFunction",
    "ToolChoiceOther",
    "WireModel",
    "all_output_text",
    "final_assistant_text",
]


class WireModel(BaseModel):
    """Base of every inbound wire shape: unknown fields are kept, never an error."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


# ---------------------------------------------------------------------------------------------
# Content parts
# ---------------------------------------------------------------------------------------------


class InputText(WireModel):
    type: Literal["input_text"] = "input_text"
    text: str


class OutputText(WireModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)


class InputImage(WireModel):
    type: Literal["input_image"] = "input_image"
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class Refusal(WireModel):
    type: Literal["refusal"] = "refusal"
    refusal: str


class OtherPart(WireModel):
    """A content part of a type this project does not translate (input_file, input_audio, ...)."""

    type: str


_PART_TYPES = frozenset({"input_text", "output_text", "input_image", "refusal"})


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _PART_TYPES else "other"


ContentPart = Annotated[
    Annotated[InputText, Tag("input_text")]
    | Annotated[OutputText, Tag("output_text")]
    | Annotated[InputImage, Tag("input_image")]
    | Annotated[Refusal, Tag("refusal")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]


# ---------------------------------------------------------------------------------------------
# Items (input and output share the same shapes)
# ---------------------------------------------------------------------------------------------


class TokenIdFields(WireModel):
    """The RL token-id contract; see `ng_cli.tokens.contract` and docs/conversion.md.

    Not validated on parse: a long rollout sends back every earlier turn's ids (hundreds of
    thousands of ints), and validating them would cost milliseconds per request for fields the
    chat conversion drops anyway. Code that uses them checks them with
    `ng_cli.tokens.contract.token_info_of(item)`.
    """

    prompt_token_ids: SkipValidation[list[int]] | None = None
    generation_token_ids: SkipValidation[list[int]] | None = None
    generation_log_probs: SkipValidation[list[float]] | None = None


ItemStatus = Literal["in_progress", "completed", "incomplete"]


class MessageItem(TokenIdFields):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    status: ItemStatus | None = None


class SummaryText(WireModel):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningText(WireModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningItem(TokenIdFields):
    type: Literal["reasoning"] = "reasoning"
    id: str | None = None
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


class FunctionCallItem(TokenIdFields):
    type: Literal["function_call"] = "function_call"
    id: str | None = None
    call_id: str
    name: str
    arguments: str
    status: ItemStatus | None = None


class FunctionCallOutputItem(TokenIdFields):
    type: Literal["function_call_output"] = "function_call_output"
    id: str | None = None
    call_id: str
    output: str | list[ContentPart]
    status: ItemStatus | None = None


class OtherItem(TokenIdFields):
    """An item of a type this project does not translate (item_reference, web_search_call, ...)."""

    type: str


_ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "function_call_output"})


def _item_tag(value: Any) -> str:
    if isinstance(value, dict):
        kind = value.get("type")
        if kind is None and "role" in value:
            return "message"
    else:
        kind = getattr(value, "type", None)
    return kind if kind in _ITEM_TYPES else "other"


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[OtherItem, Tag("other")],
    Discriminator(_item_tag),
]
"""Any Responses item; output items use the same shapes (message, reasoning, function_call)."""


# ---------------------------------------------------------------------------------------------
# Tools, tool choice, text/reasoning options
# ---------------------------------------------------------------------------------------------


class FunctionTool(WireModel):
    type: Literal["function"] = "function"
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class OtherTool(WireModel):
    """A hosted tool (web_search, file_search, ...): not available on a self-hosted model."""

    type: str


def _tool_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "function" if kind == "function" else "other"


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")] | Annotated[OtherTool, Tag("other")],
    Discriminator(_tool_tag),
]


class ToolChoiceFunction(WireModel):
    type: Literal["function"] = "function"
    name: str


class ToolChoiceOther(WireModel):
    """allowed_tools, hosted-tool choices, ...: rejected by the conversion."""

    type: str


ToolChoice = Literal["none", "auto", "required"] | ToolChoiceFunction | ToolChoiceOther


class TextFormat(WireModel):
    type: str = "text"
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(WireModel):
    format: TextFormat | None = None
    verbosity: str | None = None


class ReasoningConfig(WireModel):
    effort: str | None = None
    summary: str | None = None


# ---------------------------------------------------------------------------------------------
# Request and response
# ---------------------------------------------------------------------------------------------


class ResponsesRequest(WireModel):
    """`POST /v1/responses` body. Unknown fields are kept and forwarded to vLLM (see to_chat)."""

    input: str | list[InputItem]
    model: str | None = None
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    metadata: dict[str, str] | None = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    seed: int | None = None
    # Known Responses fields that are not forwarded to vLLM (stateless server, no streaming).
    store: bool | None = None
    stream: bool | None = None
    background: bool | None = None
    include: list[str] | None = None
    previous_response_id: str | None = None
    truncation: str | None = None
    user: str | None = None
    top_logprobs: int | None = None
    max_tool_calls: int | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None


class InputTokensDetails(WireModel):
    cached_tokens: int = 0


class OutputTokensDetails(WireModel):
    reasoning_tokens: int = 0


class ResponseUsage(WireModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)


class IncompleteDetails(WireModel):
    """Why `status` is "incomplete": "max_output_tokens", or "context_length_exceeded" (ours)."""

    reason: str
    message: str | None = None


class Response(WireModel):
    """The Responses API result, echoing the request's options as OpenAI does."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    model: str
    status: Literal["completed", "incomplete", "failed", "in_progress"]
    error: dict[str, Any] | None = None
    incomplete_details: IncompleteDetails | None = None
    output: list[InputItem]
    usage: ResponseUsage | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    metadata: dict[str, str] | None = None
    parallel_tool_calls: bool = True
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: ToolChoice = "auto"
    tools: list[Tool] = Field(default_factory=list)
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None


def all_output_text(output: Sequence[Any]) -> str:
    """Every `output_text` part of every message item of `output`, joined without a separator.

    NeMo Gym's verifiers read a response this way (math_with_judge, structured_outputs): earlier
    messages count as much as the last, reasoning and refusals do not count. Raw JSON, as in
    `final_assistant_text`.
    """
    return "".join(
        str(part.get("text", ""))
        for item in output
        if isinstance(item, Mapping) and item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    )


def final_assistant_text(output: Sequence[Any]) -> str:
    """The `output_text` of the last assistant message of a Response's `output` ("" if none).

    Verifiers read the answer from here; it works on the raw JSON, because a verifier must
    score whatever the model produced, including items no model of ours describes.
    """
    for item in reversed(output):
        if not isinstance(item, Mapping) or item.get("type", "message") != "message":
            continue
        if item.get("role", "assistant") != "assistant":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type", "output_text") == "output_text"
            )
        return ""
    return ""
