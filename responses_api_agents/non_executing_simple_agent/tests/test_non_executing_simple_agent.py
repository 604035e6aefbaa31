"""non_executing_simple_agent on loopback: one model call, its tool calls never run, its Response
verified as it came.

A scripted model answers NeMo Gym's own structured_outputs v4 rows (copies in
tests/fixtures/nemo_gym/); the streaming test runs the real vllm_model over the stub vLLM.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import function_call, serve_in_thread, serve_rollout_stack
from tests.fixtures.served_model import STUB_MODEL, VLLM_MODEL_APP, serve_model_server
from tests.fixtures.structured_answers import answer, instance
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")
Environment = load_server_class(REPO / "resources_servers" / "structured_outputs" / "app.py")
V4_ROWS = [
    json.loads(line)
    for line in (
        REPO
        / "tests/fixtures/nemo_gym/resources_servers/structured_outputs/data/structured_outputs_v4_example.jsonl"
    )
    .read_text()
    .splitlines()
]


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return dict(orjson.loads(reply.read()))


def _right_call(row: dict[str, Any]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = answer(row, instance(json.loads(row["schema_str"])))["output"]
    return output


@pytest.mark.parametrize("row", V4_ROWS, ids=[row["source_record_id"] for row in V4_ROWS])
def test_a_right_answer_call_earns_1_after_one_model_call(row: dict[str, Any]) -> None:
    output = _right_call(row)
    with serve_rollout_stack(Environment, Agent, lambda _body: output) as stack:
        verdict = _post(f"{stack.agent_url}/run", row)
    assert (verdict["reward"], verdict["error_type"]) == (1.0, None), verdict["error_message"]
    assert stack.model.requests == [row["responses_create_params"]]  # one call, the row's request
    assert verdict["response"] == stack.model.responses[0]  # verified as it came: nothing run or added


def test_a_wrong_call_is_not_run_and_is_scored_by_the_environment() -> None:
    row = V4_ROWS[0]
    call = function_call("response_tool_1", {"extraction": {}})
    with serve_rollout_stack(Environment, Agent, lambda _body: [call]) as stack:
        verdict = _post(f"{stack.agent_url}/run", row)
    assert (verdict["reward"], verdict["error_type"]) == (0.0, "wrong_tool_name")
    assert len(stack.model.requests) == 1
    assert [item["type"] for item in verdict["response"]["output"]] == ["function_call"]


def test_v1_responses_is_the_models_response() -> None:
    row = V4_ROWS[2]
    output = _right_call(row)
    with serve_rollout_stack(Environment, Agent, lambda _body: output) as stack:
        response = _post(f"{stack.agent_url}/v1/responses", row["responses_create_params"])
    assert response == stack.model.responses[0]


@contextmanager
def _served_over_vllm_model(stub: StubVllm) -> Iterator[str]:
    with ExitStack() as stack:
        stub_url = stack.enter_context(serve_in_thread(stub.build_app()))
        model_url = stack.enter_context(
            serve_model_server(VLLM_MODEL_APP, {**STUB_MODEL, "base_url": f"{stub_url}/v1"})
        )
        env = Environment(Environment.validate_config({}, instance="so"), name="so")
        env_url = stack.enter_context(serve_in_thread(env.build_app()))
        servers = {
            "so": ServerAddress(server_type="resources_servers", implementation="x", url=env_url),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="x", url=model_url
            ),
        }
        config = Agent.config_class.model_validate(
            {
                "resources_server": {"type": "resources_servers", "name": "so"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
            }
        )
        agent = Agent(config, name="agent", servers=servers)
        yield stack.enter_context(serve_in_thread(agent.build_app()))


CITY_TOOL = {
    "type": "function",
    "name": "submit",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


def test_over_vllm_model_the_call_is_the_answer_and_vllm_is_called_once() -> None:
    stub = StubVllm()  # with tool_choice "required" it calls the first tool: {"city": <user text>}
    row = {
        "responses_create_params": {
            "input": "Paris",
            "tools": [CITY_TOOL],
            "tool_choice": "required",
            "max_output_tokens": 200,
        },
        "schema_str": json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}),
        "response_mode": "tool_call",
        "tool_name": "submit",
    }
    with _served_over_vllm_model(stub) as agent_url:
        verdict = _post(f"{agent_url}/run", row)
    assert (verdict["reward"], verdict["error_type"]) == (1.0, None)
    assert verdict["response"]["status"] == "completed"
    assert stub.calls["chat"] == 1


def test_streaming_relays_the_models_events() -> None:
    stub = StubVllm()
    params = {
        "input": "Paris",
        "tools": [CITY_TOOL],
        "tool_choice": "required",
        "max_output_tokens": 200,
        "stream": True,
    }
    with _served_over_vllm_model(stub) as agent_url:
        request = urllib.request.Request(
            f"{agent_url}/v1/responses",
            data=orjson.dumps(params),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            lines = reply.read().decode().splitlines()
    events = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: {")]
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] == "response.completed"
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["function_call"]
    assert stub.calls["chat"] == 1
