"""The server framework over real sockets: health, error envelopes, sessions, client timeouts."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from ng_cli.errors import (
    ContextOverflowError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from ng_cli.servers import HttpClient, ResourcesServer, Timeouts, ToolError, VerifyRequest, build_app, tool
from ng_cli.servers.session import SESSION_COOKIE
from ng_cli.servers.testing import serve_in_thread

pytestmark = pytest.mark.integration


class AddArgs(BaseModel):
    a: int
    b: int


class Calculator(ResourcesServer):
    """A tiny environment: one tool, per-session memory, a verify that reads it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_sum: dict[str, int] = {}

    @tool
    async def add(self, session_id: str, args: AddArgs) -> dict[str, int]:
        if args.a < 0:
            raise ToolError("negative numbers are not supported")
        self.last_sum[session_id] = args.a + args.b
        return {"sum": args.a + args.b}

    async def verify(self, session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        expected = request.extra("expected")
        return {
            "reward": float(self.last_sum.get(session_id) == expected),
            "seen": self.last_sum.get(session_id),
        }


@pytest.fixture
def calculator_url() -> Iterator[str]:
    server = Calculator(Calculator.validate_config({}, instance="calc"), name="calc")
    with serve_in_thread(server.build_app()) as url:
        yield url


@pytest.fixture
def misbehaving_url() -> Iterator[str]:
    app = build_app("misbehaving")

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("kaput")

    @app.post("/boom")
    async def boom_with_body() -> None:
        raise RuntimeError("kaput")

    @app.post("/echo")
    async def echo(body: dict[str, int]) -> dict[str, int]:
        return body

    @app.get("/overflow")
    async def overflow() -> None:
        raise ContextOverflowError("maximum context length is 16 tokens", status=400)

    @app.get("/slow")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(5)
        return {"late": "yes"}

    with serve_in_thread(app) as url:
        yield url


async def test_health_and_tool_roundtrip(calculator_url: str) -> None:
    client = HttpClient()
    try:
        assert await client.get_json(f"{calculator_url}/health") == {"status": "ok", "server": "calc"}
        assert await client.post_json(f"{calculator_url}/add", {"a": 2, "b": 3}) == {"sum": 5}
    finally:
        await client.close()


async def test_bad_tool_arguments_are_a_400_envelope_naming_the_server(calculator_url: str) -> None:
    client = HttpClient()
    try:
        with pytest.raises(UpstreamHTTPError) as info:
            await client.post_json(f"{calculator_url}/add", {"a": "x"})
        assert info.value.status == 400
        assert '"server":"calc"' in info.value.body
        assert "invalid arguments for tool 'add'" in info.value.body
        with pytest.raises(UpstreamHTTPError) as refused:
            await client.post_json(f"{calculator_url}/add", {"a": -1, "b": 1})
        assert refused.value.status == 400
        assert "negative numbers" in refused.value.body
    finally:
        await client.close()


async def test_session_cookie_keys_state_per_rollout(calculator_url: str) -> None:
    client = HttpClient()
    try:
        async with client.session.post(f"{calculator_url}/seed_session", json={}) as response:
            cookie_a = response.cookies[SESSION_COOKIE].value
        async with client.session.post(f"{calculator_url}/seed_session", json={}) as response:
            cookie_b = response.cookies[SESSION_COOKIE].value
        assert cookie_a != cookie_b
        await client.post_json(f"{calculator_url}/add", {"a": 1, "b": 1}, cookies={SESSION_COOKIE: cookie_a})
        await client.post_json(f"{calculator_url}/add", {"a": 5, "b": 5}, cookies={SESSION_COOKIE: cookie_b})
        row = {"responses_create_params": {"input": "hi"}, "response": {"output": []}, "expected": 2}
        verdict = await client.post_json(f"{calculator_url}/verify", row, cookies={SESSION_COOKIE: cookie_a})
        assert verdict["reward"] == 1.0
        assert verdict["expected"] == 2  # the request fields come back
        forged = cookie_a.split(".")[0] + ".forged"
        verdict = await client.post_json(f"{calculator_url}/verify", row, cookies={SESSION_COOKIE: forged})
        assert verdict["reward"] == 0.0  # a forged cookie gets a fresh, empty session
    finally:
        await client.close()


async def test_unexpected_errors_become_a_500_body(misbehaving_url: str) -> None:
    client = HttpClient()
    try:
        with pytest.raises(UpstreamHTTPError) as info:
            await client.get_json(f"{misbehaving_url}/boom")
        assert info.value.status == 500
        assert "RuntimeError: kaput" in info.value.body
        assert '"server":"misbehaving"' in info.value.body
        with pytest.raises(UpstreamHTTPError) as overflow:
            await client.get_json(f"{misbehaving_url}/overflow")
        assert overflow.value.status == 400
    finally:
        await client.close()


async def test_read_timeout_is_enforced(misbehaving_url: str) -> None:
    client = HttpClient(timeouts=Timeouts(connect_s=5, read_s=0.3, total_s=60))
    try:
        started = time.monotonic()
        with pytest.raises(UpstreamTimeoutError):
            await client.get_json(f"{misbehaving_url}/slow")
        assert time.monotonic() - started < 30.0  # the 0.3 s read timeout, not the 60 s total
    finally:
        await client.close()


async def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = HttpClient(timeouts=Timeouts(connect_s=1, read_s=1, total_s=2))
    try:
        with pytest.raises(UpstreamUnavailableError):
            await client.get_json(f"http://127.0.0.1:{port}/health")
    finally:
        await client.close()


async def test_pooled_connection_survives_a_crashing_handler(misbehaving_url: str) -> None:
    """A 500 must not poison the client's connection pool for the next call to the same server."""
    client = HttpClient()
    try:
        for attempt in range(5):
            with pytest.raises(UpstreamHTTPError):
                await client.post_json(f"{misbehaving_url}/boom", {"a": attempt})
            assert await client.post_json(f"{misbehaving_url}/echo", {"a": attempt}) == {"a": attempt}
    finally:
        await client.close()
