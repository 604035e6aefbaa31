"""simple_agent's `/v1/responses` with `stream: true`, and cancellation of `/run`.

Real servers on loopback: the stub vLLM, vllm_model over it, example_single_tool_call, and the
agent. The stream is parsed by the official `openai` SDK; a `/run` whose client goes away must
cancel the model call it is waiting on (the model server counts the abort).
"""

from __future__ import annotations

import asyncio
import re
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@dataclass
class Stack:
    agent_url: str
    model_url: str
    stub: StubVllm


@contextmanager
def serve_stack(stub: StubVllm, max_event_bytes: int | None = None, **agent_config: Any) -> Iterator[Stack]:
    model_class = load_server_class(REPO / "responses_api_models" / "vllm_model" / "app.py")
    env_class = load_server_class(REPO / "resources_servers" / "example_single_tool_call" / "app.py")
    agent_class = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
    with ExitStack() as stack:
        stub_url = stack.enter_context(serve_in_thread(stub.build_app()))
        block = {"base_url": f"{stub_url}/v1", "api_key": "stub-key", "model": "stub-model",
                 "return_token_id_information": True, "uses_reasoning_parser": False}  # fmt: skip
        model = model_class(validate_block(model_class.config_class, block=block), name="policy_model")
        model_url = stack.enter_context(serve_in_thread(model.build_app()))
        env = env_class(env_class.validate_config({}, instance="weather"), name="weather")
        env_url = stack.enter_context(serve_in_thread(env.build_app()))
        servers = {
            "weather": ServerAddress(server_type="resources_servers", implementation="x", url=env_url),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="x", url=model_url
            ),
        }
        config = agent_class.config_class.model_validate(
            {
                "resources_server": {"type": "resources_servers", "name": "weather"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
                **agent_config,
            }
        )
        agent = agent_class(config, name="agent", servers=servers)
        if max_event_bytes is not None:
            agent.http.max_event_bytes = max_event_bytes  # the longest event line it reads
        yield Stack(stack.enter_context(serve_in_thread(agent.build_app())), model_url, stub)


async def test_the_agent_streams_every_turn_and_tool_output_to_the_sdk() -> None:
    with serve_stack(StubVllm(), max_steps=2) as stack:
        async with openai.AsyncOpenAI(base_url=f"{stack.agent_url}/v1", api_key="x", max_retries=0) as client:
            streamed = await client.responses.create(
                model="m",
                input="weather in Paris?",
                tools=[WEATHER],
                tool_choice="required",
                stream=True,
                max_output_tokens=200,
            )
            events = [event async for event in streamed]
            whole = await client.responses.create(
                model="m",
                input="weather in Paris?",
                tools=[WEATHER],
                tool_choice="required",
                max_output_tokens=200,
            )
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.incomplete"  # max_steps, as without streaming
    final = events[-1].response
    assert [item.type for item in final.output] == [item.type for item in whole.output]
    assert [item.type for item in final.output] == ["function_call", "function_call_output"] * 2
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == [0, 1, 2, 3]  # the second turn's items come after the first's
    assert [e.item.type for e in added] == ["function_call", "function_call_output"] * 2
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output[-2].model_dump()["generation_token_ids"]  # training fields survive the relay


async def test_a_model_turn_cut_off_upstream_ends_the_agents_stream_with_an_error() -> None:
    """vLLM's stream closes without `[DONE]` after two tokens. Before: the model server called the
    cut text `completed`, and so did the agent's stream, as a finished rollout."""
    with serve_stack(StubVllm(fault="stream_truncated"), max_steps=2) as stack:
        async with openai.AsyncOpenAI(base_url=f"{stack.agent_url}/v1", api_key="x", max_retries=0) as client:
            streamed = await client.responses.create(model="m", input="weather in Paris?", stream=True)
            seen: list[str] = []

            async def read_all() -> None:
                async for event in streamed:
                    seen.append(event.type)

            with pytest.raises(openai.APIError, match="ended its event stream before it was complete"):
                await read_all()
    assert "response.output_text.delta" in seen  # the cut text had been relayed
    assert not {"response.completed", "response.incomplete"} & set(seen)


async def test_a_model_turn_whose_final_event_is_over_512_kib_streams_through_the_agent() -> None:
    """The model server's `response.completed` carries a 200k-token prompt's ids: one ~800 KB line
    in the middle of the agent's reading. Before: aiohttp's `LineTooLong` cut the agent's stream."""
    messages: list[Any] = [{"role": "user", "content": "y" * 200_000}, {"role": "user", "content": "hi"}]
    with serve_stack(StubVllm(max_model_len=300_000), max_steps=1) as stack:
        async with openai.AsyncOpenAI(base_url=f"{stack.agent_url}/v1", api_key="x", max_retries=0) as client:
            events = [e async for e in await client.responses.create(model="m", input=messages, stream=True)]
    assert events[-1].type == "response.completed"
    ids = events[-1].response.output[-1].model_dump()["prompt_token_ids"]
    assert len(ids) > 200_000


async def test_a_model_event_over_the_line_limit_mid_stream_ends_the_agents_stream_with_an_error() -> None:
    """The model's final event is over what the agent reads (64 MiB by default; 4 KiB here), after
    its deltas were relayed: the agent's stream ends with an error event that says why. Before:
    aiohttp's `LineTooLong` cut the stream with no event at all."""
    messages: list[Any] = [{"role": "user", "content": "y" * 5_000}, {"role": "user", "content": "hi"}]
    with serve_stack(StubVllm(max_model_len=20_000), max_event_bytes=4096, max_steps=1) as stack:
        async with openai.AsyncOpenAI(base_url=f"{stack.agent_url}/v1", api_key="x", max_retries=0) as client:
            streamed = await client.responses.create(model="m", input=messages, stream=True)
            seen: list[str] = []

            async def read_all() -> None:
                async for event in streamed:
                    seen.append(event.type)

            with pytest.raises(openai.APIError, match="streamed an event line of more than 4096 bytes"):
                await read_all()
    assert "response.output_text.delta" in seen


async def test_a_cancelled_run_cancels_its_model_call() -> None:
    stub = StubVllm(delay_s=30.0)  # the model "generates" for 30 s
    row = {"responses_create_params": {"input": "weather in Paris?", "tools": [WEATHER]}}
    with serve_stack(stub) as stack:
        async with aiohttp.ClientSession() as http:
            run = asyncio.create_task(http.post(f"{stack.agent_url}/run", json=row))
            await _until_true(lambda: stub.calls["chat"] > 0)  # the call reached the upstream
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run

        def aborted_and_drained() -> bool:
            """The abort travels agent -> model server -> (closed connection) upstream; the abort
            count and the in-flight gauge move at different moments, so both are waited for."""
            aborted = _metric(stack.model_url, "ng_model_aborted_requests_total")
            assert aborted <= 1, f"{aborted} aborts counted for one cancelled run"
            return aborted == 1 and _metric(stack.model_url, 'ng_model_in_flight{endpoint="[^"]+"}') == 0

        await _until_true(aborted_and_drained)


def _metric(url: str, pattern: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    match = re.search(rf"^{pattern} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match[1]) if match else 0.0


async def test_a_cancelled_run_cancels_its_tool_call() -> None:
    """The model asks for a tool that takes 30 s; the client gives up during it: the tool's
    handler on the resources server is cancelled (the abort reaches it through the agent)."""
    from ng_cli.config.schema import ResourcesServerConfig
    from ng_cli.servers import ResourcesServer, tool
    from ng_cli.servers.testing import function_call, serve_rollout_stack

    started, cancelled = threading.Event(), threading.Event()  # the servers run in other threads

    class SlowTool(ResourcesServer[ResourcesServerConfig]):
        config_class = ResourcesServerConfig

        @tool
        async def slow(self, _session_id: str, _args: dict[str, Any]) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return {}

        async def verify(self, _session_id: str, _request: Any) -> float:
            return 0.0

    slow_tool = {"type": "function", "name": "slow", "parameters": {"type": "object", "properties": {}}}
    agent_class = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
    row = {"responses_create_params": {"input": "go", "tools": [slow_tool]}}
    with serve_rollout_stack(SlowTool, agent_class, lambda _body: [function_call("slow", {})]) as stack:
        async with aiohttp.ClientSession() as http:
            run = asyncio.create_task(http.post(f"{stack.agent_url}/run", json=row))
            await _until(started)
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
        await _until(cancelled)  # well before the tool's 30 s


async def _until(event: threading.Event) -> None:
    await _until_true(event.is_set)


async def _until_true(condition: Callable[[], bool], *, within_s: float = 60.0) -> None:
    """Wait for a condition set by another thread or process; `within_s` caps a hang (generous:
    CI runs on 2 busy cores), it is not a measurement."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not await asyncio.to_thread(condition):
        if loop.time() > deadline:
            pytest.fail(f"the condition never held within {within_s} s")
        await asyncio.sleep(0.02)
