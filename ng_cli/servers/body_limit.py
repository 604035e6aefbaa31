"""`BodyLimitMiddleware`: a request body larger than `max_request_bytes` is a 413, never buffered.

A declared `Content-Length` over the limit is refused before one byte is read. A chunked body
(or a lying length) is counted as it streams in: the chunk that passes the limit raises
`RequestTooLargeError` from `receive`, inside the handler that reads the body, and the error
handlers answer it in our envelope. Memory holds at most the limit, not the body.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ng_cli.config.schema import ServerConfig
from ng_cli.errors import RequestTooLargeError

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "BodyLimitMiddleware"]

DEFAULT_MAX_REQUEST_BYTES = ServerConfig.model_fields["max_request_bytes"].default
"""`ServerConfig.max_request_bytes`'s default, for apps built without a server config (the head)."""

_HINT = "raise max_request_bytes in this server's config block if such bodies are expected"


class BodyLimitMiddleware:
    """Refuses (413) request bodies over `max_bytes`, reading them as a stream."""

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
            await self._refuse(scope, receive, send, f"{declared} bytes declared")
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._error(f"more than {self.max_bytes} bytes sent")
            return message

        await self.app(scope, counting_receive, send)

    def _error(self, what: str) -> RequestTooLargeError:
        return RequestTooLargeError(
            f"request body too large: {what}; the limit is max_request_bytes={self.max_bytes}", hint=_HINT
        )

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, what: str) -> None:
        from ng_cli.servers.app import error_response  # app.py installs this middleware

        error = self._error(what)
        response = error_response(
            413, error.message, server=self.server, type_=type(error).__name__, hint=error.hint
        )
        response.headers["Connection"] = "close"  # the unread body must not be taken for a request
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
