"""`TokenExactChat`: one model call of `token_exact: true`, answered in vLLM's chat shape.

    chat body (to_chat_request; assistant messages keep their token ids)
      -> build_prompt (ng_cli/tokens/splice.py): the previous turn's ids + the template's tail
      -> POST <base>/completions {"prompt": [ids...], the chat body's sampling fields unchanged}
      -> content and tool calls from our parser (ng_cli/conversion/tool_calls.py)
      -> a chat completion, which `to_response` turns into the same Responses items and token
         fields as the normal path

Stock vLLM accepts a list of ints as a `/v1/completions` prompt; that endpoint renders nothing
and parses nothing, so both happen here. `tool_choice` "required" or a named function is refused:
vLLM forces those with guided JSON that is not the template's tool-call format, so the ids would
not be ones the template could have produced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ng_cli.conversion.tool_calls import ToolCallParser
from ng_cli.errors import BadRequestError, InvalidOutputError
from ng_cli.tokens.chat_template import ChatTokenizer
from ng_cli.tokens.contract import TokenContractError
from ng_cli.tokens.splice import PromptTexts, build_prompt
from ng_cli.upstream.client import UpstreamClient

__all__ = ["TokenExactChat", "completion_body", "to_chat_completion"]

# Chat request fields with no /v1/completions meaning: rendering inputs (used here) and the chat
# form of the token-id switches (replaced by the completions form below).
_CHAT_ONLY = frozenset(
    {
        "messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template", "chat_template_kwargs",
        "add_generation_prompt", "continue_final_message", "documents", "logprobs", "top_logprobs",
        "max_completion_tokens", "reasoning_effort", "include_reasoning", "return_tokens_as_token_ids",
        "return_token_ids",
    }
)  # fmt: skip


class TokenExactChat:
    """Token prompts for one model server: its tokenizer, tool-call parser and upstream client."""

    def __init__(self, tokenizer: ChatTokenizer, parser: ToolCallParser, client: UpstreamClient) -> None:
        self.tokenizer = tokenizer
        self.parser = parser
        self.client = client
        self.texts = PromptTexts()

    async def complete(self, chat: dict[str, Any], *, session_id: str | None) -> dict[str, Any]:
        """vLLM's answer to `chat`, generated from a spliced token prompt, as a chat completion."""
        parses_tools = _parses_tools(chat)
        prompt = build_prompt(
            self.tokenizer,
            chat["messages"],
            tools=chat.get("tools"),
            template_kwargs=chat.get("chat_template_kwargs"),
            texts=self.texts,
        )
        body = completion_body(chat, prompt.token_ids, keeps_special_tokens=parses_tools)
        answer = await self.client.post("/completions", body, session_id=session_id)
        if not isinstance(answer, dict):
            raise InvalidOutputError(
                f"vLLM's /completions answered with {type(answer).__name__}, not an object"
            )
        return to_chat_completion(
            answer, prompt_token_ids=prompt.token_ids, parser=self.parser if parses_tools else None
        )


def _parses_tools(chat: Mapping[str, Any]) -> bool:
    """vLLM parses tool calls when tools are given and tool_choice is auto; refuse what it forces."""
    choice = chat.get("tool_choice")
    if choice == "required" or isinstance(choice, Mapping):
        raise BadRequestError(
            f"tool_choice {choice!r} is not supported with token_exact: vLLM forces it with guided JSON, "
            "not the chat template's tool-call format",
            hint='use tool_choice "auto" (or a structured_outputs grammar of the tool-call format)',
        )
    return bool(chat.get("tools")) and choice in (None, "auto")


def completion_body(
    chat: Mapping[str, Any], prompt: list[int], *, keeps_special_tokens: bool
) -> dict[str, Any]:
    """The `/v1/completions` body: the chat body's other fields unchanged, the prompt as ids."""
    body = {key: value for key, value in chat.items() if key not in _CHAT_ONLY}
    body["prompt"] = prompt
    # Chat leaves max_tokens unset for "the rest of the context"; completions' default is 16.
    body["max_tokens"] = chat.get("max_tokens", chat.get("max_completion_tokens"))
    body["logprobs"] = 0
    body["return_token_ids"] = True
    body["return_tokens_as_token_ids"] = True
    if keeps_special_tokens:  # vLLM's hermes parser turns skip_special_tokens off the same way
        body["skip_special_tokens"] = False
    return body


def to_chat_completion(
    answer: Mapping[str, Any], *, prompt_token_ids: list[int], parser: ToolCallParser | None
) -> dict[str, Any]:
    """A `/v1/completions` answer as the chat completion vLLM would have sent for the same output."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], Mapping):
        raise InvalidOutputError(f"vLLM's completion must have exactly one choice, got {str(choices)[:200]}")
    choice = choices[0]
    echoed = choice.get("prompt_token_ids")
    if echoed is not None and echoed != prompt_token_ids:
        raise TokenContractError("vLLM's prompt_token_ids differ from the token prompt sent to it")
    text = choice.get("text")
    if not isinstance(text, str):
        raise InvalidOutputError(f"vLLM's completion choice has no text: {str(choice)[:200]}")
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish_reason = choice.get("finish_reason")
    if parser is not None:
        parsed = parser.parse(text)
        message["content"] = parsed.content
        if parsed.tool_calls:
            message["tool_calls"] = [call.as_chat() for call in parsed.tool_calls]
            finish_reason = "tool_calls"
    chat_choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason,
        "logprobs": {"content": _logprob_entries(choice.get("logprobs"))},
    }
    if choice.get("token_ids") is not None:
        chat_choice["token_ids"] = choice["token_ids"]
    completion: dict[str, Any] = {
        "id": answer.get("id"),
        "object": "chat.completion",
        "model": answer.get("model"),
        "choices": [chat_choice],
        "prompt_token_ids": prompt_token_ids,
    }
    if answer.get("usage") is not None:
        completion["usage"] = answer["usage"]
    return completion


def _logprob_entries(logprobs: Any) -> list[dict[str, Any]]:
    """Completions logprobs (`tokens`, `token_logprobs`) as chat `logprobs.content` entries."""
    if not isinstance(logprobs, Mapping):
        raise TokenContractError("vLLM's completion has no logprobs; the request must set logprobs=0")
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        raise TokenContractError(
            "vLLM's completion logprobs need equal-length tokens and token_logprobs lists"
        )
    return [{"token": token, "logprob": value} for token, value in zip(tokens, values, strict=True)]
