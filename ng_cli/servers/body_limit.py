"""`BodyLimitMiddleware`: a request body larger than `max_request_bytes` is a 413, never buffered.

A declared `Content-Length` over the limit is refused before one byte is read. A chunked body
(or a lying length) is counted as it streams in: the chunk that passes the limit raises
`RequestTooLargeError` from `receive`, inside the handler that reads the body, and the error
handlers answer it in our envelope. Memory holds at most the limit, not the body.

Either way the rest of the body is then read and thrown away (at most `_DRAIN_BYTES`, for at
most `_DRAIN_S`) before the connection closes. Many clients (urllib, httpx, so the `openai`
SDK) write the whole body before they read anything; a server that closes on them with their
bytes unread makes the kernel reset the connection, and they see "connection reset", never the
413. The answer goes out first, whole (its `Content-Length` set), so a client that reads early
(curl) has it at once and its hang-up ends the draining.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ng_cli.config.schema import ServerConfig
from ng_cli.errors import RequestTooLargeError

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "BodyLimitMiddleware"]

DEFAULT_MAX_REQUEST_BYTES = ServerConfig.model_fields["max_request_bytes"].default
"""`ServerConfig.max_request_bytes`'s default, for apps built without a server config (the head)."""

_HINT = "raise max_request_bytes in this server's config block if such bodies are expected"
_DRAIN_BYTES = 1024**3
"""Most of a refused body read and discarded (memory holds one chunk of it at a time)."""
_DRAIN_S = 30.0
"""Longest time spent discarding a refused body: a client that stops sending is not waited on."""


class BodyLimitMiddleware:
    """Refuses (413) request bodies over `max_bytes`, reading them as a stream.

    It must sit outside any middleware that holds a response back until its last chunk (the
    redaction), so that the 413 reaches the client before the draining starts.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, server: str) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(receive, send, f"{declared} bytes declared")
            return
        received = 0
        refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    raise self._error(f"more than {self.max_bytes} bytes sent")
            return message

        async def draining_send(message: Message) -> None:
            if refused:  # the answer to the error raised above: the body's rest is still coming
                await _send_then_drain(message, receive, send)
            else:
                await send(message)

        await self.app(scope, counting_receive, draining_send)

    def _error(self, what: str) -> RequestTooLargeError:
        return RequestTooLargeError(
            f"request body too large: {what}; the limit is max_request_bytes={self.max_bytes}", hint=_HINT
        )

    async def _refuse(self, receive: Receive, send: Send, what: str) -> None:
        from ng_cli.servers.app import error_response  # app.py installs this middleware

        error = self._error(what)
        response = error_response(
            413, error.message, server=self.server, type_=type(error).__name__, hint=error.hint
        )
        start = {"type": "http.response.start", "status": 413, "headers": response.raw_headers}
        await _send_then_drain(start, receive, send)
        await _send_then_drain({"type": "http.response.body", "body": response.body}, receive, send)


async def _send_then_drain(message: Message, receive: Receive, send: Send) -> None:
    """Send one message of a refusal; its last body chunk goes out whole, then the request's
    unread body is discarded, then the answer ends (and, `Connection: close`, the connection)."""
    if message["type"] == "http.response.start":
        headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
        await send({**message, "headers": [*headers, (b"connection", b"close")]})
        return
    if message["type"] != "http.response.body" or message.get("more_body", False):
        await send(message)
        return
    await send({**message, "more_body": True})  # all of it: the client can read the answer now
    await _drain(receive)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _drain(receive: Receive) -> None:
    """Read and discard the rest of the request body, within `_DRAIN_BYTES` and `_DRAIN_S`."""
    drained = 0
    try:
        async with asyncio.timeout(_DRAIN_S):
            while drained <= _DRAIN_BYTES:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return  # all of it read, or the client went away
                drained += len(message.get("body", b""))
    except TimeoutError:
        return


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
