"""The caller's deadline crosses hops: header out, deadline in, timeouts capped, no call once passed."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi import Request

from ng_cli.errors import UpstreamDownError, UpstreamHTTPError, UpstreamTimeoutError
from ng_cli.servers.app import JSONResponse, build_app
from ng_cli.servers.deadline import DEADLINE_HEADER, deadline_scope, remaining_s
from ng_cli.servers.http import HttpClient, RetryPolicy, Timeouts, is_retryable
from ng_cli.servers.testing import serve_in_thread


def deadline_echo_app(calls: list[str] | None = None) -> object:
    app = build_app("echo")

    @app.post("/echo")
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"header": request.headers.get(DEADLINE_HEADER), "remaining": remaining_s()})

    @app.post("/slow")
    async def slow() -> JSONResponse:
        await asyncio.sleep(5)
        return JSONResponse({})

    @app.post("/down")
    async def down() -> JSONResponse:
        if calls is not None:
            calls.append("down")
        raise UpstreamDownError("every endpoint down", down_for_s=12.0)

    return app


async def test_the_remaining_deadline_is_forwarded_and_becomes_the_servers() -> None:
    http = HttpClient()
    with serve_in_thread(deadline_echo_app()) as url:  # type: ignore[arg-type]
        try:
            without = await http.post_json(f"{url}/echo", {})
            with deadline_scope(10.0):
                answer = await http.post_json(f"{url}/echo", {})
        finally:
            await http.close()
    assert without == {"header": None, "remaining": None}
    assert 9.0 < float(answer["header"]) <= 10.0
    assert 0 < answer["remaining"] <= float(answer["header"])


async def test_a_call_is_cut_at_the_callers_deadline_and_none_is_sent_after_it() -> None:
    http = HttpClient(timeouts=Timeouts(connect_s=5, read_s=60, total_s=60))
    with serve_in_thread(deadline_echo_app()) as url:  # type: ignore[arg-type]
        try:
            started = time.monotonic()
            with deadline_scope(0.3), pytest.raises(UpstreamTimeoutError):
                await http.post_json(f"{url}/slow", {})
            assert time.monotonic() - started < 30.0  # the 0.3 s deadline, not read_s=60
            with deadline_scope(-1.0), pytest.raises(UpstreamTimeoutError, match="deadline has passed"):
                await http.post_json(f"{url}/echo", {})
        finally:
            await http.close()


async def test_an_open_circuit_keeps_its_type_across_a_hop_and_is_not_retried() -> None:
    http = HttpClient()
    calls: list[str] = []
    with serve_in_thread(deadline_echo_app(calls)) as url:  # type: ignore[arg-type]
        try:
            with pytest.raises(UpstreamDownError) as raised:
                await http.post_json_with_retry(f"{url}/down", {}, retry=RetryPolicy(max_attempts=3))
        finally:
            await http.close()
    assert raised.value.down_for_s == 12.0
    assert calls == ["down"]  # one call: the open circuit is not retried
    assert not is_retryable(raised.value)


def test_our_servers_502_503_504_are_not_retried_but_foreign_ones_are() -> None:
    ours = '{"error": {"message": "x", "type": "UpstreamUnavailableError", "code": 503, "server": "policy_model"}}'
    for status in (502, 503, 504):
        assert not is_retryable(UpstreamHTTPError("x", status=status, body=ours))
        assert is_retryable(UpstreamHTTPError("x", status=status, body='{"error": {"message": "busy"}}'))
    assert is_retryable(UpstreamHTTPError("x", status=500, body=ours))
