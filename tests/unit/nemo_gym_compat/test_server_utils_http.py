"""`nemo_gym.server_utils`' process-wide client and its servers' production middlewares, as NeMo
Gym's own tests use them (genrm_compare's `test_http_lifecycle.py`): the global aiohttp client
(set once, swapped by tests per event loop), `ServerClient`'s `_server_base_urls`, NeMo Gym's
exception answers (a JSON string) and its disconnect cancellation (a cancel scope: a middleware in
between that swallows the `CancelledError` does not keep the route running)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from fastapi import FastAPI, Request
from omegaconf import OmegaConf

from ng_cli.nemo_gym_compat.api import server_utils as http
from ng_cli.nemo_gym_compat.api.config_types import BaseRunServerInstanceConfig
from ng_cli.servers.testing import serve_in_thread


@pytest.fixture(autouse=True)
async def _fresh_client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """What their fixture does: this test's loop gets its own global client."""
    monkeypatch.setattr(http, "_GLOBAL_AIOHTTP_CLIENT", None)
    yield
    await http.close_client_session()


class _Server(http.SimpleServer):
    def setup_webserver(self) -> FastAPI:
        return self.new_app()


def _server() -> _Server:
    config = BaseRunServerInstanceConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="probe")
    client = http.ServerClient.model_construct(global_config_dict=OmegaConf.create({}))
    return _Server(config=config, server_client=client)


def _client_for(url: str) -> http.ServerClient:
    client = http.ServerClient.model_construct(global_config_dict=OmegaConf.create({}))
    client._server_base_urls["probe"] = url
    return client


async def test_the_global_client_is_set_once_and_sized_by_its_config() -> None:
    session = http.set_global_aiohttp_client(
        http.GlobalAIOHTTPAsyncClientConfig(
            global_aiohttp_connector_limit=7, global_aiohttp_connector_limit_per_host=3
        )
    )
    assert http.is_global_aiohttp_client_setup()
    assert http.get_global_aiohttp_client() is session
    assert (session.connector.limit, session.connector.limit_per_host) == (7, 3)  # type: ignore[union-attr]
    with pytest.raises(AssertionError, match="already a global aiohttp client"):
        http.set_global_aiohttp_client(http.GlobalAIOHTTPAsyncClientConfig())
    await session.close()
    assert not http.is_global_aiohttp_client_setup()  # a closed one (its loop gone) is made again
    assert http.get_global_aiohttp_client() is not session


async def test_exception_middleware_answers_nemo_gyms_json_strings() -> None:
    server = _server()
    app = server.setup_webserver()

    @app.post("/inner")
    async def inner() -> None:
        error = aiohttp.ClientResponseError(None, (), status=503)  # type: ignore[arg-type]
        error.response_content = b"judge offline"  # type: ignore[attr-defined]
        raise error

    @app.post("/bug")
    async def bug() -> None:
        raise KeyError("missing")

    server.setup_exception_middleware(app)
    with serve_in_thread(app) as url:
        client = _client_for(url)
        inner_answer = await client.post(server_name="probe", url_path="/inner", json={})
        bug_answer = await client.post(server_name="probe", url_path="/bug", json={})
        assert inner_answer.status == bug_answer.status == 500
        assert await inner_answer.json() == (
            "Hit an exception in _Server___probe calling an inner server: b'judge offline'"
        )
        assert await bug_answer.json() == "KeyError('missing')"
        with pytest.raises(aiohttp.ClientResponseError) as raised:
            await http.raise_for_status(inner_answer)
        assert raised.value.response_content.startswith(b'"Hit an exception')  # type: ignore[attr-defined]


async def test_a_client_gone_cancels_the_route_under_a_middleware_that_answers_cancellation() -> None:
    """NeMo Gym's exception middleware answers a CancelledError with a 500; the route it awaits runs
    in a task of Starlette's own. Cancelling only the outer task leaves that route running; NeMo
    Gym's cancel scope (ours too, now) stops it."""
    server = _server()
    app = server.setup_webserver()
    started, stopped = threading.Event(), threading.Event()
    outcome: list[str] = []

    @app.post("/slow")
    async def slow(request: Request) -> dict[str, Any]:
        await request.json()
        started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            stopped.set()
            raise
        outcome.append("ran to its end")
        stopped.set()
        return {}

    server.setup_exception_middleware(app)
    server.setup_cancellation_middleware(app)
    with serve_in_thread(app) as url:
        call = asyncio.create_task(_client_for(url).post(server_name="probe", url_path="/slow", json={}))
        await _wait_for(started.is_set)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await _wait_for(stopped.is_set)
    assert outcome == ["cancelled"]


async def _wait_for(predicate: Callable[[], bool], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)
