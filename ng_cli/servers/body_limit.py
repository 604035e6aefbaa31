"""`BodyLimitMiddleware`: request bodies bound in memory, each and all together, never buffered.

One body over `max_request_bytes` is a 413. A declared `Content-Length` over the limit is refused
before one byte is read. A chunked body (or a lying length) is counted as it streams in: the
chunk that passes the limit raises `RequestTooLargeError` from `receive`, inside the handler
that reads the body, and the error handlers answer it in our envelope.

All bodies together stay under `max_request_bytes_in_flight` (`ByteBudget`): a request holds its
declared length (a chunked one: `max_request_bytes`, cut to its size once it is all in) from
before its first byte is read until its answer ends, because its parsed form lives that long.
One that does not fit waits, its body unread in the socket (TCP holds the sender back), until
others finish; after `request_bytes_wait_s` (or the caller's deadline) it is a 503
`ServerBusyError`. Sixteen 31 MB bodies at once took a model server to 2 GB before this.

After a refusal the rest of the body is read and thrown away (at most `_DRAIN_BYTES`, for at
most `_DRAIN_S`) before the connection closes. Many clients (urllib, httpx, so the `openai`
SDK) write the whole body before they read anything; a server that closes on them with their
bytes unread makes the kernel reset the connection, and they see "connection reset", never the
answer. The answer goes out first, whole (its `Content-Length` set), so a client that reads
early (curl) has it at once and its hang-up ends the draining.
"""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ng_cli.config.schema import ServerConfig
from ng_cli.errors import NgError, RequestTooLargeError, ServerBusyError
from ng_cli.servers.answers import error_response
from ng_cli.servers.byte_budget import ByteBudget
from ng_cli.servers.deadline import remaining_s

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT",
    "DEFAULT_REQUEST_BYTES_WAIT_S",
    "BodyLimitMiddleware",
]

logger = logging.getLogger("ng_cli.servers")

DEFAULT_MAX_REQUEST_BYTES = ServerConfig.model_fields["max_request_bytes"].default
"""`ServerConfig.max_request_bytes`'s default, for apps built without a server config (the head)."""
DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT = ServerConfig().request_bytes_in_flight_limit
"""The in-flight total a server config gets by default (8 bodies of the default largest size)."""
DEFAULT_REQUEST_BYTES_WAIT_S = ServerConfig.model_fields["request_bytes_wait_s"].default

_HINT = "raise max_request_bytes in this server's config block if such bodies are expected"
_BUSY_HINT = (
    "retry later, send fewer large requests at once, or raise max_request_bytes_in_flight in this "
    "server's config block (each byte of a body costs about 4 in memory once parsed)"
)
_DRAIN_BYTES = 1024**3
"""Most of a refused body read and discarded (memory holds one chunk of it at a time)."""
_DRAIN_S = 30.0
"""Longest time spent discarding a refused body: a client that stops sending is not waited on."""
_WAIT_WARNING_EVERY_S = 60.0
"""Requests waiting for room are logged at most this often: throttling must not be silent."""


class BodyLimitMiddleware:
    """Refuses (413) request bodies over `max_bytes`, reading them as a stream, and holds every
    body against a `ByteBudget` of `max_bytes_in_flight` (503 after `wait_s` without room).

    It must sit inside `DeadlineMiddleware` (the caller's deadline bounds the wait) and outside
    any middleware that holds a response back until its last chunk (the redaction), so that a
    refusal reaches the client before the draining starts.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        server: str,
        max_bytes_in_flight: int = DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT,
        wait_s: float = DEFAULT_REQUEST_BYTES_WAIT_S,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.server = server
        self.budget = ByteBudget(max(max_bytes_in_flight, max_bytes))
        self.wait_s = wait_s
        self._warned_at = -_WAIT_WARNING_EVERY_S

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(receive, send, self._error(f"{declared} bytes declared"))
            return
        chunked = declared is None and _is_chunked(scope)
        held = self.max_bytes if chunked else declared or 0
        if not await self._admit(held):
            await self._refuse(receive, send, self._busy(held))
            return
        received = 0
        refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused, held
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    raise self._error(f"more than {self.max_bytes} bytes sent")
                if chunked and not message.get("more_body", False):
                    self.budget.release(held - received)  # all of it is in: hold its real size
                    held = received
            return message

        async def draining_send(message: Message) -> None:
            if refused:  # the answer to the error raised above: the body's rest is still coming
                await _send_then_drain(message, receive, send)
            else:
                await send(message)

        try:
            await self.app(scope, counting_receive, draining_send)
        finally:
            self.budget.release(held)

    async def _admit(self, size: int) -> bool:
        """Hold `size` bytes of the budget, waiting for room within `wait_s` and the caller's deadline."""
        left = remaining_s()
        wait_s = self.wait_s if left is None else max(0.0, min(self.wait_s, left))
        if size and self.budget.used + size > self.budget.capacity:
            now = time.monotonic()
            if now - self._warned_at >= _WAIT_WARNING_EVERY_S:
                self._warned_at = now
                logger.warning(
                    "request bodies in flight fill max_request_bytes_in_flight=%d (%d bytes held, "
                    "%d requests waiting): new requests wait up to %g s before they are read",
                    self.budget.capacity,
                    self.budget.used,
                    self.budget.waiting + 1,
                    wait_s,
                )
        return await self.budget.acquire(size, timeout_s=wait_s)

    def _error(self, what: str) -> RequestTooLargeError:
        return RequestTooLargeError(
            f"request body too large: {what}; the limit is max_request_bytes={self.max_bytes}", hint=_HINT
        )

    def _busy(self, size: int) -> ServerBusyError:
        return ServerBusyError(
            f"server busy: the request bodies it is serving hold {self.budget.used} of its "
            f"max_request_bytes_in_flight={self.budget.capacity} bytes, and this request's {size} "
            f"found no room in time (request_bytes_wait_s={self.wait_s:g}, or the caller's deadline)",
            hint=_BUSY_HINT,
        )

    async def _refuse(self, receive: Receive, send: Send, error: NgError) -> None:
        status = error.http_status
        response = error_response(
            status, error.message, server=self.server, type_=error.error_type, hint=error.hint
        )
        headers = response.raw_headers + ([(b"retry-after", b"1")] if status == 503 else [])
        start = {"type": "http.response.start", "status": status, "headers": headers}
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


def _is_chunked(scope: Scope) -> bool:
    return any(
        name == b"transfer-encoding" and b"chunked" in value.lower()
        for name, value in scope.get("headers", ())
    )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
