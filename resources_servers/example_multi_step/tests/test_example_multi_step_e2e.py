"""example_multi_step end to end: a chain of dependent tool calls through simple_agent on loopback."""

from __future__ import annotations

import asyncio
import re
from decimal import Decimal
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


def asked_name(request: dict[str, Any]) -> str:
    question = next(item["content"] for item in request["input"] if item.get("role") == "user")
    match = re.search(r"all of (\w+)'s orders", question)
    assert match, question
    return match.group(1)


def chain_policy(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Follows the ids the tools hand out; asks for every order total in one turn."""
    outputs = tool_outputs(request)
    if not outputs:
        return [function_call("get_user_id", {"name": asked_name(request)})]
    last = outputs[-1]
    if "user_id" in last and "order_ids" not in last:
        return [function_call("get_orders", {"user_id": last["user_id"]})]
    if "order_ids" in last:
        return [function_call("get_order_total", {"order_id": order}) for order in last["order_ids"]]
    total = sum((Decimal(str(o["total"])) for o in outputs if "total" in o), Decimal("0"))
    return [assistant_message(f"All orders add up to ${total:.2f}.")]


async def test_following_the_chain_earns_full_reward_on_every_row(client: HttpClient) -> None:
    with serve_rollout_stack(Environment, Agent, chain_policy) as stack:
        results = await asyncio.gather(*(client.post_json(f"{stack.agent_url}/run", row) for row in ROWS))
        assert stack.resources.trails == {}  # verify forgot every session
    for row, result in zip(ROWS, results, strict=True):
        assert result["reward"] == 1.0, (row["user_name"], result)
        calls = [item["name"] for item in result["response"]["output"] if item["type"] == "function_call"]
        orders = len(calls) - 2
        assert calls == ["get_user_id", "get_orders"] + ["get_order_total"] * orders
        assert result["tool_calls"] == len(calls)


async def test_skipping_the_id_lookup_earns_nothing_despite_the_right_total(client: HttpClient) -> None:
    def shortcut(request: dict[str, Any]) -> list[dict[str, Any]]:
        if not tool_outputs(request):  # a guessed user id instead of get_user_id
            return [function_call("get_orders", {"user_id": "u-103"})]
        return chain_policy(request)

    with serve_rollout_stack(Environment, Agent, shortcut) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[2])
    assert result["user_name"] == "Carol"
    assert (result["reward"], result["answer_correct"], result["valid_order"]) == (0.0, 1.0, 0.0)


async def test_a_failed_lookup_is_shown_to_the_model_which_can_recover(client: HttpClient) -> None:
    def typo_first(request: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = tool_outputs(request)
        if not outputs:
            return [function_call("get_user_id", {"name": "Alcie"})]
        if len(outputs) == 1:
            assert outputs[0] == {"error": "no user named 'Alcie'"}
            return [function_call("get_user_id", {"name": "Alice"})]
        return chain_policy(request)

    with serve_rollout_stack(Environment, Agent, typo_first) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[0])
    assert result["reward"] == 1.0
