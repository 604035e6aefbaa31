"""tool_simulation_agent on loopback: an environment, a scripted model and the agent, each a real
uvicorn server.

The environment is written for this test on our server framework: its rows have NeMo Gym
0.7.0's `single_step_tool_use_with_argument_comparison` shape (`expected_action`: the expert's
next step, a message or a function call) and its rule in its simplest setting (any message for
an expected message; else the same tool with the same arguments). It records `/seed_session`
calls: NeMo Gym's agent never seeds, and neither may ours.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import yaml

from ng_cli.config.schema import ResourcesServerConfig, validate_block
from ng_cli.errors import ConfigError
from ng_cli.servers import ResourcesServer, VerifyRequest
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import assistant_message, function_call, serve_rollout_stack

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "nemo_gym_agents"
Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")

EXPECTED_CALL = {
    "type": "function_call",
    "name": "authenticate_user",
    "arguments": '{"user_id": "GROOM2024", "event_confirmation_code": "NIGHTCLUB2024"}',
}  # the first row of NeMo Gym's single_step_tool_use_with_argument_comparison/data/example.jsonl
TOOLS = [{"type": "function", "name": "authenticate_user", "parameters": {"type": "object"}}]
ROW = {
    "responses_create_params": {
        "input": [
            {"role": "system", "content": "You are a ticketing agent."},
            {"role": "user", "content": "I am GROOM2024, code NIGHTCLUB2024."},
            {"type": "function_call", "call_id": "c0", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c0", "output": '{"simulated": true}'},
        ],
        "tools": TOOLS,
    },
    "expected_action": EXPECTED_CALL,
}


class ExpertStepEnv(ResourcesServer[ResourcesServerConfig]):
    """Scores the model's one step against the row's `expected_action`."""

    config_class: ClassVar[type[ResourcesServerConfig]] = ResourcesServerConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seeded: list[dict[str, Any]] = []
        self.verified: list[dict[str, Any]] = []

    async def seed_session(self, session_id: str, row: Any) -> None:  # noqa: ARG002 (the base class\'s signature)
        self.seeded.append(dict(row))

    async def verify(self, session_id: str, request: VerifyRequest) -> dict[str, Any]:  # noqa: ARG002 (the base class\'s signature)
        self.verified.append(request.model_dump())
        expected = request.extra("expected_action")
        output = request.response["output"]
        calls = [item for item in output if item.get("type") == "function_call"]
        if expected["type"] == "message":
            found = not calls and any(item.get("type") == "message" for item in output)
            return {"reward": 1.0 if found else 0.0, "category": "chat_message" if found else "no_message"}
        if not calls:
            return {"reward": 0.0, "category": "no_tool_call"}
        same = calls[0]["name"] == expected["name"] and json.loads(calls[0]["arguments"]) == json.loads(
            expected["arguments"]
        )
        return {"reward": 1.0 if same else 0.0, "category": "match" if same else "mismatch"}


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return dict(orjson.loads(reply.read()))


RIGHT = function_call(
    "authenticate_user", {"event_confirmation_code": "NIGHTCLUB2024", "user_id": "GROOM2024"}
)
WRONG = function_call(
    "authenticate_user", {"user_id": "someone else", "event_confirmation_code": "NIGHTCLUB2024"}
)


@pytest.mark.parametrize(
    ("output", "reward", "category"),
    [
        ([RIGHT], 1.0, "match"),
        ([WRONG], 0.0, "mismatch"),
        ([assistant_message("Hello!")], 0.0, "no_tool_call"),
    ],
    ids=["expert-call", "wrong-arguments", "message-instead"],
)
def test_one_model_call_is_verified_as_it_came(
    output: list[dict[str, Any]], reward: float, category: str
) -> None:
    with serve_rollout_stack(ExpertStepEnv, Agent, lambda _body: output) as stack:
        result = _post(f"{stack.agent_url}/run", ROW)
    assert (result["reward"], result["category"]) == (reward, category)
    assert stack.model.requests == [ROW["responses_create_params"]]  # one call: the row's request
    assert result["response"] == stack.model.responses[0]  # no tool run, nothing added
    assert result["expected_action"] == EXPECTED_CALL
    env: ExpertStepEnv = stack.resources  # type: ignore[assignment]
    assert env.seeded == []  # NeMo Gym's agent does not seed a session
    assert [v["response"]["id"] for v in env.verified] == [stack.model.responses[0]["id"]]


def test_skip_verification_gives_the_configured_reward_without_asking_the_environment() -> None:
    config = {"skip_verification": True, "skip_verification_reward": 0.5}
    with serve_rollout_stack(ExpertStepEnv, Agent, lambda _body: [WRONG], agent_config=config) as stack:
        result = _post(f"{stack.agent_url}/run", ROW)
    assert (result["reward"], result["verification_skipped"]) == (0.5, True)
    assert result["response"] == stack.model.responses[0]
    env: ExpertStepEnv = stack.resources  # type: ignore[assignment]
    assert (env.verified, env.seeded) == ([], [])


def test_v1_responses_is_the_models_response() -> None:
    with serve_rollout_stack(ExpertStepEnv, Agent, lambda _body: [RIGHT]) as stack:
        response = _post(f"{stack.agent_url}/v1/responses", ROW["responses_create_params"])
    assert response == stack.model.responses[0]


def _agent_block(path: Path, instance: str) -> dict[str, Any]:
    block: dict[str, Any] = yaml.safe_load(path.read_text())[instance]["responses_api_agents"][
        "tool_simulation_agent"
    ]
    return block


SWE_PIVOT = FIXTURES / "resources_servers" / "swe_pivot" / "configs" / "swe_pivot.yaml"
SINGLE_STEP = (
    FIXTURES
    / "resources_servers"
    / "single_step_tool_use_with_argument_comparison"
    / "configs"
    / "single_step_tool_use_with_argument_comparison.yaml"
)


def test_nemo_gyms_agent_blocks_validate_unchanged() -> None:
    single = validate_block(
        Agent.config_class,
        _agent_block(SINGLE_STEP, "single_step_tool_use_with_argument_comparison_agent"),
        instance="single_step_agent",
    )
    assert single.config_warnings == ()
    assert len(single.datasets) == 3
    pivot = validate_block(
        Agent.config_class, _agent_block(SWE_PIVOT, "swe_pivot_tool_simulation_agent"), instance="p"
    )
    # swe_pivot.yaml sets max_steps: 1, which NeMo Gym's agent ignores: one call is what it does.
    assert [warning.split(": ", 1)[0] for warning in pivot.config_warnings] == ["p.max_steps"]


def test_max_steps_other_than_one_is_refused_by_name() -> None:
    block = {**_agent_block(SWE_PIVOT, "swe_pivot_tool_simulation_agent"), "max_steps": 3}
    with pytest.raises(ConfigError, match=r"max_steps.*set to 3 is not supported"):
        validate_block(Agent.config_class, block, instance="p")


def test_a_non_finite_skip_reward_is_refused() -> None:
    block = {**_agent_block(SINGLE_STEP, "single_step_tool_use_with_argument_comparison_agent"),
             "skip_verification": True, "skip_verification_reward": float("nan")}  # fmt: skip
    with pytest.raises(ConfigError, match="skip_verification_reward"):
        validate_block(Agent.config_class, block, instance="agent")
