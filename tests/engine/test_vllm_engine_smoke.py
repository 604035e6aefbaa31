"""What the project relies on from the CPU vLLM serving the tiny model: auth, token ids, tool calls.

The weights are random, so the text is noise: tests assert on structure, or pin the output with
structured outputs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fixtures.vllm_engine import VllmServer

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
MESSAGES = [
    {"role": "system", "content": "You answer weather questions."},
    {"role": "user", "content": "What is the weather in Paris today?"},
]
TOOL_CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def _request(
    server: VllmServer, path: str, body: dict[str, Any] | None = None, *, api_key: str | None = None
) -> tuple[int, dict[str, Any]]:
    """POST ``body`` (GET without one) to ``root_url + path``; return the status and the JSON body."""
    key = server.api_key if api_key is None else api_key
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.root_url + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"{}")


def _chat(server: VllmServer, **fields: Any) -> dict[str, Any]:
    body = {"model": server.model, "messages": MESSAGES, "max_tokens": 8, "temperature": 0, **fields}
    status, reply = _request(server, "/v1/chat/completions", body)
    assert status == 200, reply
    return reply


def _token_id(server: VllmServer, text: str) -> int:
    _, reply = _request(server, "/tokenize", {"model": server.model, "prompt": text})
    (token,) = reply["tokens"]
    return int(token)


def test_models_lists_the_served_name(vllm_engine: VllmServer) -> None:
    status, reply = _request(vllm_engine, "/v1/models")
    assert status == 200
    assert [model["id"] for model in reply["data"]] == [vllm_engine.model]


@pytest.mark.parametrize("api_key", ["", "wrong-key"], ids=["no-key", "wrong-key"])
def test_models_rejects_a_missing_or_wrong_key(vllm_engine: VllmServer, api_key: str) -> None:
    status, _ = _request(vllm_engine, "/v1/models", api_key=api_key)
    assert status == 401


def test_digits_are_one_token_each(vllm_engine: VllmServer) -> None:
    _, reply = _request(vllm_engine, "/tokenize", {"model": vllm_engine.model, "prompt": "2024"})
    assert reply["count"] == 4


def test_chat_token_ids_match_tokenize(vllm_engine: VllmServer) -> None:
    reply = _chat(vllm_engine, tools=[WEATHER_TOOL], return_token_ids=True)
    # /tokenize lives at the root, outside vLLM's key-guarded prefixes (/v1, ...).
    _, tokenized = _request(
        vllm_engine,
        "/tokenize",
        {
            "model": vllm_engine.model,
            "messages": MESSAGES,
            "tools": [WEATHER_TOOL],
            "add_generation_prompt": True,
        },
    )
    assert reply["prompt_token_ids"] == tokenized["tokens"]
    completion_ids = reply["choices"][0]["token_ids"]
    assert len(completion_ids) == reply["usage"]["completion_tokens"] > 0


def test_logprobs_name_tokens_by_id(vllm_engine: VllmServer) -> None:
    reply = _chat(vllm_engine, logprobs=True, return_tokens_as_token_ids=True, return_token_ids=True)
    choice = reply["choices"][0]
    tokens = [entry["token"] for entry in choice["logprobs"]["content"]]
    assert tokens == [f"token_id:{token_id}" for token_id in choice["token_ids"]]


def test_structured_outputs_force_a_parsed_tool_call(vllm_engine: VllmServer) -> None:
    # The deterministic way to force a tool call in vLLM 0.32 with random weights: tools without
    # `strict`, tool_choice "auto" (the default with tools) and `structured_outputs.choice` (or
    # `.regex`) holding the Hermes text; the hermes parser then turns it into `tool_calls`.
    # Not usable here: a named tool_choice ({"type": "function", "function": {"name": ...}}) or
    # "required" pins the envelope but leaves the arguments free unless the tool says
    # `"strict": true` (random weights then write noise, or `true`); with strict they emit
    # whitespace until max_tokens. Structured outputs beside a named tool_choice are a 400.
    reply = _chat(
        vllm_engine,
        tools=[WEATHER_TOOL],
        structured_outputs={"choice": [TOOL_CALL_TEXT]},
        max_tokens=64,
        return_token_ids=True,
    )
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    # The turn ends with <|im_end|>, the only EOS, as the chat template closes assistant turns.
    # The ids in between need not be /tokenize's: constrained decoding picks its own split.
    assert choice["token_ids"][-1] == _token_id(vllm_engine, "<|im_end|>")


def test_chat_template_renders_tool_turns(vllm_engine: VllmServer) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21}'},
    ]
    _, tokenized = _request(
        vllm_engine,
        "/tokenize",
        {
            "model": vllm_engine.model,
            "messages": messages,
            "tools": [WEATHER_TOOL],
            "add_generation_prompt": True,
        },
    )
    _, text = _request(
        vllm_engine, "/detokenize", {"model": vllm_engine.model, "tokens": tokenized["tokens"]}
    )
    assert f"<|im_start|>assistant\n{TOOL_CALL_TEXT}<|im_end|>\n" in text["prompt"]
    assert (
        '<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>\n'
        in text["prompt"]
    )
    assert text["prompt"].endswith("<|im_start|>assistant\n")
