"""`build_app()`: the FastAPI application every server starts from.

It gives each server the same `/health`, orjson responses, and one mapping from our error types
to HTTP statuses with a JSON body that names the server, so a failure downstream is an answer,
never a hang or an HTML page.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ng_cli.config.secrets import Redactor
from ng_cli.errors import BadRequestError, NgError
from ng_cli.servers.answers import JSONResponse, error_response, event_stream, status_for
from ng_cli.servers.body_limit import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT,
    DEFAULT_REQUEST_BYTES_WAIT_S,
    BodyLimitMiddleware,
)
from ng_cli.servers.deadline import DeadlineMiddleware
from ng_cli.servers.disconnect import CancelOnDisconnectMiddleware
from ng_cli.servers.redaction import RedactingMiddleware

__all__ = ["JSONResponse", "build_app", "error_response", "event_stream", "read_json_object", "status_for"]

logger = logging.getLogger("ng_cli.servers")

_HTTP_ERROR_TYPES = {404: "not_found", 405: "method_not_allowed"}


def build_app(
    name: str,
    *,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_request_bytes_in_flight: int = DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT,
    request_bytes_wait_s: float = DEFAULT_REQUEST_BYTES_WAIT_S,
    redactor: Redactor | None = None,
) -> FastAPI:
    """A FastAPI app with `/health`, orjson responses, our error handlers, bounds on request bodies
    (each and all in flight), and (given a redactor) no secret in any answer."""
    app = FastAPI(
        title=name, default_response_class=JSONResponse, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.server_name = name

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "server": name})

    install_error_handlers(app, name)
    if redactor:
        app.add_middleware(RedactingMiddleware, redactor=redactor)
    # Outside the redaction, which holds an answer back until its end: a 413 or 503 goes out before
    # the refused body is drained (`body_limit`); it quotes sizes only, never a secret. Inside the
    # deadline, which bounds its wait for room.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=max_request_bytes,
        server=name,
        max_bytes_in_flight=max_request_bytes_in_flight,
        wait_s=request_bytes_wait_s,
    )
    app.add_middleware(DeadlineMiddleware)
    app.add_middleware(CancelOnDisconnectMiddleware)  # outermost: a gone client cancels everything inside
    return app


def install_error_handlers(app: FastAPI, name: str) -> None:
    """Map our error types to statuses and bodies; unexpected exceptions become a 500 body."""

    async def on_ng_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, NgError)
        status = status_for(exc)
        if status >= 500:
            logger.warning(
                "%s %s -> %d %s: %s", request.method, request.url.path, status, type(exc).__name__, exc
            )
        return error_response(
            status,
            exc.message,
            server=name,
            type_=exc.error_type,
            hint=exc.hint,
            param=getattr(exc, "param", None),
            extra=exc.envelope_fields(),
        )

    async def on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg')}" for err in exc.errors()
        )
        return error_response(422, f"invalid request body: {problems}", server=name, type_="invalid_request")

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        """Unknown routes (404) and wrong methods (405) in our envelope, not the framework's."""
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path} on this server"
        elif exc.status_code == 405:
            message = f"{request.url.path} does not accept {request.method}"
        else:
            message = str(exc.detail)
        response = error_response(
            exc.status_code, message, server=name, type_=_HTTP_ERROR_TYPES.get(exc.status_code, "http_error")
        )
        response.headers.update(exc.headers or {})
        return response

    app.add_exception_handler(NgError, on_ng_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_middleware(UnexpectedErrorMiddleware, server=name)


class UnexpectedErrorMiddleware:
    """Turns an unexpected exception into the 500 envelope and does NOT re-raise it.

    Starlette's own handler for `Exception` sends the 500 and then re-raises, which makes uvicorn
    drop the connection; a client that pools connections then fails its next request on it.
    """

    def __init__(self, app: ASGIApp, *, server: str) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except asyncio.CancelledError:
            # The client went away (CancelOnDisconnectMiddleware), or uvicorn's graceful-shutdown
            # time is up; one line, not one traceback per in-flight request.
            logger.info("%s %s cancelled", scope.get("method"), scope.get("path"))
        except Exception as exc:
            logger.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                return  # the status line is out; nothing better to send than a cut body
            response = error_response(
                500,
                f"internal error: {type(exc).__name__}: {exc}",
                server=self.server,
                type_="internal_error",
            )
            await response(scope, receive, send)


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or a BadRequestError that says what is wrong with it."""
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError as exc:
        raise BadRequestError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequestError(f"request body must be a JSON object, got {type(body).__name__}")
    return body
