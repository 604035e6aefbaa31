"""The official `openai` SDK as the client of our model server and agent, over the real CPU vLLM.

What a user's harness does: `models.list`, `responses.create` and `chat.completions.create` with
tools, a second turn that sends the function call's output back, streaming and not, and the
error cases, asserting the SDK's typed objects and exception classes. With the training config,
the token-id fields must survive the SDK's parse (and its re-serialisation on the next turn).
The weights are random: the tests assert on structure, never on words.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseFunctionToolCall

from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.model_server import serve_model
from tests.fixtures.vllm_engine import VllmServer

REPO = Path(__file__).resolve().parents[2]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CHAT_WEATHER = {"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}
ASK = [
    {"role": "system", "content": "You answer weather questions."},
    {"role": "user", "content": "What is the weather in Paris today?"},
]
"""The prompt of tests/engine/test_vllm_model_engine.py, whose forced tool call the random
weights finish within 64 tokens (another prompt may run to the cap and leave unparsed text)."""
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


async def test_models_list_and_an_unknown_model(vllm_engine: VllmServer, sdk: Any) -> None:
    with serve_model(vllm_engine) as url:
        client = sdk(url)
        models = [model async for model in client.models.list()]
        assert [model.id for model in models] == [vllm_engine.model]
        assert (await client.models.retrieve(vllm_engine.model)).id == vllm_engine.model
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            await client.models.retrieve("no-such-model")


async def test_responses_tool_call_then_second_turn_with_token_ids(vllm_engine: VllmServer, sdk: Any) -> None:
    with serve_model(vllm_engine, return_token_id_information=True) as url:
        client = sdk(url)
        first = await client.responses.create(
            model="m",
            input=ASK,
            tools=[WEATHER],
            tool_choice={"type": "function", "name": "get_weather"},
            max_output_tokens=64,
            temperature=0,
        )
        assert isinstance(first, Response)
        (call,) = [item for item in first.output if isinstance(item, ResponseFunctionToolCall)]
        assert call.name == "get_weather"
        assert call.call_id
        last = first.output[-1].model_dump()
        assert all(last[field] for field in TOKEN_FIELDS)  # kept through the SDK's typed parse
        assert len(last["generation_token_ids"]) == len(last["generation_log_probs"])
        output = {"type": "function_call_output", "call_id": call.call_id, "output": '{"condition": "sunny"}'}
        second = await client.responses.create(
            model="m",
            input=[*ASK, *first.output, output],
            tools=[WEATHER],
            max_output_tokens=8,
            temperature=0,
        )
        streamed = await client.responses.create(
            model="m",
            input=[*ASK, *first.output, output],
            tools=[WEATHER],
            max_output_tokens=8,
            temperature=0,
            stream=True,
        )
        events = [event async for event in streamed]
    assert isinstance(second, Response)
    assert second.output
    second_last = second.output[-1].model_dump()
    # The second prompt starts with the first one: the history went back with its exact ids.
    assert second_last["prompt_token_ids"][: len(last["prompt_token_ids"])] == last["prompt_token_ids"]
    final = events[-1].response
    assert isinstance(final, Response)
    assert final.output[-1].model_dump()["prompt_token_ids"] == second_last["prompt_token_ids"]


async def test_chat_completions_tool_call_second_turn_and_stream(vllm_engine: VllmServer, sdk: Any) -> None:
    with serve_model(vllm_engine) as url:
        client = sdk(url)
        first = await client.chat.completions.create(
            model="m",
            messages=ASK,
            tools=[CHAT_WEATHER],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            max_tokens=64,
            temperature=0,
        )
        assert isinstance(first, ChatCompletion)
        (call,) = first.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather"
        history = [*ASK, first.choices[0].message.model_dump(exclude_none=True)]
        history.append({"role": "tool", "tool_call_id": call.id, "content": '{"condition": "sunny"}'})
        second = await client.chat.completions.create(
            model="m", messages=history, max_tokens=8, temperature=0
        )
        stream = await client.chat.completions.create(
            model="m", messages=history, max_tokens=8, temperature=0, stream=True
        )
        chunks = [chunk async for chunk in stream]
    assert second.choices[0].message.role == "assistant"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == second.choices[0].message.content  # same seedless greedy answer, streamed
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")


async def test_error_cases_raise_the_sdks_exception_classes(vllm_engine: VllmServer, sdk: Any) -> None:
    with serve_model(vllm_engine, return_token_id_information=True) as url:
        client = sdk(url)
        with pytest.raises(openai.BadRequestError, match="max_output_tokens"):
            await client.responses.create(model="m", input="hi", max_output_tokens=0)
        with pytest.raises(openai.BadRequestError, match="n=3"):
            await client.chat.completions.create(model="m", messages=ASK, n=3, max_tokens=4)
        with pytest.raises(openai.BadRequestError, match="input"):
            await client.responses.create(model="m", input=[{"type": "no_such_item"}])  # type: ignore[list-item]
        # Context overflow: vLLM's 400 becomes the seed's empty answer, marked and typed.
        overflow = await client.responses.create(model="m", input="weather " * 3000, max_output_tokens=16)
        assert overflow.status == "incomplete"
        assert overflow.incomplete_details is not None
        chat_overflow = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "weather " * 3000}], max_tokens=16
        )
        assert isinstance(chat_overflow, ChatCompletion)
        assert chat_overflow.choices[0].message.content in (None, "")


async def test_the_agent_through_the_sdk(vllm_engine: VllmServer, sdk: Any) -> None:
    """simple_agent over the real engine: one turn (forced tool call) streamed and not."""
    env_class = load_server_class(REPO / "resources_servers" / "example_single_tool_call" / "app.py")
    agent_class = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
    with ExitStack() as stack:
        model_url = stack.enter_context(serve_model(vllm_engine))
        env = env_class(env_class.validate_config({}, instance="weather"), name="weather")
        env_url = stack.enter_context(serve_in_thread(env.build_app()))
        config = agent_class.config_class.model_validate(
            {
                "resources_server": {"type": "resources_servers", "name": "weather"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
                "max_steps": 1,
            }
        )
        servers = {
            "weather": ServerAddress(server_type="resources_servers", implementation="x", url=env_url),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="x", url=model_url
            ),
        }
        agent_url = stack.enter_context(
            serve_in_thread(agent_class(config, name="agent", servers=servers).build_app())
        )
        client = sdk(agent_url)
        request: dict[str, Any] = {
            "model": "m",
            "input": ASK,
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "max_output_tokens": 64,
            "temperature": 0,
        }
        whole = await client.responses.create(**request)
        events = [event async for event in await client.responses.create(**request, stream=True)]
    assert isinstance(whole, Response)
    assert [item.type for item in whole.output] == ["function_call", "function_call_output"]
    final = events[-1].response
    assert [item.type for item in final.output] == ["function_call", "function_call_output"]
    assert final.output[0].model_dump()["arguments"] == whole.output[0].model_dump()["arguments"]
