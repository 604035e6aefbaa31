"""Cancel a request's handler when its client goes away, so the work below it stops too.

Starlette runs a handler to its end even when the client has disconnected or timed out: a model
server would keep waiting on vLLM, and vLLM would keep decoding, for nobody. This middleware
watches the connection once the request body has been read; on `http.disconnect` (before the
response is complete) it cancels the handler. The cancellation reaches the `HttpClient` call in
progress, aiohttp closes that connection, and the server behind it (vLLM, or another of ours
running this middleware) sees its own client go away: the abort travels down the whole chain.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CancelOnDisconnectMiddleware"]

logger = logging.getLogger("ng_cli.servers")


class CancelOnDisconnectMiddleware:
    """Runs each HTTP request in a task and cancels it when the client disconnects early."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = _Connection(receive)

        async def handle() -> None:
            await self.app(scope, state.receive, state.tracking(send))

        handler = asyncio.create_task(handle())
        state.handler = handler
        try:
            await asyncio.shield(handler)
        except asyncio.CancelledError:
            if not handler.cancelled() or not state.client_gone:
                handler.cancel()  # we were cancelled (server shutdown): so is the handler
                raise
            logger.info(
                "%s %s: the client went away; its work was cancelled", scope.get("method"), scope.get("path")
            )
        finally:
            state.stop_watching()


class _Connection:
    """The request's `receive`, read by the handler until the body is in, then by a watcher."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.handler: asyncio.Task[Any] | None = None
        self.client_gone = False
        self._gone = asyncio.Event()
        self._body_read = False
        self._response_done = False
        self._watcher: asyncio.Task[None] | None = None

    async def receive(self) -> Message:
        if self._body_read:  # the watcher owns the connection now; only a disconnect is left
            await self._gone.wait()
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._body_read = True
            self._mark_gone()
        elif not message.get("more_body", False):
            self._body_read = True
            self._watcher = asyncio.create_task(self._watch())
        return message

    def tracking(self, send: Send) -> Send:
        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self._response_done = True
            await send(message)

        return tracked

    async def _watch(self) -> None:
        message = await self._receive()
        if message["type"] == "http.disconnect" and not self._response_done:
            self._mark_gone()
            if self.handler is not None and not self.handler.done():
                self.handler.cancel()

    def _mark_gone(self) -> None:
        self.client_gone = True
        self._gone.set()

    def stop_watching(self) -> None:
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()
