"""example_stateful_counter end to end: 50 concurrent rollouts, each with its own counter."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.servers import HttpClient
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import assistant_message, function_call, serve_rollout_stack, tool_outputs

pytestmark = pytest.mark.integration

ENV_DIR = Path(__file__).resolve().parents[1]
Environment = load_server_class(ENV_DIR / "app.py")
Agent = load_server_class(ENV_DIR.parents[1] / "responses_api_agents" / "simple_agent" / "app.py")
ROWS = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]


def asked_steps(request: dict[str, Any]) -> list[int]:
    question = next(item["content"] for item in request["input"] if item.get("role") == "user")
    return [
        int(n) if verb.lower() == "add" else -int(n)
        for verb, n in re.findall(r"(add|subtract) (\d+)", question, re.I)
    ]


def obedient_policy(request: dict[str, Any]) -> list[dict[str, Any]]:
    """One increment per turn as asked, then get_count, then report it."""
    steps, outputs = asked_steps(request), tool_outputs(request)
    if len(outputs) < len(steps):
        return [function_call("increment", {"by": steps[len(outputs)]})]
    if len(outputs) == len(steps):
        return [function_call("get_count", {})]
    return [assistant_message(f"The count is {outputs[-1]['count']}.")]


def counter_row(index: int) -> dict[str, Any]:
    steps = [index + 1, -(index % 4), 2 * index]
    said = ", then ".join(f"{'add' if s >= 0 else 'subtract'} {abs(s)}" for s in steps)
    row = dict(ROWS[0])
    row["responses_create_params"] = {
        **ROWS[0]["responses_create_params"],
        "input": [{"role": "user", "content": f"The counter starts at {index}. {said}."}],
    }
    return {**row, "initial_count": index, "expected_count": index + sum(steps)}


async def test_the_example_rows_earn_full_reward(client: HttpClient) -> None:
    with serve_rollout_stack(Environment, Agent, obedient_policy) as stack:
        results = await asyncio.gather(*(client.post_json(f"{stack.agent_url}/run", row) for row in ROWS))
    assert [(r["reward"], r["final_count"]) for r in results] == [
        (1.0, row["expected_count"]) for row in ROWS
    ]


async def test_fifty_concurrent_rollouts_never_see_each_others_counts(client: HttpClient) -> None:
    rows = [counter_row(index) for index in range(50)]
    with serve_rollout_stack(Environment, Agent, obedient_policy) as stack:
        results = await asyncio.gather(*(client.post_json(f"{stack.agent_url}/run", row) for row in rows))
        assert stack.resources.counts == {}
    for row, result in zip(rows, results, strict=True):
        assert result["final_count"] == row["expected_count"], row["initial_count"]
        assert result["reward"] == 1.0
        counts = [
            orjson.loads(i["output"])["count"]
            for i in result["response"]["output"]
            if i["type"] == "function_call_output"
        ]
        running = [row["initial_count"]]
        for step in asked_steps(row["responses_create_params"]):
            running.append(running[-1] + step)
        assert counts == [*running[1:], row["expected_count"]]


async def test_doing_the_wrong_thing_earns_nothing_whatever_the_model_says(client: HttpClient) -> None:
    def liar(request: dict[str, Any]) -> list[dict[str, Any]]:
        if not tool_outputs(request):
            return [function_call("increment", {"by": 1})]
        return [assistant_message("The count is 7.")]

    with serve_rollout_stack(Environment, Agent, liar) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[0])
    assert ROWS[0]["expected_count"] == 7
    assert (result["reward"], result["final_count"]) == (0.0, 1)


async def test_an_out_of_range_increment_reaches_the_model_and_changes_nothing(client: HttpClient) -> None:
    def policy(request: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = tool_outputs(request)
        if not outputs:
            return [function_call("increment", {"by": 10**6}), function_call("increment", {"by": "three"})]
        return [assistant_message(str(outputs))]

    with serve_rollout_stack(Environment, Agent, policy) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[4])
        errors = [o["error"] for o in tool_outputs(stack.model.requests[1])]
    assert "'by' must be between -1000 and 1000" in errors[0]
    assert "invalid arguments for tool 'increment'" in errors[1]
    assert (result["reward"], result["final_count"]) == (1.0, 100)
