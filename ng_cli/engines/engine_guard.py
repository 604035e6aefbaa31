"""`KeyOnEveryRoute`: the engines' key on every route of a vLLM server, its admin routes included.

vLLM checks `--api-key` / `VLLM_API_KEY` only under `/v1`, `/v2`, `/inference` and `/cohere`:
the development routes that `weight_updates: true` turns on (`/pause`, `/collective_rpc`,
`/sleep`, `/start_weight_update`, ...) would answer anyone who reaches the port. ng_run passes
this class to vLLM's own `--middleware` option, so every route but `/health` needs the key.

An engine that faces a network (a Ray node's address) also has its own admin key in
`NG_ENGINE_ADMIN_KEY` (`weight_routes.engine_admin_key`): then the engines' key opens only the
inference routes (`INFERENCE_PATHS`), and every other route, vLLM's admin routes first, takes the
admin key alone. An allow-list, so a development route a later vLLM adds is closed too.

It runs inside the engine's interpreter (imported by module name from `engine_main.py`'s
folder, which is first on that interpreter's path): Starlette and the standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["INFERENCE_PATHS", "INFERENCE_PREFIXES", "MIDDLEWARE", "OPEN_PATHS", "KeyOnEveryRoute"]

MIDDLEWARE = "engine_guard.KeyOnEveryRoute"
"""The value of vLLM's `--middleware` option that installs this class."""
OPEN_PATHS = frozenset({"/health"})
"""Liveness only: what ng_run's readiness probe and the model server's health probe read."""
INFERENCE_PREFIXES = ("/v1/",)
"""Routes the engines' key opens when the engine has an admin key of its own (vLLM's OpenAI API)."""
INFERENCE_PATHS = frozenset({"/tokenize", "/detokenize", "/metrics", "/version", "/load", "/ping"})
"""The same, outside `/v1`: what the model server and monitoring read (`/tokenize`: token ids)."""

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]]


class KeyOnEveryRoute:
    """Answers 401 to any HTTP request without `Authorization: Bearer $VLLM_API_KEY` (inference
    routes) or `Bearer $NG_ENGINE_ADMIN_KEY` (every route, when set; else the engines' key)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        key = os.environ.get("VLLM_API_KEY", "")
        if not key:
            raise RuntimeError(
                "engine_guard: VLLM_API_KEY is not set; refusing to serve admin routes without a key"
            )
        self._digest = hashlib.sha256(key.encode()).digest()
        admin = os.environ.get("NG_ENGINE_ADMIN_KEY", "")
        self._admin_digest = hashlib.sha256(admin.encode()).digest() if admin else None

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
        token = _bearer(scope)
        if token is None:
            return False
        digest = hashlib.sha256(token.encode()).digest()
        if self._admin_digest is None:
            return hmac.compare_digest(digest, self._digest)
        if hmac.compare_digest(digest, self._admin_digest):
            return True
        path = str(scope["path"])
        inference = path in INFERENCE_PATHS or path.startswith(INFERENCE_PREFIXES)
        return inference and hmac.compare_digest(digest, self._digest)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return str(token)
    return None
