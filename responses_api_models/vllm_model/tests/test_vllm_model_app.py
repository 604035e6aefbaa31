"""vllm_model over real sockets against the stub vLLM: conversion, token ids, overflow, errors, metrics."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.fixtures.served_model import STUB_MODEL, post, serve_model_server
from tests.fixtures.stub_vllm import StubVllm, prompt_ids, reply_ids

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[1] / "app.py"
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def model_block(base_url: str | list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "base_url": base_url,
        **STUB_MODEL,
        "health_probe_interval_s": 0.5,
        "backoff_s": 0.01,
        **overrides,
    }


def serve_model(block: dict[str, Any]) -> AbstractContextManager[str]:
    return serve_model_server(APP, block)


async def metrics_text(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(f"{url}/metrics") as response:
        assert response.status == 200
        return await response.text()


def metric_value(text: str, name: str) -> float:
    """Sum of a metric's samples across labels (0 if absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_text_response(stub_url: str, http: aiohttp.ClientSession) -> None:
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, body = await post(
            http, f"{url}/v1/responses", {"input": "hello there", "max_output_tokens": 64}
        )
    assert status == 200, body
    assert body["status"] == "completed"
    assert body["model"] == "stub-model"
    (message,) = body["output"]
    assert message["type"] == "message"
    assert message["content"][0]["text"] == "Echo: hello there"
    assert body["usage"]["output_tokens"] == len(reply_ids("Echo: hello there"))
    assert "prompt_token_ids" not in message


async def test_forced_tool_call(stub_url: str, http: aiohttp.ClientSession) -> None:
    request = {
        "input": [{"role": "user", "content": "Lyon"}],
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
    }
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, body = await post(http, f"{url}/v1/responses", request)
    assert status == 200, body
    (call,) = [item for item in body["output"] if item["type"] == "function_call"]
    assert call["name"] == "get_weather"
    assert orjson.loads(call["arguments"]) == {"city": "Lyon"}
    assert call["call_id"]


@pytest.mark.parametrize(
    ("fault", "source", "expected_tokenize_calls"),
    [("none", "auto", 0), ("old_vllm", "auto", 1), ("none", "tokenize", 1)],
    ids=["return_token_ids", "old-vllm-fallback", "forced-tokenize"],
)
async def test_token_ids_match_the_prompt_and_generation(
    stub: StubVllm,
    stub_url: str,
    http: aiohttp.ClientSession,
    fault: str,
    source: str,
    expected_tokenize_calls: int,
) -> None:
    stub.fault = fault
    block = model_block(f"{stub_url}/v1", return_token_id_information=True, token_id_source=source)
    with serve_model(block) as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "abc", "instructions": "be brief"})
    assert status == 200, body
    last = body["output"][-1]
    sent = stub.requests[-1]
    assert sent["logprobs"] is True
    assert ("return_token_ids" in sent) == (source == "auto")
    assert last["prompt_token_ids"] == prompt_ids(sent["messages"])
    assert last["generation_token_ids"] == reply_ids("Echo: abc")
    assert len(last["generation_log_probs"]) == len(last["generation_token_ids"])
    assert all(lp <= 0 for lp in last["generation_log_probs"])
    assert stub.calls["tokenize"] == expected_tokenize_calls


@pytest.mark.parametrize(
    ("forwarded", "template_kwargs"),
    [
        (False, {"enable_thinking": False, "add_generation_prompt": True}),  # NeMo Gym's default
        (True, {"enable_thinking": True, "add_generation_prompt": True}),
    ],
)
async def test_chat_completions_applies_config_under_the_request(
    stub: StubVllm,
    stub_url: str,
    http: aiohttp.ClientSession,
    forwarded: bool,
    template_kwargs: dict[str, bool],
) -> None:
    """The request's own keys win over extra_body; its own chat_template_kwargs only with
    forward_request_chat_template_kwargs (NeMo Gym 0.7.0's key and default)."""
    block = model_block(
        f"{stub_url}/v1",
        chat_template_kwargs={"enable_thinking": False, "add_generation_prompt": True},
        extra_body={"repetition_penalty": 1.1, "min_tokens": 2},
        forward_request_chat_template_kwargs=forwarded,
    )
    request = {
        "model": "whatever-the-caller-says",
        "messages": [{"role": "user", "content": "hi"}],
        "min_tokens": 5,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    with serve_model(block) as url:
        status, body = await post(http, f"{url}/v1/chat/completions", request)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "Echo: hi"
    sent = stub.requests[-1]
    assert sent["model"] == "stub-model"
    assert sent["repetition_penalty"] == 1.1
    assert sent["min_tokens"] == 5
    assert sent["chat_template_kwargs"] == template_kwargs
    assert "logprobs" not in sent


async def test_chat_completions_with_token_ids(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    stub.fault = "old_vllm"
    block = model_block(f"{stub_url}/v1", return_token_id_information=True)
    messages = [{"role": "user", "content": "xyz"}]
    with serve_model(block) as url:
        status, body = await post(http, f"{url}/v1/chat/completions", {"messages": messages})
    assert status == 200, body
    assert body["prompt_token_ids"] == prompt_ids(messages)
    first_logprob = body["choices"][0]["logprobs"]["content"][0]
    assert first_logprob["token"].startswith("token_id:")


async def test_context_overflow_is_an_incomplete_empty_response_and_counted(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    stub.max_model_len = 64
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "x" * 200})
        chat_status, chat = await post(
            http, f"{url}/v1/chat/completions", {"messages": [{"role": "user", "content": "y" * 200}]}
        )
        metrics = await metrics_text(http, url)
    assert status == 200, body
    assert body["status"] == "incomplete"
    assert body["incomplete_details"]["reason"] == "context_length_exceeded"
    assert "maximum context length is 64" in body["incomplete_details"]["message"]
    (message,) = body["output"]
    assert message["content"][0]["text"] == ""
    assert chat_status == 200
    assert chat["choices"][0]["message"]["content"] is None
    assert metric_value(metrics, "ng_model_context_overflows_total") == 2
    assert stub.calls["chat"] == 2


async def test_other_400_is_returned_with_vllm_message_and_not_retried(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    stub.fault = "bad_request"
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "hi"})
        metrics = await metrics_text(http, url)
    assert status == 400
    assert body["error"]["message"] == "temperature must be non-negative, got -1.0."
    assert stub.calls["chat"] == 1
    assert metric_value(metrics, "ng_model_retries_total") == 0


async def test_a_500_is_retried_and_succeeds(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    stub.fault, stub.fault_times = "error_500", 1
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "again"})
        metrics = await metrics_text(http, url)
    assert status == 200, body
    assert stub.calls["chat"] == 2
    assert metric_value(metrics, "ng_model_retries_total") == 1
    assert (
        'ng_model_upstream_requests_total{endpoint="' + stub_url + '/v1",outcome="server_error"} 1.0'
        in metrics
    )


async def test_persistent_500_gives_up_after_max_attempts(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    stub.fault = "error_500"
    with serve_model(model_block(f"{stub_url}/v1", max_attempts=2)) as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "x"})
    assert status == 502
    assert "500" in body["error"]["message"]
    assert stub.calls["chat"] == 2


async def test_vllm_reasoning_parser_is_a_502(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    stub.fault = "reasoning"
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, body = await post(http, f"{url}/v1/responses", {"input": "x"})
    assert status == 502
    assert "reasoning-parser" in body["error"]["hint"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [({"input": 5}, "input"), ({"input": "x", "n": 3}, "n=3")],
)
async def test_bad_requests_are_400_and_never_reach_vllm(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession, body: dict[str, Any], fragment: str
) -> None:
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        status, answer = await post(http, f"{url}/v1/responses", body)
    assert status == 400, answer
    assert fragment in answer["error"]["message"]
    assert stub.calls["chat"] == 0


async def test_metrics_expose_tokens_latency_health(stub_url: str, http: aiohttp.ClientSession) -> None:
    with serve_model(model_block(f"{stub_url}/v1")) as url:
        await post(http, f"{url}/v1/responses", {"input": "count me"})
        metrics = await metrics_text(http, url)
    assert metric_value(metrics, "ng_model_completion_tokens_total") == len(reply_ids("Echo: count me"))
    assert metric_value(metrics, "ng_model_prompt_tokens_total") > 0
    assert metric_value(metrics, "ng_model_upstream_request_seconds_count") == 1
    assert metric_value(metrics, "ng_model_endpoint_healthy") == 1
    assert metric_value(metrics, "ng_model_in_flight") == 0
    assert "stub-key" not in metrics


async def test_sampling_overrides_and_default_headers_reach_vllm_on_both_routes(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    block = model_block(
        f"{stub_url}/v1",
        sampling_overrides={"temperature": 0.6, "top_p": 0.95},
        default_headers={"X-Run": "rl-7", "Authorization": "Bearer not-this"},
    )
    with serve_model(block) as url:
        status, _ = await post(http, f"{url}/v1/responses", {"input": "hi", "temperature": 1.3})
        assert status == 200
        status, _ = await post(
            http, f"{url}/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}
        )
        assert status == 200
    for body in list(stub.requests)[-2:]:
        assert (body["temperature"], body["top_p"]) == (0.6, 0.95)  # the server decides, not the caller
    for headers in list(stub.headers)[-2:]:
        assert headers["x-run"] == "rl-7"
        assert headers["authorization"] == "Bearer stub-key"


async def test_reasoning_goes_back_as_fields_with_the_parser(
    stub: StubVllm, stub_url: str, http: aiohttp.ClientSession
) -> None:
    turn = [
        {"role": "user", "content": "q"},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "B"}],
        },
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "q2"},
    ]
    with serve_model(model_block(f"{stub_url}/v1", uses_reasoning_parser=True)) as url:
        status, _ = await post(http, f"{url}/v1/responses", {"input": turn})
    assert status == 200
    assistant = stub.requests[-1]["messages"][1]
    assert assistant == {  # the first part only, as NeMo Gym sends it
        "role": "assistant",
        "content": "a",
        "reasoning_content": "A",
        "reasoning": "A",
    }
