"""Chat Completions wire shapes as vLLM accepts and returns them.

Like vLLM's `OpenAIBaseModel`, every shape keeps unknown fields, so vLLM-only request options
(`top_k`, `min_tokens`, `guided_json`, ...) pass through the server's `/v1/chat/completions`
untouched. The response side names vLLM's extensions: `reasoning_content` (vLLM < 0.16) and
`reasoning` (vLLM >= 0.16) on the message, `token_ids` on the choice and `prompt_token_ids` at
the top level (`return_token_ids: true`).

The hot path of `vllm_model` reads vLLM's response as a plain dict (a 4k-token generation has 4k
logprob entries; validating them as models would cost milliseconds): `conversion.to_responses`
validates only the small `message` and `usage` parts with these models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ChatChoice",
    "ChatCompletion",
    "ChatFunction",
    "ChatFunctionCall",
    "ChatLogprob",
    "ChatLogprobs",
    "ChatMessage",
    "ChatMessageParam",
    "ChatRequest",
    "ChatTool",
    "ChatToolCall",
    "ChatUsage",
]


class _ChatWireModel(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------------------------------------
# Request
# ---------------------------------------------------------------------------------------------


class ChatFunctionCall(_ChatWireModel):
    name: str
    arguments: str


class ChatToolCall(_ChatWireModel):
    id: str | None = None
    type: Literal["function"] = "function"
    function: ChatFunctionCall


class ChatMessageParam(_ChatWireModel):
    """One entry of `messages`: content is a string, a list of chat parts, or null."""

    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: str | None = None


class ChatFunction(_ChatWireModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(_ChatWireModel):
    type: Literal["function"] = "function"
    function: ChatFunction


class ChatRequest(_ChatWireModel):
    """`POST /v1/chat/completions` body; vLLM extensions (and `extra_body` keys) ride as extras.

    To forward a parsed request, dump it with `exclude_unset=True`: that keeps explicit nulls
    (an assistant message's `content: null`) that `exclude_none` would drop.
    """

    model: str | None = None
    messages: list[ChatMessageParam]
    tools: list[ChatTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    n: int | None = None
    stream: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------------
# Response
# ---------------------------------------------------------------------------------------------


class ChatMessage(_ChatWireModel):
    """The generated message; vLLM's reasoning parser fills `reasoning_content` or `reasoning`."""

    role: str = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ChatToolCall] = Field(default_factory=list)

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _null_is_none(cls, value: Any) -> Any:
        """OpenAI-compatible servers (and the OpenAI SDK's dumps) send `tool_calls: null`."""
        return [] if value is None else value


class ChatLogprob(_ChatWireModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[dict[str, Any]] = Field(default_factory=list)


class ChatLogprobs(_ChatWireModel):
    content: list[ChatLogprob] | None = None


class ChatChoice(_ChatWireModel):
    index: int = 0
    message: ChatMessage
    finish_reason: str | None = None
    logprobs: ChatLogprobs | None = None
    token_ids: list[int] | None = None


class ChatUsage(_ChatWireModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: dict[str, Any] | None = None


class ChatCompletion(_ChatWireModel):
    id: str | None = None
    object: str = "chat.completion"
    created: int | None = None
    model: str | None = None
    choices: list[ChatChoice]
    usage: ChatUsage | None = None
    prompt_token_ids: list[int] | None = None
