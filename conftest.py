"""Fixtures the tests of every folder share (the server folders' own tests, and tests/): an
`HttpClient`, an aiohttp session, a stub vLLM served in a thread. Imports are inside the fixtures,
so a run that uses none of them (NeMo Gym's vendored tests under ng_test) loads nothing for them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import aiohttp

    from ng_cli.servers import HttpClient
    from tests.fixtures.stub_vllm import StubVllm


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    """The servers' own HTTP client, closed after the test."""
    from ng_cli.servers import HttpClient

    http = HttpClient()
    yield http
    await http.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain aiohttp session, as a client outside the stack would use."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def stub() -> StubVllm:
    """A stub vLLM (tests/fixtures/stub_vllm.py), not yet served; set its faults before `stub_url`."""
    from tests.fixtures.stub_vllm import StubVllm

    return StubVllm()


@pytest.fixture
def stub_url(stub: StubVllm) -> Iterator[str]:
    """`stub` served on loopback in a thread; its root URL."""
    from ng_cli.servers.testing import serve_in_thread

    with serve_in_thread(stub.build_app()) as url:
        yield url
