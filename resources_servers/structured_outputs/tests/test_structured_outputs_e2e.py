"""structured_outputs end to end: JSON answers scored through simple_agent on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.servers import HttpClient
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import assistant_message, serve_rollout_stack

pytestmark = pytest.mark.integration

ENV_DIR = Path(__file__).resolve().parents[1]
Environment = load_server_class(ENV_DIR / "app.py")
Agent = load_server_class(ENV_DIR.parents[1] / "responses_api_agents" / "simple_agent" / "app.py")
ROWS = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]

ANSWERS: dict[str, Any] = {
    "person": {"name": "Ada Lovelace", "birth_year": 1815},
    "city_list": {
        "cities": [
            {"city": c, "country": k} for c, k in [("Paris", "France"), ("Rome", "Italy"), ("Oslo", "Norway")]
        ]
    },
    "ticket": {"category": "bug", "priority": "high", "summary": "App crashes on photo upload"},
    "event": {"date": "2025-03-14", "location": "Lisbon", "duration_minutes": 90},
    "recipe": {"title": "Pancakes", "servings": 4, "ingredients": [{"item": "flour", "quantity": "200 g"}]},
}


def format_name(request: dict[str, Any]) -> str:
    return str(request["text"]["format"]["name"])


async def run_all(policy: Any, client: HttpClient) -> list[dict[str, Any]]:
    with serve_rollout_stack(Environment, Agent, policy) as stack:
        results = await asyncio.gather(*(client.post_json(f"{stack.agent_url}/run", row) for row in ROWS))
        for request in stack.model.requests:
            assert request["text"]["format"]["type"] == "json_schema"  # the agent forwards the format
    return results


async def test_schema_conforming_answers_earn_full_reward(client: HttpClient) -> None:
    results = await run_all(
        lambda request: [assistant_message(orjson.dumps(ANSWERS[format_name(request)]).decode())], client
    )
    assert [result["reward"] for result in results] == [1.0] * len(ROWS)
    assert all("reason" not in result for result in results)


async def test_fenced_json_earns_nothing_with_a_reason(client: HttpClient) -> None:
    def fenced(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            assistant_message("```json\n" + orjson.dumps(ANSWERS[format_name(request)]).decode() + "\n```")
        ]

    results = await run_all(fenced, client)
    assert [result["reward"] for result in results] == [0.0] * len(ROWS)
    assert all(result["reason"].startswith("the final message is not valid JSON") for result in results)


async def test_json_that_breaks_the_schema_earns_nothing(client: HttpClient) -> None:
    def sloppy(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [assistant_message(orjson.dumps({**ANSWERS[format_name(request)], "extra": True}).decode())]

    results = await run_all(sloppy, client)
    assert [result["reward"] for result in results] == [0.0] * len(ROWS)
    assert all("Additional properties are not allowed" in result["reason"] for result in results)
