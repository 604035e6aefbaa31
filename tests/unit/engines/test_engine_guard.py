"""`KeyOnEveryRoute`, the engines' guard: which key opens which route (issue 42's admin key)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ng_cli.engines.engine_guard import KeyOnEveryRoute

ENGINES_KEY = "engines-key"
ADMIN_KEY = "admin-key-of-this-engine"
ADMIN_ROUTES = ("/pause", "/resume", "/collective_rpc", "/sleep", "/wake_up", "/reset_prefix_cache",
                "/start_weight_update", "/init_weight_transfer_engine", "/some_route_a_later_vllm_adds")  # fmt: skip
INFERENCE_ROUTES = ("/v1/chat/completions", "/v1/models", "/tokenize", "/metrics")


def status_of(guard: KeyOnEveryRoute, path: str, key: str | None, *, at: str = "10.0.0.3") -> int:
    """The status the guarded app answers `path` with, sent with `key` (None: no Authorization) to
    the engine's address `at`."""
    sent: list[dict[str, Any]] = []
    headers = [(b"authorization", f"Bearer {key}".encode())] if key is not None else []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "path": path, "headers": headers, "server": (at, 8001)}
    asyncio.run(guard(scope, receive, send))
    return int(sent[0]["status"])


async def app(_scope: Any, _receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_with_an_admin_key_the_engines_key_opens_only_inference_routes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", ENGINES_KEY)
    monkeypatch.setenv("NG_ENGINE_ADMIN_KEY", ADMIN_KEY)
    guard = KeyOnEveryRoute(app)
    for route in ADMIN_ROUTES:
        assert status_of(guard, route, None) == 401
        assert status_of(guard, route, ENGINES_KEY) == 401, route  # the trainer's key opens no admin route
        assert status_of(guard, route, "wrong") == 401
        assert status_of(guard, route, ADMIN_KEY) == 200
    for route in INFERENCE_ROUTES:
        assert status_of(guard, route, None) == 401
        assert status_of(guard, route, ENGINES_KEY) == 200
    assert status_of(guard, "/health", None) == 200
    for at in ("127.0.0.1", "::1"):  # on loopback (only this machine): every route, as before
        assert status_of(guard, "/collective_rpc", ENGINES_KEY, at=at) == 200
        assert status_of(guard, "/collective_rpc", None, at=at) == 401


def test_without_an_admin_key_the_engines_key_opens_every_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", ENGINES_KEY)
    monkeypatch.delenv("NG_ENGINE_ADMIN_KEY", raising=False)
    guard = KeyOnEveryRoute(app)
    for route in (*ADMIN_ROUTES, *INFERENCE_ROUTES):
        assert status_of(guard, route, None) == 401
        assert status_of(guard, route, ENGINES_KEY) == 200
        assert status_of(guard, route, ADMIN_KEY) == 401
