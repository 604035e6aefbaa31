"""`NeMoGymAsyncOpenAI` as NeMo Gym's servers call it, against the stub vLLM served on loopback:
JSON answers as dicts, the bearer key sent, NeMo Gym's retry rule, typed errors that never carry
the key (in the message, the repr, the body kept on the error, or a log line)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from ng_cli.nemo_gym_compat.api.openai_client import EndpointHTTPError, PermanentEndpointError
from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymAsyncOpenAI
from ng_cli.nemo_gym_compat.api.server_utils import close_client_session
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.stub_vllm import StubVllm

KEY = "sk-judge-9c4e1a7b3f2d8e6a"
CHAT = {"model": "stub-model", "messages": [{"role": "user", "content": "same?"}], "max_tokens": 64}


@pytest.fixture
def stub() -> Iterator[tuple[StubVllm, str]]:
    model = StubVllm(api_key=KEY)
    with serve_in_thread(model.build_app()) as url:
        yield model, url


@pytest.fixture(autouse=True)
async def _session() -> AsyncIterator[None]:
    """The layer's aiohttp session belongs to one event loop: each test's is closed with it."""
    yield
    await close_client_session()


def _fault(model: StubVllm, fault: str, times: int | None = None) -> None:
    model.fault, model.fault_times = fault, times


def _assert_no_key(error: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    shown = [str(error), repr(error), caplog.text]
    if isinstance(error, EndpointHTTPError):
        shown.append(error.response_content.decode())
    for text in shown:
        assert KEY not in text


async def test_calls_answer_the_endpoints_json_with_the_key_sent(stub: tuple[StubVllm, str]) -> None:
    model, url = stub
    client = NeMoGymAsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, default_headers={"X-Run": "r1"})
    chat = await client.create_chat_completion(**CHAT)
    assert chat["choices"][0]["message"]["content"] == "Echo: same?"
    assert model.requests[-1]["messages"] == CHAT["messages"]  # the keywords are the body
    assert (model.headers[-1]["authorization"], model.headers[-1]["x-run"]) == (f"Bearer {KEY}", "r1")
    response = await client.create_response(model="stub-model", input=[{"role": "user", "content": "hi"}])
    assert response["output"][0]["content"][0]["text"] == "Echo: hi"
    assert (await client.create_models())["data"][0]["id"] == "stub-model"
    tokens = await client.create_tokenize(model="stub-model", prompt="ab")  # beside /v1, as vLLM's
    assert tokens["count"] == 2
    assert KEY not in repr(client)


async def test_a_retryable_status_is_retried_until_it_passes(stub: tuple[StubVllm, str]) -> None:
    model, url = stub
    _fault(model, "error_500", times=2)
    client = NeMoGymAsyncOpenAI(base_url=f"{url}/v1", api_key=KEY)  # 3 attempts, as NeMo Gym
    chat = await client.create_chat_completion(**CHAT)
    assert chat["choices"][0]["message"]["content"] == "Echo: same?"
    assert model.calls["chat"] == 3


async def test_attempts_run_out_as_a_typed_error_with_the_body(
    stub: tuple[StubVllm, str], caplog: pytest.LogCaptureFixture
) -> None:
    model, url = stub
    _fault(model, "echo_auth_500")  # a proxy that dumps our headers, the key among them
    client = NeMoGymAsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_http_attempts=2)
    with caplog.at_level(logging.WARNING), pytest.raises(EndpointHTTPError) as raised:
        await client.create_chat_completion(**CHAT)
    assert isinstance(raised.value, aiohttp.ClientResponseError)  # what NeMo Gym's servers catch
    assert raised.value.status == 500
    assert model.calls["chat"] == 2
    assert "upstream proxy error" in str(raised.value)
    assert b"Bearer ***" in raised.value.response_content
    assert "retrying" in caplog.text  # the first failure was logged, redacted
    _assert_no_key(raised.value, caplog)


async def test_a_status_outside_the_retry_codes_fails_at_once(stub: tuple[StubVllm, str]) -> None:
    model, url = stub
    _fault(model, "bad_request")
    client = NeMoGymAsyncOpenAI(base_url=f"{url}/v1", api_key=KEY)
    with pytest.raises(EndpointHTTPError, match=r"answered HTTP 400: .*temperature must be non-negative"):
        await client.create_chat_completion(**CHAT)
    assert model.calls["chat"] == 1


async def test_a_key_the_endpoint_calls_invalid_stops_the_client(
    stub: tuple[StubVllm, str], caplog: pytest.LogCaptureFixture
) -> None:
    model, url = stub
    _fault(model, "invalid_key_401", times=1)
    client = NeMoGymAsyncOpenAI(base_url=f"{url}/v1", api_key=KEY)
    with caplog.at_level(logging.WARNING), pytest.raises(PermanentEndpointError) as raised:
        await client.create_chat_completion(**CHAT)
    assert raised.value.status == 401
    assert "Incorrect API key provided: ***" in str(raised.value)
    _assert_no_key(raised.value, caplog)
    with pytest.raises(PermanentEndpointError, match="sends no more requests") as again:
        await client.create_chat_completion(**CHAT)  # the stub would answer now: it is not asked
    assert model.calls["chat"] == 1
    _assert_no_key(again.value, caplog)


async def test_a_wrong_key_is_an_http_error_without_the_key(
    stub: tuple[StubVllm, str], caplog: pytest.LogCaptureFixture
) -> None:
    _, url = stub
    wrong = "sk-wrong-0a1b2c3d4e5f"
    client = NeMoGymAsyncOpenAI(base_url=f"{url}/v1", api_key=wrong)
    with pytest.raises(EndpointHTTPError, match="HTTP 401") as raised:
        await client.create_chat_completion(**CHAT)
    for text in (str(raised.value), repr(raised.value), caplog.text):
        assert wrong not in text


async def test_a_dead_endpoint_is_a_connection_error(unused_tcp_port: int) -> None:
    client = NeMoGymAsyncOpenAI(
        base_url=f"http://127.0.0.1:{unused_tcp_port}/v1", api_key=KEY, max_connection_retries=0
    )
    with pytest.raises(aiohttp.ClientConnectionError) as raised:
        await client.create_chat_completion(**CHAT)
    assert KEY not in repr(raised.value)


def test_a_bad_field_is_refused_without_echoing_the_key() -> None:
    with pytest.raises(ValueError, match="max_http_attempts") as raised:
        NeMoGymAsyncOpenAI(base_url="http://127.0.0.1:1/v1", api_key=KEY, max_http_attempts=0)
    assert KEY not in str(raised.value)
