"""The answers every server gives: orjson JSON, server-sent events, and the error envelope with its status.

Apart from `app.py` so that the middlewares `build_app` installs (`body_limit`) can answer with
the same envelope without importing the app that installs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi.responses import Response, StreamingResponse

from ng_cli.errors import (
    ContextOverflowError,
    InvalidOutputError,
    NgError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)

__all__ = ["JSONResponse", "error_response", "event_stream", "status_for"]


class JSONResponse(Response):
    """orjson-encoded JSON; the fastest correct encoder we have for large rollout bodies."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def event_stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    """The answer that relays server-sent events as they are produced (proxies told not to buffer)."""
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


def status_for(error: NgError) -> int:
    """The HTTP status a server answers with when one of our errors escapes a handler."""
    if isinstance(error, ContextOverflowError):
        return 400
    if isinstance(error, UpstreamHTTPError):
        return error.status if 400 <= error.status < 500 else 502
    if isinstance(error, UpstreamTimeoutError):
        return 504
    if isinstance(error, UpstreamUnavailableError):
        return 503
    if isinstance(error, InvalidOutputError):
        return 502
    return error.http_status


def error_response(
    status: int,
    message: str,
    *,
    server: str,
    type_: str,
    hint: str | None = None,
    param: str | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    """The OpenAI-style error envelope, plus the name of the server that produced it."""
    error: dict[str, Any] = {
        "message": message,
        "type": type_,
        "param": param,
        "code": status,
        "server": server,
    }
    if hint:
        error["hint"] = hint
    error.update(extra or {})
    return JSONResponse({"error": error}, status_code=status)
