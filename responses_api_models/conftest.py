"""Fixtures the model servers' tests share: a stub vLLM served in a thread, an HTTP session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.stub_vllm import StubVllm


@pytest.fixture
def stub() -> StubVllm:
    return StubVllm()


@pytest.fixture
def stub_url(stub: StubVllm) -> Iterator[str]:
    with serve_in_thread(stub.build_app()) as url:
        yield url


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
