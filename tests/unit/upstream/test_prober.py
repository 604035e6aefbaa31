"""A busy endpoint is not a down one: a slow health probe keeps it in the pool while it answers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ng_cli.servers.http import HttpClient, Timeouts
from ng_cli.servers.testing import serve_in_thread
from ng_cli.upstream.pool import EndpointPool
from ng_cli.upstream.prober import HealthProber


class _SlowHealth:
    """An engine whose `/health` waits behind a full batch until released."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    async def health(self, _: Request) -> JSONResponse:
        self.arrived.set()
        await asyncio.to_thread(self.release.wait, 60)
        return JSONResponse({})


@pytest.fixture
def engine() -> Iterator[tuple[_SlowHealth, str]]:
    slow = _SlowHealth()
    with serve_in_thread(Starlette(routes=[Route("/health", slow.health)])) as root:
        yield slow, root
        slow.release.set()


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    await client.close()


def _prober(pool: EndpointPool, http: HttpClient) -> HealthProber:
    return HealthProber(
        pool,
        http,
        probe_url=lambda endpoint: f"{endpoint.root_url}/health",
        headers=lambda _: {},
        interval_s=60,
        timeouts=Timeouts(connect_s=5, read_s=0.3, total_s=0.3),
        on_rejoin=lambda _: None,
    )


@pytest.mark.parametrize("answers_meanwhile", [True, False])
async def test_a_timed_out_probe_takes_the_endpoint_out_only_if_it_answered_nothing(
    engine: tuple[_SlowHealth, str], http: HttpClient, answers_meanwhile: bool
) -> None:
    slow, root = engine
    pool = EndpointPool([f"{root}/v1"], root_urls=[root])
    (endpoint,) = pool.endpoints
    probing = asyncio.create_task(_prober(pool, http).check(endpoint))
    assert await asyncio.to_thread(slow.arrived.wait, 30)
    if answers_meanwhile:
        pool.record_success(endpoint)  # a call finished while the probe waited
    await probing
    assert endpoint.is_healthy is answers_meanwhile
    if not answers_meanwhile:
        assert "health probe failed" in (endpoint.last_error or "")
