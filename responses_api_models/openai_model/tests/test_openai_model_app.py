"""openai_model over real sockets: pass-through of both routes, the model override, errors, start-up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ng_cli.config.schema import validate_block
from ng_cli.errors import ConfigError
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.served_model import post, serve_model_server
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[1] / "app.py"


class StubOpenAI(StubVllm):
    """The vLLM stub plus a `/v1/responses` route that answers like OpenAI (or fails on demand)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.responses_bodies: list[dict[str, Any]] = []
        self.headers: list[str | None] = []
        self.failures: list[tuple[int, dict[str, Any]]] = []

    def build_app(self) -> Starlette:
        app = super().build_app()
        app.router.routes.append(Route("/v1/responses", self.responses, methods=["POST"]))
        return app

    async def responses(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.responses_bodies.append(body)
        self.headers.append(request.headers.get("authorization"))
        if self.failures:
            status, error = self.failures.pop(0)
            return Response(orjson.dumps(error), status_code=status, media_type="application/json")
        answer = {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": body["model"],
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
            ],
            "usage": {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8},
        }
        if body.get("stream"):
            events = [
                {"type": "response.created", "response": {**answer, "status": "in_progress", "output": []}},
                {
                    "type": "response.output_text.delta",
                    "item_id": "m",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "ok",
                },
                {"type": "response.completed", "response": answer},
            ]
            if self.fault == "stream_truncated":
                events = events[:-1]  # the stream ends cleanly, without its final event
            text = b"".join(
                f"event: {e['type']}\n".encode()
                + b"data: "
                + orjson.dumps({**e, "sequence_number": n})
                + b"\n\n"
                for n, e in enumerate(events)
            )
            return Response(text, media_type="text/event-stream")
        return Response(orjson.dumps(answer), media_type="application/json")


OVERFLOW = (
    400,
    {
        "error": {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)


@contextmanager
def serve_model(base_url: str, **overrides: Any) -> Iterator[str]:
    block = {"base_url": base_url, "api_key": "stub-key", "model": "stub-model", "backoff_s": 0.01,
             "health_probe_interval_s": 0.5, **overrides}  # fmt: skip
    with serve_model_server(APP, block, name="openai") as url:
        yield url


@pytest.fixture
def upstream() -> StubOpenAI:
    return StubOpenAI()


@pytest.fixture
def upstream_url(upstream: StubOpenAI) -> Iterator[str]:
    with serve_in_thread(upstream.build_app()) as url:
        yield url


async def test_responses_are_passed_through_with_the_configured_model(
    upstream: StubOpenAI, upstream_url: str, http: aiohttp.ClientSession
) -> None:
    request = {"model": "ignored", "input": "hi", "reasoning": {"effort": "low"}, "store": False}
    with serve_model(f"{upstream_url}/v1") as url:
        status, body = await post(http, f"{url}/v1/responses", request)
    assert status == 200, body
    assert body["output"][0]["content"][0]["text"] == "ok"
    assert upstream.responses_bodies == [{**request, "model": "stub-model"}]
    assert upstream.headers == ["Bearer stub-key"]


async def test_chat_completions_are_passed_through(upstream_url: str, http: aiohttp.ClientSession) -> None:
    with serve_model(f"{upstream_url}/v1") as url:
        status, body = await post(
            http, f"{url}/v1/chat/completions", {"messages": [{"role": "user", "content": "yo"}]}
        )
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "Echo: yo"


async def test_overflow_is_a_counted_400(
    upstream: StubOpenAI, upstream_url: str, http: aiohttp.ClientSession
) -> None:
    upstream.failures.append(OVERFLOW)
    with serve_model(f"{upstream_url}/v1") as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "long"})
        async with http.get(f"{url}/metrics") as response:
            metrics = await response.text()
    assert status == 400
    assert body["error"]["type"] == "ContextOverflowError"
    assert "context window" in body["error"]["message"]
    assert "ng_model_context_overflows_total 1.0" in metrics
    assert len(upstream.responses_bodies) == 1


async def test_a_5xx_is_retried(upstream: StubOpenAI, upstream_url: str, http: aiohttp.ClientSession) -> None:
    upstream.failures.append((503, {"error": {"message": "overloaded", "type": "server_error"}}))
    with serve_model(f"{upstream_url}/v1") as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "x"})
    assert status == 200, body
    assert len(upstream.responses_bodies) == 2


async def test_startup_rejects_a_model_the_upstream_does_not_list(upstream_url: str) -> None:
    server_class = load_server_class(APP)
    block = {"base_url": f"{upstream_url}/v1", "api_key": "stub-key", "model": "gpt-nope"}
    server = server_class(validate_block(server_class.config_class, block=block), name="openai")
    with pytest.raises(ConfigError, match="gpt-nope"):
        await server.upstream.start()
    await server.http.close()


async def test_startup_model_check_can_be_turned_off(upstream_url: str) -> None:
    server_class = load_server_class(APP)
    block = {
        "base_url": f"{upstream_url}/v1",
        "api_key": "stub-key",
        "model": "gpt-nope",
        "check_model_at_startup": False,
    }
    server = server_class(validate_block(server_class.config_class, block=block), name="openai")
    await server.upstream.start()
    await server.upstream.stop()
    await server.http.close()


async def test_streams_are_relayed_as_the_upstream_sends_them(
    upstream: StubOpenAI, upstream_url: str
) -> None:
    import openai

    with serve_model(f"{upstream_url}/v1") as url:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
            events = [e async for e in await client.responses.create(model="m", input="hi", stream=True)]
            chunks = [
                c
                async for c in await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                )
            ]
            upstream.fault = "stream_cut"
            with pytest.raises(openai.APIError, match="unreachable"):
                async for _ in await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                ):
                    pass
    assert [e.type for e in events] == [
        "response.created",
        "response.output_text.delta",
        "response.completed",
    ]
    assert upstream.responses_bodies[-1]["model"] == "stub-model"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: hi"


async def test_a_truncated_upstream_stream_is_relayed_as_an_error_never_as_complete(
    upstream: StubOpenAI, upstream_url: str
) -> None:
    """The upstream ends its stream cleanly but early (chat: no `[DONE]`; Responses: no final
    event). Before: chat got our `[DONE]` after the cut text, and the Responses stream just ended."""
    import openai

    upstream.fault = "stream_truncated"
    with serve_model(f"{upstream_url}/v1") as url:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as client:
            with pytest.raises(openai.APIError, match="ended its event stream before it was complete"):
                async for _ in await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                ):
                    pass
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{url}/v1/responses", json={"input": "hi", "stream": True}) as answer,
        ):
            blocks = (await answer.read()).decode().strip().split("\n\n")
    kinds = [block.split("\n")[0].removeprefix("event: ") for block in blocks]
    assert kinds == ["response.created", "response.output_text.delta", "error"]
    assert "ended its event stream before it was complete" in blocks[-1]
