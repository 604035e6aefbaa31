"""A running collection follows an agent that moved (issue 42): restarted on another Ray node after
its own node was lost, the agent listens at a new address, which the head server lists.

Real servers on loopback: example_single_tool_call, simple_agent (twice: the first one is stopped,
the second one serves on another port), a scripted model, and the real head app whose `/servers`
lists where the agent is now. The move happens while rollouts remain: the collector's loop is held
(the test's own blocking calls run on it) from the moment a rollout's model call arrives until the
old agent has stopped and the head lists the new one, so every later rollout meets the old
address closed. The collector, which read the agent's URL once before, asks the head again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ng_cli.head import build_head_app
from ng_cli.rollouts import CollectConfig, collect_rollouts
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import ScriptedModel, assistant_message, function_call, serve_in_thread

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
Environment = load_server_class(REPO / "resources_servers" / "example_single_tool_call" / "app.py")
Agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
DATA = REPO / "resources_servers" / "example_single_tool_call" / "data" / "example.jsonl"
AGENT = "weather_agent"
REPEATS = 2
"""5 example rows x 2 = 10 rollouts, one at a time."""


class _Policy:
    """A tool call, then the answer; `reached` is set when the 3rd rollout's first call arrives."""

    def __init__(self) -> None:
        self.calls = 0
        self.reached = threading.Event()

    def __call__(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = [
            item
            for item in body["input"]
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if outputs:
            return [assistant_message(f"The weather: {outputs[-1]['output']}")]
        self.calls += 1
        if self.calls == 3:
            self.reached.set()
        return [function_call("get_weather", {"city": "Paris"})]


def _listing(url: str) -> list[dict[str, Any]]:
    return [
        {
            "name": AGENT,
            "server_type": "responses_api_agents",
            "implementation": "simple_agent",
            "url": url,
            "pid": 1,
            "is_ready": True,
        }
    ]


def _agent(servers: dict[str, ServerAddress], secret: str) -> Any:
    block = {
        "resources_server": {"type": "resources_servers", "name": "weather"},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
    }
    return Agent(Agent.config_class.model_validate(block), name=AGENT, servers=servers, session_secret=secret)


async def test_a_collection_follows_an_agent_that_moved_to_another_address(tmp_path: Path) -> None:
    secret = "s" * 32
    policy = _Policy()
    model = ScriptedModel(policy)
    environment = Environment(
        Environment.validate_config({}, instance="weather"), name="weather", session_secret=secret
    )
    with contextlib.ExitStack() as served:
        environment_url = served.enter_context(serve_in_thread(environment.build_app()))
        model_url = served.enter_context(serve_in_thread(model.build_app()))
        servers = {
            "weather": ServerAddress(
                server_type="resources_servers",
                implementation="example_single_tool_call",
                url=environment_url,
            ),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="scripted", url=model_url
            ),
        }
        first = contextlib.ExitStack()
        old_url = first.enter_context(serve_in_thread(_agent(servers, secret).build_app()))
        listed = _listing(old_url)
        head_url = served.enter_context(serve_in_thread(build_head_app(config={}, servers=lambda: listed)))
        config = CollectConfig(
            input_jsonl_fpath=DATA,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            head_server_url=head_url,
            agent_name=AGENT,
            num_repeats=REPEATS,
            num_samples_in_parallel=1,
            max_attempts=1,  # no retry to hide behind: a rollout sent to the old address fails for good
        )
        collection = asyncio.create_task(collect_rollouts(config, view=NullView()))
        await asyncio.to_thread(policy.reached.wait)
        # From here to the end of the block the collector's loop is held: rollout 3 is in flight on
        # the old agent, which finishes it before it stops; every later rollout meets it closed.
        new_url = served.enter_context(serve_in_thread(_agent(servers, secret).build_app()))
        listed[:] = _listing(new_url)
        first.close()
        result = await collection

    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    failures = tmp_path / "out_failures.jsonl"
    assert not failures.exists() or not failures.read_text().strip(), failures.read_text()
    pairs = sorted((row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows)
    assert pairs == [(task, rollout) for task in range(5) for rollout in range(REPEATS)]  # each once
    assert all(isinstance(row["reward"], int | float) for row in rows)
    assert result.failed == 0
    assert new_url != old_url
    assert policy.calls == 5 * REPEATS  # every rollout's first model call, none retried
