"""An agent (or an environment calling its judge) follows a server that moved (issue 29): restarted on another Ray node after its own
node was lost, the resources server listens at a new address; the agent still holds the old one.

Real servers on loopback: example_single_tool_call, simple_agent, a scripted model, and the real
head app (`build_head_app`) whose `/servers` lists where each server is now, as ng_run's does
after a re-placement. The old address is a port nothing listens on.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fastapi import FastAPI

from ng_cli.config.schema import ResourcesServerConfig, ServerRef
from ng_cli.errors import UpstreamUnavailableError
from ng_cli.head import build_head_app
from ng_cli.servers import ResourcesServer, RetryPolicy
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import assistant_message, function_call, serve_in_thread, serve_rollout_stack

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
Environment = load_server_class(REPO / "resources_servers" / "example_single_tool_call" / "app.py")
Agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
ROW = json.loads(
    (REPO / "resources_servers/example_single_tool_call/data/example.jsonl").read_text().splitlines()[0]
)


def _policy(body: dict[str, Any]) -> list[dict[str, Any]]:
    outputs = [
        item
        for item in body["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    if not outputs:
        return [function_call("get_weather", {"city": "Paris"})]
    return [assistant_message(f"Paris: {json.loads(outputs[-1]['output'])}")]


def _dead_url() -> str:
    """An address nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _run(agent_url: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{agent_url}/run", data=json.dumps(ROW).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_an_agent_whose_environment_moved_asks_the_head_and_scores_there() -> None:
    with serve_rollout_stack(Environment, Agent, _policy, resources_name="weather") as stack:
        moved_to = stack.resources_url
        old = stack.agent.servers["weather"]
        stack.agent.servers["weather"] = old.model_copy(
            update={"url": _dead_url()}
        )  # its view before the move
        listed = [{"name": "weather", "url": moved_to, "is_ready": True}]
        with serve_in_thread(build_head_app(config={}, servers=lambda: listed)) as head_url:
            stack.agent.head_url = head_url
            status, verdict = _run(stack.agent_url)
        assert status == 200, verdict
        assert verdict["reward"] == 1.0
        assert stack.agent.servers["weather"].url == moved_to  # followed, for the calls after this one


def test_without_a_head_that_knows_better_the_old_address_fails_as_unavailable() -> None:
    """The control: the same stale address, no head to ask: the rollout fails, typed."""
    with serve_rollout_stack(Environment, Agent, _policy, resources_name="weather") as stack:
        dead = _dead_url()
        stack.agent.servers["weather"] = stack.agent.servers["weather"].model_copy(update={"url": dead})
        stack.agent.head_url = None
        status, answer = _run(stack.agent_url)
    assert status == 503, answer
    assert answer["error"]["type"] == "UpstreamUnavailableError"
    assert dead in json.dumps(answer)
    assert stack.model.requests == []  # it failed at seed_session, before any model call


def _judge_app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/responses")
    async def responses(body: dict[str, Any]) -> dict[str, Any]:
        return {"echo": body}

    return app


async def test_an_environment_whose_judge_moved_calls_it_at_its_new_address() -> None:
    """`post_json_to` (environments calling a judge, agents their model and environment): the
    judge's old address refuses; the head lists the new one; the call lands there, retried once."""
    judge = ServerRef(type="responses_api_models", name="judge")
    with serve_in_thread(_judge_app()) as moved_to:
        server = ResourcesServer(
            ResourcesServerConfig(),
            name="env",
            servers={
                "judge": ServerAddress(server_type=judge.type, implementation="vllm_model", url=_dead_url())
            },
        )
        listed = [{"name": "judge", "url": moved_to, "is_ready": True}]
        with serve_in_thread(build_head_app(config={}, servers=lambda: listed)) as head_url:
            server.head_url = head_url
            answer = await server.post_json_to(
                judge, "/v1/responses", {"input": "2+2"}, retry=RetryPolicy(max_attempts=2)
            )
        assert answer == {"echo": {"input": "2+2"}}
        assert server.servers["judge"].url == moved_to

        server.servers["judge"] = server.servers["judge"].model_copy(update={"url": _dead_url()})
        server.head_url = None  # the control: nobody to ask, the old address's failure stands
        with pytest.raises(UpstreamUnavailableError):
            await server.post_json_to(judge, "/v1/responses", {"input": "2+2"})
        await server.http.close()


async def test_a_nemo_gym_server_client_follows_a_judge_that_moved() -> None:
    """NeMo Gym's `server_client.post(server_name=...)` (the compatibility layer's): the config's
    address refuses, the head lists the new one, the call lands there; the control, a head that
    lists the same dead address, leaves the connection error standing."""
    from ng_cli.nemo_gym_compat.api.server_utils import ServerClient, close_client_session

    dead_port = int(_dead_url().rsplit(":", 1)[1])
    with serve_in_thread(_judge_app()) as moved_to:
        listed = [{"name": "judge", "url": moved_to, "is_ready": True}]
        with serve_in_thread(build_head_app(config={}, servers=lambda: listed)) as head_url:
            client = ServerClient.model_validate(
                {
                    "head_server_config": {"host": "127.0.0.1", "port": int(head_url.rsplit(":", 1)[1])},
                    "global_config_dict": {
                        "judge": {"responses_api_models": {"x": {"host": "127.0.0.1", "port": dead_port}}}
                    },
                }
            )
            try:
                answer = await client.post(
                    server_name="judge", url_path="/v1/responses", json={"input": "2+2"}
                )
                assert (answer.status, await answer.json()) == (200, {"echo": {"input": "2+2"}})
                listed[0]["url"] = f"http://127.0.0.1:{dead_port}"
                stale = ServerClient.model_validate(client.model_dump())
                with pytest.raises(aiohttp.ClientConnectionError):
                    await stale.post(server_name="judge", url_path="/v1/responses", json={"input": "2+2"})
            finally:
                await close_client_session()
