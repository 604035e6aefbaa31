"""Secrets never leave a server: every answer body and every log line is passed through a `Redactor`.

The values come from the server's own config block (its `api_key`, URL passwords). Whatever the
origin of the text (an upstream that echoes our Authorization header in a 401, an exception
message, a metrics label), it is redacted on the way out, so neither the caller, its failure
rows, nor ng_run's log ever sees the key.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ng_cli.config.secrets import Redactor

__all__ = ["RedactingFilter", "RedactingMiddleware", "redact_logging"]


class RedactingMiddleware:
    """Redacts response bodies; a whole body is held back until its last chunk to fix its length."""

    def __init__(self, app: ASGIApp, *, redactor: Redactor) -> None:
        self.app = app
        self.redactor = redactor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.redactor:
            await self.app(scope, receive, send)
            return
        start: Message | None = None

        async def redacting_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            body = self.redactor.bytes(message.get("body", b""))
            if start is not None:
                held, start = start, None
                single = not message.get("more_body", False)
                await send(
                    {**held, "headers": _with_length(held.get("headers", []), len(body) if single else None)}
                )
            await send({**message, "body": body})

        await self.app(scope, receive, redacting_send)


def _with_length(headers: list[tuple[bytes, bytes]], length: int | None) -> list[tuple[bytes, bytes]]:
    """The headers with Content-Length set to the redacted body's length (dropped when streaming)."""
    kept = [(name, value) for name, value in headers if name.lower() != b"content-length"]
    if length is not None:
        kept.append((b"content-length", str(length).encode()))
    return kept


class RedactingFilter(logging.Filter):
    """Redacts a log record's message and its traceback text before any handler formats it."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redactor.text(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        return True


def redact_logging(redactor: Redactor) -> None:
    """Put a `RedactingFilter` on every handler of the root and uvicorn loggers of this process."""
    if not redactor:
        return
    log_filter = RedactingFilter(redactor)
    for name in (None, "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(log_filter)
