"""example_single_tool_call end to end: environment, simple_agent and a scripted model on loopback."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.servers import HttpClient
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import (
    RolloutStack,
    assistant_message,
    function_call,
    serve_rollout_stack,
    tool_outputs,
)

pytestmark = pytest.mark.integration

ENV_DIR = Path(__file__).resolve().parents[1]
REPO = ENV_DIR.parents[1]
Environment = load_server_class(ENV_DIR / "app.py")
Agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
ROWS = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]


def first_user_text(request: dict[str, Any]) -> str:
    return next(item["content"] for item in request["input"] if item.get("role") == "user")


def correct_policy(request: dict[str, Any]) -> list[dict[str, Any]]:
    outputs = tool_outputs(request)
    if not outputs:
        city = re.search(r"weather in (.+?) right now", first_user_text(request))
        assert city
        return [function_call("get_weather", {"city": city.group(1)})]
    weather = outputs[-1]
    return [
        assistant_message(
            f"In {weather['city']} it is {weather['condition']}, {weather['temperature']} degrees."
        )
    ]


def guessing_policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
    return [assistant_message("It is probably mild, around 21 degrees.")]


@pytest.fixture
def correct_stack() -> Iterator[RolloutStack]:
    with serve_rollout_stack(
        Environment, Agent, correct_policy, resources_name="example_single_tool_call"
    ) as stack:
        yield stack


async def test_a_correct_policy_earns_full_reward_on_every_example_row(
    correct_stack: RolloutStack, client: HttpClient
) -> None:
    results = await asyncio.gather(*(client.post_json(f"{correct_stack.agent_url}/run", row) for row in ROWS))
    assert [result["reward"] for result in results] == [1.0] * len(ROWS)
    for row, result in zip(ROWS, results, strict=True):
        kinds = [item["type"] for item in result["response"]["output"]]
        assert kinds == ["function_call", "function_call_output", "message"]
        assert result["expected_city"] == row["expected_city"]
    assert len(correct_stack.model.requests) == 2 * len(ROWS)


async def test_a_guessing_policy_earns_nothing(client: HttpClient) -> None:
    with serve_rollout_stack(Environment, Agent, guessing_policy) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[0])
    assert result["reward"] == 0.0
    assert [item["type"] for item in result["response"]["output"]] == ["message"]


async def test_an_unknown_city_reaches_the_model_as_a_tool_output(client: HttpClient) -> None:
    def policy(request: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = tool_outputs(request)
        if not outputs:
            return [function_call("get_weather", {"city": "Atlantis"})]
        return [assistant_message(f"The tool said: {outputs[-1]['error']}")]

    with serve_rollout_stack(Environment, Agent, policy) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[0])
        second_request = stack.model.requests[1]
    assert result["reward"] == 0.0
    error = tool_outputs(second_request)[0]["error"]
    assert "unknown city 'Atlantis'" in error
