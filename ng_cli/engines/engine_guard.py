"""`KeyOnEveryRoute`: the engines' key on every route of a vLLM server, its admin routes included.

vLLM checks `--api-key` / `VLLM_API_KEY` only under `/v1`, `/v2`, `/inference` and `/cohere`:
the development routes that `weight_updates: true` turns on (`/pause`, `/collective_rpc`,
`/sleep`, `/start_weight_update`, ...) would answer anyone who reaches the port. ng_run passes
this class to vLLM's own `--middleware` option, so every route but `/health` needs the key.

It runs inside the engine's interpreter (imported by module name from `engine_main.py`'s
folder, which is first on that interpreter's path): Starlette and the standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["MIDDLEWARE", "OPEN_PATHS", "KeyOnEveryRoute"]

MIDDLEWARE = "engine_guard.KeyOnEveryRoute"
"""The value of vLLM's `--middleware` option that installs this class."""
OPEN_PATHS = frozenset({"/health"})
"""Liveness only: what ng_run's readiness probe and the model server's health probe read."""

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]]


class KeyOnEveryRoute:
    """Answers 401 to any HTTP request without `Authorization: Bearer $VLLM_API_KEY`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        key = os.environ.get("VLLM_API_KEY", "")
        if not key:
            raise RuntimeError(
                "engine_guard: VLLM_API_KEY is not set; refusing to serve admin routes without a key"
            )
        self._digest = hashlib.sha256(key.encode()).digest()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = b'{"error": "Unauthorized: this engine needs its key on every route"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self._digest)
        return False
