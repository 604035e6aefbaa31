"""`VllmChat`: what vllm_model does per request — convert, call vLLM, add token ids, map overflow.

    /v1/responses         body -> ResponsesRequest -> to_chat_request -> POST <base>/chat/completions
                          -> (token ids: POST <root>/tokenize when vLLM sent no prompt ids)
                          -> to_response
    /v1/chat/completions  body + config (model, extra_body, chat_template_kwargs, token-id
                          switches) -> POST <base>/chat/completions -> vLLM's answer

With `token_exact`, /v1/responses sends the chat body's prompt as spliced token ids to
`<base>/completions` instead (`token_exact.TokenExactChat`); the rest is the same.

Every call passes the weight gate (`versions.WeightVersions`): it waits while an update holds
admission, and its answer carries `weight_version: {start, end, call}` (the Response and its last
output item; a chat completion at its top level). With weight updates on, the call is salted by
the version it starts under (`cache_salt`), so no prefix computed under other weights is reused,
and a call that an `abort`-mode update cut short (`finish_reason: abort`) is sent again.

A context overflow (vLLM's 400 "maximum context length ...") becomes the seed's empty answer,
marked incomplete and counted in `ng_model_context_overflows_total`. Every other error keeps
its type and travels to the error handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from ng_cli.conversion import (
    empty_overflow_chat_completion,
    empty_overflow_response,
    to_chat_request,
    to_response,
)
from ng_cli.conversion.continuation import continue_final_message, merge_continued_reasoning
from ng_cli.conversion.to_chat import ReasoningForm, without_hosted_only_tool_fields
from ng_cli.errors import BadRequestError, ContextOverflowError, InvalidOutputError, UpstreamUnavailableError
from ng_cli.model_server.token_exact import TokenExactChat
from ng_cli.protocol.responses import ResponsesRequest
from ng_cli.tokens.contract import TokenContractError, extract_token_info, needs_prompt_tokenization
from ng_cli.upstream.client import UpstreamClient
from ng_cli.upstream.config import VllmModelConfig
from ng_cli.upstream.metrics import UpstreamMetrics
from ng_cli.upstream.versions import Ticket, WeightVersions

__all__ = ["ABORT_RETRIES", "VllmChat", "is_aborted", "parse_request", "stamp_response"]

ABORT_RETRIES = 3
"""Times a call cut short by `abort`-mode updates is sent again before it fails (503, retryable)."""

_LOG = logging.getLogger(__name__)
_TOKEN_ID_SWITCHES = {
    "logprobs": True,
    "top_logprobs": 0,
    "return_token_ids": True,
    "return_tokens_as_token_ids": True,
}
# Chat request fields that change how vLLM renders the prompt; /tokenize must see the same.
_RENDERING_FIELDS = (
    "tools",
    "chat_template",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "documents",
    "mm_processor_kwargs",
)


class VllmChat:
    """The two routes of vllm_model over an `UpstreamClient`."""

    def __init__(
        self,
        config: VllmModelConfig,
        client: UpstreamClient,
        metrics: UpstreamMetrics,
        *,
        token_exact: TokenExactChat | None = None,
        versions: WeightVersions | None = None,
        salts_by_version: bool = False,
    ) -> None:
        self.config = config
        self.client = client
        self.metrics = metrics
        self.token_exact = token_exact
        self.versions = versions or WeightVersions()
        self.salts_by_version = salts_by_version
        self.wants_token_ids = config.return_token_id_information
        self.wants_log_probs = config.return_generation_log_probs
        asks_engine = config.request_prompt_and_generation_token_ids
        self.uses_tokenize_only = (
            config.token_id_source == "tokenize" if asks_engine is None else not asks_engine
        )
        self._warned_template_kwargs = False

    async def respond(self, body: dict[str, Any], *, session_id: str | None) -> dict[str, Any]:
        """A Responses API answer for one `POST /v1/responses` body."""
        request = parse_request(body)
        chat = self.responses_chat(request)

        async def generate(salted: dict[str, Any]) -> Any:
            if self.token_exact is not None:
                return await self.token_exact.complete(salted, session_id=session_id)
            sent = self.with_conversation_id(salted, session_id)
            return await self.client.post("/chat/completions", sent, session_id=session_id)

        try:
            completion, stamp, salted = await self.gated(chat, generate)
        except ContextOverflowError as error:
            if self.config.propagate_context_overflow_errors:
                raise
            return self.overflow_response(request, error)
        response = await self.finish_response(completion, request, salted, session_id=session_id)
        return stamp_response(response, stamp)

    def with_conversation_id(self, chat: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        """With `forward_session_id_as_conversation_id`: the session as the engine's conversation id."""
        if not self.config.forward_session_id_as_conversation_id or not session_id:
            return chat
        return {**chat, "conversation_params": {"conversation_id": str(session_id)}}

    def warn_dropped_template_kwargs(self, kwargs: Any) -> None:
        """Log once that a request's own chat_template_kwargs were left out (NeMo Gym does too)."""
        if not kwargs or self.config.forward_request_chat_template_kwargs or self._warned_template_kwargs:
            return
        self._warned_template_kwargs = True
        _LOG.warning(
            "dropping a request's top-level chat_template_kwargs (forward_request_chat_template_kwargs "
            "is false); the configured ones and metadata.chat_template_kwargs still apply. Logged once."
        )

    async def gated(
        self, chat: dict[str, Any], generate: Callable[[dict[str, Any]], Awaitable[Any]]
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """One generation through the weight gate: (completion, its version stamp, the body sent).

        A completion cut short by an `abort`-mode update is generated again, under the new weights."""
        for attempt in range(ABORT_RETRIES + 1):
            async with self.versions.call() as ticket:
                salted = self.salted(chat, ticket)
                completion = _object(await generate(salted))
                stamp = ticket.stamp()
            if not is_aborted(completion):
                return completion, stamp, salted
            if attempt < ABORT_RETRIES:
                self.metrics.retried_after_update.inc()
        raise UpstreamUnavailableError(
            f"the generation was aborted {ABORT_RETRIES + 1} times (finish_reason 'abort': weight updates in abort mode)",
            hint="retry later, or update weights with mode keep",
        )

    def salted(self, chat: dict[str, Any], ticket: Ticket) -> dict[str, Any]:
        """The body with the prefix cache salted by the weight version (when updates are on)."""
        if not self.salts_by_version:
            return chat
        own = chat.get("cache_salt")
        return {**chat, "cache_salt": f"{own}:w{ticket.start}" if own else f"ng-w{ticket.start}"}

    def responses_chat(self, request: ResponsesRequest) -> dict[str, Any]:
        """The chat body vLLM gets for a Responses request (config applied)."""
        config = self.config
        self.warn_dropped_template_kwargs((request.model_extra or {}).get("chat_template_kwargs"))
        chat = to_chat_request(
            request,
            model=config.model,
            wants_token_ids=self.wants_token_ids,
            replace_developer_role_with_system=config.replace_developer_role_with_system,
            chat_template_kwargs=config.chat_template_kwargs,
            extra_body=config.extra_body,
            reasoning_form=_reasoning_form(config),
            reasoning_field=config.reasoning_field,
            keeps_token_ids=self.wants_token_ids,
            forwards_request_chat_template_kwargs=config.forward_request_chat_template_kwargs,
        )
        if config.continue_final_assistant_message:
            chat = continue_final_message(chat)
        if self.uses_tokenize_only:
            chat.pop("return_token_ids", None)
        if self.wants_token_ids and not self.wants_log_probs:
            _drop_log_probs(chat)
        chat.update(config.sampling_overrides or {})
        return chat

    def overflow_response(self, request: ResponsesRequest, error: ContextOverflowError) -> dict[str, Any]:
        """The seed's empty answer to a prompt past the context, marked incomplete and counted."""
        self.metrics.context_overflows.inc()
        return empty_overflow_response(request, model=self.config.model, message=error.message)

    async def finish_response(
        self,
        completion: dict[str, Any],
        request: ResponsesRequest,
        chat: dict[str, Any],
        *,
        session_id: str | None,
    ) -> dict[str, Any]:
        """vLLM's completion (whole, or added up from a stream) as the Response, token ids attached."""
        self.metrics.record_usage(completion.get("usage"))
        if self.config.uses_reasoning_parser:
            completion = merge_continued_reasoning(completion, chat)
        fallback = None
        if self.wants_token_ids and needs_prompt_tokenization(completion):
            fallback = await self._tokenize(chat, completion, session_id=session_id)
        return to_response(
            completion,
            request=request,
            model=self.config.model,
            uses_reasoning_parser=self.config.uses_reasoning_parser,
            wants_token_ids=self.wants_token_ids,
            wants_log_probs=self.wants_log_probs,
            prompt_token_ids_fallback=fallback,
        )

    async def chat(self, body: dict[str, Any], *, session_id: str | None) -> dict[str, Any]:
        """vLLM's answer to one `POST /v1/chat/completions` body, with the config applied."""
        chat = self.chat_body(body)

        async def generate(salted: dict[str, Any]) -> Any:
            sent = self.with_conversation_id(salted, session_id)
            return await self.client.post("/chat/completions", sent, session_id=session_id)

        try:
            completion, stamp, chat = await self.gated(chat, generate)
        except ContextOverflowError as error:
            if self.config.propagate_context_overflow_errors:
                raise
            self.metrics.context_overflows.inc()
            return empty_overflow_chat_completion(model=self.config.model, message=error.message)
        if self.config.uses_reasoning_parser:
            completion = merge_continued_reasoning(completion, chat)
        completion["weight_version"] = stamp
        self.metrics.record_usage(completion.get("usage"))
        if self.wants_token_ids:
            if needs_prompt_tokenization(completion):
                completion["prompt_token_ids"] = await self._tokenize(chat, completion, session_id=session_id)
            # the contract's checks (n == 1, lengths, logprobs); raises
            extract_token_info(completion, with_log_probs=self.wants_log_probs)
        return completion

    def chat_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """Config under the request (the request's own keys win), model and token switches over it;
        the request's own `chat_template_kwargs` only with `forward_request_chat_template_kwargs`."""
        if not isinstance(body.get("messages"), list):
            raise BadRequestError("a chat completion request needs a 'messages' list")
        n = body.get("n")
        if self.wants_token_ids and n not in (None, 1):
            raise BadRequestError(
                f"n={n!r} is not supported with token ids: vLLM must return one choice (n=1)"
            )
        if body.get("stream") and n not in (None, 1):  # the relay adds up one choice
            raise BadRequestError(
                f"n={n!r} is not supported with stream: true: the stream relays one choice",
                param="n",
                hint="send n: 1, or stream: false for several choices",
            )
        own = body.get("chat_template_kwargs")  # a request's own: forwarded only when configured
        self.warn_dropped_template_kwargs(own)
        forwarded = own if self.config.forward_request_chat_template_kwargs and isinstance(own, dict) else {}
        rest = {key: value for key, value in body.items() if key != "chat_template_kwargs"}
        chat = {**(self.config.extra_body or {}), **rest, "model": self.config.model}
        if "tools" in chat:  # as for /v1/responses, and as NeMo Gym's chat route does
            chat["tools"] = without_hosted_only_tool_fields(chat["tools"])
        template_kwargs = {**(self.config.chat_template_kwargs or {}), **forwarded}
        if template_kwargs:
            chat["chat_template_kwargs"] = template_kwargs
        if self.config.continue_final_assistant_message:
            chat = continue_final_message(chat)
        if self.wants_token_ids:
            chat.update(_TOKEN_ID_SWITCHES)
            if self.uses_tokenize_only:
                del chat["return_token_ids"]
            if not self.wants_log_probs:
                _drop_log_probs(chat)
        chat.update(self.config.sampling_overrides or {})  # the server, not the caller, decides
        return chat

    async def _tokenize(
        self, chat: dict[str, Any], completion: dict[str, Any], *, session_id: str | None
    ) -> list[int]:
        """Prompt ids from vLLM's `POST /tokenize` (server root), rendered exactly like the chat call."""
        payload: dict[str, Any] = {"model": chat["model"], "messages": chat["messages"]}
        payload.update((key, chat[key]) for key in _RENDERING_FIELDS if key in chat)
        answer = _object(await self.client.post("/tokenize", payload, session_id=session_id, at_root=True))
        tokens = answer.get("tokens")
        if not isinstance(tokens, list):
            raise InvalidOutputError(
                f"vLLM's /tokenize answered without a 'tokens' list: {str(answer)[:200]}"
            )
        usage = completion.get("usage")
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if isinstance(prompt_tokens, int) and prompt_tokens != len(tokens):
            raise TokenContractError(
                f"vLLM's /tokenize gave {len(tokens)} prompt tokens but the chat call used {prompt_tokens}; "
                "the two renderings of the prompt differ",
                hint="use a vLLM that supports return_token_ids (>= 0.10.2) so the ids come from the call itself",
            )
        return tokens


def _drop_log_probs(chat: dict[str, Any]) -> None:
    """Token ids without logprobs (`return_generation_log_probs: false`): vLLM's `return_token_ids`
    alone; `return_tokens_as_token_ids` only shapes the logprobs, so it goes too."""
    for key in ("logprobs", "top_logprobs", "return_tokens_as_token_ids"):
        chat.pop(key, None)


def _reasoning_form(config: VllmModelConfig) -> ReasoningForm:
    """NeMo Gym's rule: with vLLM's reasoning parser, earlier reasoning goes back as message fields
    (or not at all without interleaved reasoning); `<think>` inline only when asked for."""
    if not config.uses_reasoning_parser or config.preserve_reasoning_in_assistant_content:
        return "inline"
    return "field" if config.uses_interleaved_reasoning else "drop"


def parse_request(body: dict[str, Any]) -> ResponsesRequest:
    """The body as a ResponsesRequest, or a BadRequestError naming the first problems."""
    try:
        return ResponsesRequest.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise BadRequestError(f"invalid Responses request: {problems}") from None


def stamp_response(response: dict[str, Any], stamp: dict[str, Any]) -> dict[str, Any]:
    """The Response with its weight versions, on itself and on its last output item (which
    travels with the trajectory, as the token ids do)."""
    response["weight_version"] = stamp
    output = response.get("output")
    if isinstance(output, list) and output and isinstance(output[-1], dict):
        output[-1]["weight_version"] = stamp
    return response


def is_aborted(completion: dict[str, Any]) -> bool:
    choices = completion.get("choices")
    return (
        isinstance(choices, list)
        and bool(choices)
        and isinstance(choices[0], dict)
        and choices[0].get("finish_reason") == "abort"
    )


def _object(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise InvalidOutputError(f"vLLM answered with {type(answer).__name__}, not a JSON object")
    return answer
