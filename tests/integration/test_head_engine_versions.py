"""The head's `/engines` lists each engine's weight version, as its model server reports it (issue 42)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ng_cli.head import build_head_app, fetch_engines
from ng_cli.servers.testing import serve_in_thread

pytestmark = pytest.mark.integration

KEY = "engines-key-0123456789"
ENGINES = [
    {
        "name": "policy_model/engine-0",
        "url": "http://10.0.0.2:40117/v1",
        "node": "10.0.0.2",
        "node_id": "5c1e",
    },
    {
        "name": "policy_model/engine-1",
        "url": "http://10.0.0.3:41231/v1",
        "node": "10.0.0.3",
        "node_id": "9a0b",
    },
]


def model_server(seen: list[str]) -> Starlette:
    """A model server's `/admin/weights`: engine-1 is out of the pool (lost with its node)."""

    async def weights(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return JSONResponse(
            {"version": 3, "engine_versions": {"http://10.0.0.2:40117": 3, "http://10.0.0.3:41231": None}}
        )

    return Starlette(routes=[Route("/admin/weights", weights)])


def rows() -> list[dict[str, Any]]:
    return [dict(engine) for engine in ENGINES]


def test_each_engine_row_carries_its_version_from_its_model_server() -> None:
    seen: list[str] = []
    with serve_in_thread(model_server(seen)) as model_url:
        app = build_head_app(config={}, servers=list, engines=rows, weight_sources=lambda: [(model_url, KEY)])
        with serve_in_thread(app) as head_url:
            engines = fetch_engines(head_url)
    assert [engine["weight_version"] for engine in engines] == [3, None]
    assert [engine["node_id"] for engine in engines] == ["5c1e", "9a0b"]
    assert seen == [f"Bearer {KEY}"]


def test_a_model_server_that_refuses_or_is_gone_leaves_rows_without_a_version() -> None:
    seen: list[str] = []
    with serve_in_thread(model_server(seen)) as model_url:
        app = build_head_app(
            config={},
            servers=list,
            engines=rows,
            weight_sources=lambda: [(model_url, "wrong"), ("http://127.0.0.1:9", KEY)],
        )
        with (
            serve_in_thread(app) as head_url,
            urllib.request.urlopen(f"{head_url}/engines", timeout=30) as answer,
        ):
            engines = json.loads(answer.read())
    assert engines == ENGINES  # as the launcher listed them, no version
    assert seen == ["Bearer wrong"]
