"""`stream: true` on vllm_model's two routes: vLLM's own stream, relayed as it comes.

    /v1/responses         Responses request -> chat body with `stream: true` -> vLLM's chunks
                          -> Responses events (`ResponseEvents`) as each chunk arrives; the
                          chunks, added up, go through `VllmChat.finish_response` for the final
                          `response.completed` (token ids for training included)
    /v1/chat/completions  vLLM's chunks, relayed unchanged (config applied to the request)

`open_*` returns only once vLLM has sent its first chunk: until then failover may move the
call to another endpoint, and a failure is an ordinary error answer with its status. After it,
a failure ends the stream with an error event: so does vLLM's own error chunk, and a stream that
closes before `[DONE]` (`servers.sse`); cut-off text is never `response.completed`. A client that goes away ends the relay, which
closes the connection to vLLM, which aborts the generation (counted in
`ng_model_aborted_requests_total`).

A stream holds its weight-gate ticket (`versions.WeightVersions`) from before its first chunk to
its last: the final `response.completed` carries `weight_version`, and so does the chat stream's
last chunk (the usage chunk). A stream cut short by an `abort`-mode weight update cannot be
replayed once relayed: it ends with an error event (503, retryable), never as a finished answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from ng_cli.conversion.chunks import ChunkAccumulator
from ng_cli.conversion.overflow import empty_overflow_chat_completion
from ng_cli.conversion.response_events import ResponseEvents
from ng_cli.conversion.to_responses import response_envelope
from ng_cli.conversion.whole_answers import completion_as_chunk
from ng_cli.errors import (
    BadRequestError,
    ContextOverflowError,
    NgError,
    UpstreamHTTPError,
    UpstreamUnavailableError,
)
from ng_cli.model_server.vllm import VllmChat, is_aborted, parse_request, stamp_response
from ng_cli.protocol.responses import ResponsesRequest
from ng_cli.servers.app import status_for
from ng_cli.servers.sse import DONE, encode_event
from ng_cli.tokens.contract import extract_token_info, needs_prompt_tokenization
from ng_cli.upstream.versions import Ticket

__all__ = ["VllmStreams"]

_STREAM = {"stream": True, "stream_options": {"include_usage": True}}


@dataclass(frozen=True)
class _Opened:
    """One streamed call under way: its stack (the version ticket and the stream), the chat body
    as sent (salted for its version) and vLLM's chunks."""

    stack: AsyncExitStack
    ticket: Ticket
    chat: dict[str, Any]
    chunks: AsyncIterator[dict[str, Any]]


class VllmStreams:
    """The streaming half of `VllmChat`'s routes."""

    def __init__(self, vllm: VllmChat) -> None:
        self.vllm = vllm

    async def open_responses(self, body: dict[str, Any], *, session_id: str | None) -> AsyncIterator[bytes]:
        """The SSE bytes of one streamed Response, once vLLM has started answering."""
        if self.vllm.token_exact is not None:
            # The token-exact path parses the whole generation itself; a replay would not be a stream.
            raise BadRequestError(
                "stream: true is not served with token_exact on (its prompt is spliced token ids "
                "and its output is parsed whole)",
                param="stream",
                hint="send stream: false, or set token_exact: false on this model server",
            )
        request = parse_request(body)
        chat = {**self.vllm.responses_chat(request.model_copy(update={"stream": None})), **_STREAM}
        events = ResponseEvents(
            response_envelope(request, model=self.vllm.config.model, output=[]),
            splits_think_tags=self.vllm.config.uses_reasoning_parser,
        )
        try:
            opened = await self._open(chat, session_id=session_id)
        except ContextOverflowError as error:
            if self.vllm.config.propagate_context_overflow_errors:
                raise
            return self._replayed(events, self.vllm.overflow_response(request, error))
        return self._relayed(opened, events, request, session_id)

    async def _open(self, chat: dict[str, Any], *, session_id: str | None) -> _Opened:
        """The call's version ticket and vLLM's chunk stream, both held open by the returned stack;
        on any failure (a ContextOverflowError included) the stack is closed and the error raised."""
        stack = AsyncExitStack()
        try:
            ticket = await stack.enter_async_context(self.vllm.versions.call())
            chat = self.vllm.salted(chat, ticket)
            sent = self.vllm.with_conversation_id(chat, session_id)
            chunks = await stack.enter_async_context(
                self.vllm.client.stream("/chat/completions", sent, session_id=session_id)
            )
        except BaseException:
            await stack.aclose()
            raise
        return _Opened(stack=stack, ticket=ticket, chat=chat, chunks=chunks)

    async def _replayed(self, events: ResponseEvents, final: dict[str, Any]) -> AsyncIterator[bytes]:
        """A Response known in full (the overflow answer) as a stream of events."""
        for event in [*events.opening(), *events.closing(final)]:
            yield encode_event(event, event=event["type"])

    async def _relayed(
        self, opened: _Opened, events: ResponseEvents, request: ResponsesRequest, session_id: str | None
    ) -> AsyncIterator[bytes]:
        chunks, chat, ticket = opened.chunks, opened.chat, opened.ticket
        async with opened.stack, self._counting_aborts():
            for event in events.opening():
                yield encode_event(event, event=event["type"])
            total = ChunkAccumulator()
            try:
                async for chunk in chunks:
                    _refuse_error_chunk(chunk)
                    for event in events.on_delta(total.add(chunk)):
                        yield encode_event(event, event=event["type"])
                completion = total.completion()
                _refuse_aborted(completion)
                stamp = ticket.stamp()
                final = await self.vllm.finish_response(completion, request, chat, session_id=session_id)
                closing = events.closing(stamp_response(final, stamp))
            except NgError as error:
                closing = [events.error(error.message, code=error.error_type, status=status_for(error))]
            for event in closing:
                yield encode_event(event, event=event["type"])

    async def open_chat(self, body: dict[str, Any], *, session_id: str | None) -> AsyncIterator[bytes]:
        """vLLM's chunk stream for one chat body, relayed as SSE, once vLLM has started answering."""
        chat = {**self.vllm.chat_body(body), "stream": True}
        try:
            opened = await self._open(chat, session_id=session_id)
        except ContextOverflowError as error:
            if self.vllm.config.propagate_context_overflow_errors:
                raise
            self.vllm.metrics.context_overflows.inc()
            completion = empty_overflow_chat_completion(model=self.vllm.config.model, message=error.message)
            return _as_one_chunk(completion)
        return self._chat_relayed(opened)

    async def _chat_relayed(self, opened: _Opened) -> AsyncIterator[bytes]:
        chunks, ticket = opened.chunks, opened.ticket
        async with opened.stack, self._counting_aborts():
            total = ChunkAccumulator()
            try:
                async for chunk in chunks:
                    _refuse_error_chunk(chunk)
                    total.add(chunk)
                    if chunk.get("usage") is not None:  # the last chunk (stream_options.include_usage)
                        chunk = {**chunk, "weight_version": ticket.stamp()}
                    yield encode_event(chunk)
                completion = total.completion()
                _refuse_aborted(completion)
                self.vllm.metrics.record_usage(completion.get("usage"))
                if self.vllm.wants_token_ids and not needs_prompt_tokenization(completion):
                    # the contract's checks; a failure is an error event
                    extract_token_info(completion, with_log_probs=self.vllm.wants_log_probs)
            except NgError as error:
                yield encode_event(
                    {"error": {"message": error.message, "type": error.error_type, "code": status_for(error)}}
                )
            yield DONE

    def _counting_aborts(self) -> _AbortCounter:
        return _AbortCounter(self.vllm)


class _AbortCounter:
    """Counts a relay ended by its client (cancelled or closed) in `ng_model_aborted_requests_total`."""

    def __init__(self, vllm: VllmChat) -> None:
        self.vllm = vllm

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None and issubclass(kind, asyncio.CancelledError | GeneratorExit):
            self.vllm.metrics.aborted.inc()


def _refuse_error_chunk(chunk: dict[str, Any]) -> None:
    """vLLM ends a generation that failed mid-stream with an error chunk (then `[DONE]`): the text
    before it is cut off, so it is an error here too, never the start of a finished answer."""
    error = chunk.get("error") if isinstance(chunk.get("error"), dict) else None
    if error is None and chunk.get("object") == "error":  # vLLM before its `{"error": {...}}` envelope
        error = chunk
    if error is None:
        return
    code = error.get("code")
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    raise UpstreamHTTPError(
        f"vLLM failed after it had started streaming: {str(error.get('message'))[:500]}",
        status=status,
        body=str(error)[:2000],
    )


def _refuse_aborted(completion: dict[str, Any]) -> None:
    """A relayed stream that vLLM aborted (a weight update in `abort` mode) is no finished answer."""
    if is_aborted(completion):
        raise UpstreamUnavailableError(
            "the generation was aborted by a weight update (mode abort) after it had started streaming",
            hint="retry the call; it runs under the new weights",
        )


async def _as_one_chunk(completion: dict[str, Any]) -> AsyncIterator[bytes]:
    """A whole chat completion (the overflow answer) as one chunk and `[DONE]`."""
    yield encode_event(completion_as_chunk(completion))
    yield DONE
