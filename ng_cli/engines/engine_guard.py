"""`KeyOnEveryRoute`: the engines' key on every route of a vLLM server, its admin routes included.

vLLM checks `--api-key` / `VLLM_API_KEY` only under `/v1`, `/v2`, `/inference` and `/cohere`:
the development routes that `weight_updates: true` turns on (`/pause`, `/collective_rpc`,
`/sleep`, `/start_weight_update`, ...) would answer anyone who reaches the port. ng_run passes
this class to vLLM's own `--middleware` option, so every route but `/health` needs the key.

An engine ng_run starts also has its own admin key in `NG_ENGINE_ADMIN_KEY`
(`weight_routes.engine_admin_key`), which opens every route. A request that reaches the engine on
a network address (not loopback: a Ray node's address, or `engine_host: 0.0.0.0` reached from
elsewhere) with the engines' key gets the inference routes only (`INFERENCE_PATHS`): every other
route, vLLM's admin routes first, takes the admin key alone. Decided by the address the request
arrived at (ASGI's `server`), so a port on a network address never opens an admin route to the
engines' key. An allow-list, so a development route a later vLLM adds is closed too.

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
    """Answers 401 to any HTTP request without `Authorization: Bearer $NG_ENGINE_ADMIN_KEY` (every
    route) or `Bearer $VLLM_API_KEY` (every route on loopback or without an admin key; else the
    inference routes only)."""

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
        opened = path in INFERENCE_PATHS or path.startswith(INFERENCE_PREFIXES) or _on_loopback(scope)
        return opened and hmac.compare_digest(digest, self._digest)


def _on_loopback(scope: Scope) -> bool:
    """The request arrived at a loopback address of this machine (only its own processes reach it)."""
    server = scope.get("server")
    host = str(server[0]) if server else ""
    return host == "::1" or host.startswith("127.") or host.startswith("::ffff:127.")


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return str(token)
    return None
