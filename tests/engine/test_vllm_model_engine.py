"""vllm_model against the real CPU vLLM (tiny random-weight Qwen2): text, forced tool calls, exact token ids.

The weights are random, so tests assert on structure and on agreement with vLLM's own
`/tokenize`, never on the words.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from ng_cli.conversion import to_chat_request
from ng_cli.errors import ConfigError
from ng_cli.protocol.responses import ResponsesRequest
from tests.fixtures.model_server import make_server, serve_model
from tests.fixtures.vllm_engine import VllmServer

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CONVERSATION: dict[str, Any] = {
    "instructions": "You answer weather questions.",
    "input": [{"role": "user", "content": "What is the weather in Paris today?"}],
    "max_output_tokens": 12,
    "temperature": 0,
}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session:
        yield session


async def post(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], **headers: str
) -> tuple[int, dict[str, Any]]:
    all_headers = {"Content-Type": "application/json", **headers}
    async with http.post(url, data=orjson.dumps(body), headers=all_headers) as response:
        return response.status, orjson.loads(await response.read())


async def vllm_tokenize(
    http: aiohttp.ClientSession, engine: VllmServer, request: dict[str, Any]
) -> list[int]:
    """vLLM's own tokenization of the chat request vllm_model sends for `request`."""
    chat = to_chat_request(
        ResponsesRequest.model_validate(request), model=engine.model, wants_token_ids=False
    )
    payload = {"model": engine.model, "messages": chat["messages"], "add_generation_prompt": True}
    if "tools" in chat:
        payload["tools"] = chat["tools"]
    status, body = await post(
        http, f"{engine.root_url}/tokenize", payload, Authorization=f"Bearer {engine.api_key}"
    )
    assert status == 200, body
    return list(body["tokens"])


async def test_text_response(vllm_engine: VllmServer, http: aiohttp.ClientSession) -> None:
    with serve_model(vllm_engine) as url:
        status, body = await post(http, f"{url}/v1/responses", CONVERSATION)
    assert status == 200, body
    assert body["model"] == vllm_engine.model
    assert body["status"] in ("completed", "incomplete")
    assert body["output"][-1]["type"] == "message"
    assert isinstance(body["output"][-1]["content"][0]["text"], str)
    assert 0 < body["usage"]["output_tokens"] <= 12
    assert "prompt_token_ids" not in body["output"][-1]


async def test_forced_tool_call(vllm_engine: VllmServer, http: aiohttp.ClientSession) -> None:
    request = {
        **CONVERSATION,
        "max_output_tokens": 64,
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
    }
    with serve_model(vllm_engine) as url:
        status, body = await post(http, f"{url}/v1/responses", request)
    assert status == 200, body
    calls = [item for item in body["output"] if item["type"] == "function_call"]
    assert len(calls) == 1, body["output"]
    assert calls[0]["name"] == "get_weather"
    assert calls[0]["call_id"]
    # Random weights: the arguments are whatever vLLM generated; they must arrive unchanged.
    chat = to_chat_request(
        ResponsesRequest.model_validate(request), model=vllm_engine.model, wants_token_ids=False
    )
    status, direct = await post(
        http, f"{vllm_engine.base_url}/chat/completions", chat, Authorization=f"Bearer {vllm_engine.api_key}"
    )
    assert status == 200, direct
    (direct_call,) = direct["choices"][0]["message"]["tool_calls"]
    assert calls[0]["arguments"] == direct_call["function"]["arguments"]


@pytest.mark.parametrize("source", ["auto", "tokenize"])
async def test_token_ids_equal_vllm_tokenize(
    vllm_engine: VllmServer, http: aiohttp.ClientSession, source: str
) -> None:
    request = {**CONVERSATION, "tools": [WEATHER_TOOL], "seed": 7}
    with serve_model(vllm_engine, return_token_id_information=True, token_id_source=source) as url:
        status, body = await post(http, f"{url}/v1/responses", request)
    assert status == 200, body
    last = body["output"][-1]
    assert last["prompt_token_ids"] == await vllm_tokenize(http, vllm_engine, request)
    assert (
        len(last["generation_token_ids"])
        == len(last["generation_log_probs"])
        == body["usage"]["output_tokens"]
    )
    assert all(lp <= 0 for lp in last["generation_log_probs"])
    assert body["usage"]["input_tokens"] == len(last["prompt_token_ids"])


async def test_both_token_id_sources_agree(vllm_engine: VllmServer, http: aiohttp.ClientSession) -> None:
    request = {**CONVERSATION, "seed": 3}
    answers = []
    for source in ("auto", "tokenize"):
        with serve_model(vllm_engine, return_token_id_information=True, token_id_source=source) as url:
            status, body = await post(http, f"{url}/v1/responses", request)
        assert status == 200, body
        answers.append(body["output"][-1])
    assert answers[0]["prompt_token_ids"] == answers[1]["prompt_token_ids"]
    assert answers[0]["generation_token_ids"] == answers[1]["generation_token_ids"]
    assert answers[0]["generation_log_probs"] == pytest.approx(answers[1]["generation_log_probs"], abs=1e-4)


async def test_token_ids_without_logprobs_are_the_same_ids(
    vllm_engine: VllmServer, http: aiohttp.ClientSession
) -> None:
    """`return_generation_log_probs: false`: vLLM is asked for no logprobs; the ids are the ones
    the logprob-carrying configuration returns for the same seeded call, and the next turn
    (which carries the ids back) is accepted."""
    request = {**CONVERSATION, "seed": 5}
    with serve_model(vllm_engine, return_token_id_information=True) as url:
        status, with_log_probs = await post(http, f"{url}/v1/responses", request)
    assert status == 200, with_log_probs
    with serve_model(vllm_engine, return_token_id_information=True, return_generation_log_probs=False) as url:
        status, body = await post(http, f"{url}/v1/responses", request)
        assert status == 200, body
        last = body["output"][-1]
        assert "generation_log_probs" not in last
        assert last["prompt_token_ids"] == with_log_probs["output"][-1]["prompt_token_ids"]
        assert last["generation_token_ids"] == with_log_probs["output"][-1]["generation_token_ids"]
        follow_up = {
            **request,
            "input": [*request["input"], *body["output"], {"role": "user", "content": "And?"}],
        }
        status, second = await post(http, f"{url}/v1/responses", follow_up)
        assert status == 200, second
        assert "generation_log_probs" not in second["output"][-1]
        status, chat = await post(
            http,
            f"{url}/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
        )
    assert status == 200, chat
    assert chat["choices"][0].get("logprobs") is None
    assert len(chat["choices"][0]["token_ids"]) == chat["usage"]["completion_tokens"]


async def test_chat_completions_with_token_ids(vllm_engine: VllmServer, http: aiohttp.ClientSession) -> None:
    messages = [{"role": "user", "content": "Hello"}]
    with serve_model(vllm_engine, return_token_id_information=True) as url:
        status, body = await post(http, f"{url}/v1/chat/completions", {"messages": messages, "max_tokens": 5})
    assert status == 200, body
    assert body["model"] == vllm_engine.model
    assert len(body["choices"][0]["token_ids"]) == len(body["choices"][0]["logprobs"]["content"])
    assert body["prompt_token_ids"]


async def test_context_overflow_is_an_incomplete_empty_response(
    vllm_engine: VllmServer, http: aiohttp.ClientSession
) -> None:
    request = {"input": "Paris " * 3000, "max_output_tokens": 16}
    with serve_model(vllm_engine) as url:
        status, body = await post(http, f"{url}/v1/responses", request)
        async with http.get(f"{url}/metrics") as response:
            metrics = await response.text()
    assert status == 200, body
    assert body["status"] == "incomplete"
    assert body["incomplete_details"]["reason"] == "context_length_exceeded"
    assert body["output"][0]["content"][0]["text"] == ""
    assert "ng_model_context_overflows_total 1.0" in metrics


async def test_startup_checks_against_real_vllm(vllm_engine: VllmServer) -> None:
    wrong_key = make_server(vllm_engine, api_key="not-the-key")
    with pytest.raises(ConfigError, match="401"):
        await wrong_key.upstream.start()
    await wrong_key.http.close()
    wrong_model = make_server(vllm_engine, model="Qwen/Qwen3-0.6B")
    with pytest.raises(ConfigError) as caught:
        await wrong_model.upstream.start()
    await wrong_model.http.close()
    assert repr(vllm_engine.model) in caught.value.message
