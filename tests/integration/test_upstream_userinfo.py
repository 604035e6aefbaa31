"""`user:password@` in an upstream URL: sent as basic auth, and never shown.

A reverse proxy with basic auth in front of vLLM is addressed as `http://user:pw@proxy/v1`, in
`base_url` or in an `endpoint_file`. vllm_model serves over a stub vLLM (in this process, so
the headers it received can be read): calls succeed with `Authorization: Basic ...`, and the
password is in no answer, `/metrics` label, log line or error.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
import pytest

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "responses_api_models" / "vllm_model" / "app.py"
USER = "trainer"
PASSWORD = "pw-9c2e7b41d6a3f805"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def with_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"{USER}:{PASSWORD}@{parts.netloc}").geturl()


@contextmanager
def serve_model(**block: Any) -> Iterator[str]:
    config = {
        "api_key": "EMPTY",
        "model": "stub-model",
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
        "max_attempts": 1,
        **block,
    }
    server_class = load_server_class(APP)
    server = server_class(validate_block(server_class.config_class, block=config), name="policy_model")
    with serve_in_thread(server.build_app()) as url:
        yield url


async def call_and_scrape(url: str) -> tuple[int, str, str]:
    """One generation (status, body), then the server's /metrics."""
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1/responses", data=orjson.dumps({"input": "hi"})) as answer:
            status, body = answer.status, await answer.text()
        async with http.get(f"{url}/metrics") as metrics:
            return status, body, await metrics.text()


@pytest.fixture
def stub() -> StubVllm:
    return StubVllm(api_key=None)


@pytest.fixture
def stub_url(stub: StubVllm) -> Iterator[str]:
    with serve_in_thread(stub.build_app()) as url:
        yield url


async def test_userinfo_in_base_url_is_sent_as_basic_auth(
    stub: StubVllm, stub_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with serve_model(base_url=with_userinfo(f"{stub_url}/v1")) as url:
        status, body, metrics = await call_and_scrape(url)

    assert status == 200, body
    assert stub.headers[-1]["authorization"] == BASIC
    assert f'endpoint="{stub_url}/v1"' in metrics
    for where, text in {"answer": body, "metrics": metrics, "log": caplog.text}.items():
        assert PASSWORD not in text, where


async def test_userinfo_in_a_rewritten_endpoint_file_is_sent_as_basic_auth_and_never_shown(
    stub: StubVllm, stub_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The trainer moves the engine behind a proxy while the model server runs."""
    caplog.set_level(logging.INFO)
    endpoint_file = tmp_path / "endpoints.txt"
    first = StubVllm(api_key=None)
    with (
        serve_in_thread(first.build_app()) as first_url,
        serve_model(
            base_url=f"{first_url}/v1",
            endpoint_file=str(endpoint_file),
            endpoint_check_interval_s=0.05,
            endpoint_connection_retries=0,  # one attempt: the 500 is answered at once
        ) as url,
    ):
        endpoint_file.write_text(with_userinfo(f"{stub_url}/v1") + "\n")
        await wait_for_label(url, f'ng_model_endpoint_healthy{{endpoint="{stub_url}/v1"}} 1.0')
        status, body, metrics = await call_and_scrape(url)
        stub.fault = "error_500"
        failed_status, failed_body, _ = await call_and_scrape(url)

    assert status == 200, body
    assert stub.headers[0]["authorization"] == BASIC
    assert failed_status == 502
    assert f"{stub_url}/v1" in failed_body  # the error names the endpoint, without its password
    assert "upstream endpoints changed" in caplog.text
    for where, text in {"answer": body, "error": failed_body, "metrics": metrics, "log": caplog.text}.items():
        assert PASSWORD not in text, where


async def wait_for_label(url: str, sample: str, timeout_s: float = HANG_CAP_S) -> None:
    """Until the model server's /metrics shows `sample` (it has followed the endpoint file)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(f"{url}/metrics") as answer:
                text = await answer.text()
            if sample in text:
                return
            assert asyncio.get_running_loop().time() < deadline, f"no {sample!r} in:\n{text}"
            await asyncio.sleep(0.05)
