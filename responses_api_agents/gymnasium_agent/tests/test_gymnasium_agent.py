"""gymnasium_agent on loopback: a reset/step environment, a scripted model and the agent, each a
real uvicorn server.

The environment is written for this test on our server framework. Its rule is NeMo Gym 0.7.0's
`example_multi_turn_gymnasium` (resources_servers/example_multi_turn_gymnasium/app.py: a
follow-up per turn, then 1.0 when `expected_answer` is in the answer), plus what that example
does not exercise: rewards on every step, a reset observation, `info.tool_outputs`,
`supports_explicit_close` and `supports_step_idempotency`. Like NeMo Gym's servers it keeps its
episode under its own cookie, set on `/reset`: a step without it is refused, so the agent must
carry it. NeMo Gym's recorded rollouts of that example (tests/fixtures/nemo_gym_agents/) are
replayed: each earns the reward NeMo Gym recorded.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import yaml
from fastapi import FastAPI, Request

from ng_cli.config.schema import ResourcesServerConfig, validate_block
from ng_cli.errors import BadRequestError, ConfigError
from ng_cli.protocol.responses import all_output_text
from ng_cli.servers import ResourcesServer, VerifyRequest
from ng_cli.servers.app import JSONResponse, read_json_object
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.session import session_id
from ng_cli.servers.testing import assistant_message, function_call, serve_rollout_stack

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "nemo_gym_agents"
EXAMPLE = FIXTURES / "resources_servers" / "example_multi_turn_gymnasium"
Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")
EPISODE_COOKIE = "env_episode"


@dataclass
class Episode:
    row: dict[str, Any]
    session: str
    turn: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)


class ScriptedUserEnv(ResourcesServer[ResourcesServerConfig]):
    """A Gymnasium-style environment: `/reset`, `/step`, `/close`; no `/verify`."""

    config_class: ClassVar[type[ResourcesServerConfig]] = ResourcesServerConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.episodes: dict[str, Episode] = {}
        self.closed: list[str] = []
        self._lock = threading.Lock()

    async def verify(self, session_id: str, request: VerifyRequest) -> float:  # noqa: ARG002 (the base class\'s signature)
        raise BadRequestError("a Gymnasium environment scores in /step; use gymnasium_agent")

    def setup_routes(self, app: FastAPI) -> None:
        super().setup_routes(app)

        @app.post("/reset")
        async def reset(request: Request) -> JSONResponse:
            row = await read_json_object(request)
            episode = uuid.uuid4().hex
            with self._lock:
                self.episodes[episode] = Episode(row=row, session=session_id(request))
            info = {key: True for key in row.get("supports", [])}
            answer = JSONResponse({"observation": row.get("reset_observation"), "info": info})
            answer.set_cookie(EPISODE_COOKIE, episode)
            return answer

        @app.post("/step")
        async def step(request: Request) -> JSONResponse:
            body = await read_json_object(request)
            episode = self._episode(request)
            episode.steps.append(body)
            return JSONResponse(self._step(episode, body))

        @app.post("/close")
        async def close(request: Request) -> JSONResponse:
            self.closed.append(self._episode_id(request))
            return JSONResponse({"ok": True})

    def _episode_id(self, request: Request) -> str:
        episode = request.cookies.get(EPISODE_COOKIE, "")
        if episode not in self.episodes:
            raise BadRequestError("lost session: no episode cookie (was /reset's Set-Cookie kept?)")
        if self.episodes[episode].session != session_id(request):
            raise BadRequestError("the episode belongs to another rollout")
        return episode

    def _episode(self, request: Request) -> Episode:
        return self.episodes[self._episode_id(request)]

    def _step(self, episode: Episode, body: dict[str, Any]) -> dict[str, Any]:
        """NeMo Gym's example_multi_turn_gymnasium `step`, with optional per-step rewards, tool
        outputs and a bad answer on request."""
        row = episode.row
        if row.get("bad_step"):
            return {"reward": "not a number"}
        turn = episode.turn
        step_rewards = row.get("step_rewards", [])
        reward = float(step_rewards[turn]) if turn < len(step_rewards) else 0.0
        follow_ups = row.get("follow_ups", [])
        if turn < len(follow_ups):
            episode.turn = turn + 1
            calls = [item for item in body["response"]["output"] if item.get("type") == "function_call"]
            outputs = [{"call_id": call["call_id"], "output": json.dumps({"ok": turn})} for call in calls]
            return {"observation": follow_ups[turn], "reward": reward, "info": {"tool_outputs": outputs}}
        expected = row.get("expected_answer", "")
        text = all_output_text(body["response"]["output"])
        reward += 1.0 if expected and expected.lower() in text.lower() else 0.0
        return {"observation": None, "reward": reward, "terminated": True, "info": {"turns": turn + 1}}


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return dict(orjson.loads(reply.read()))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


ROWS = _jsonl(EXAMPLE / "data" / "example.jsonl")
RECORDED = _jsonl(EXAMPLE / "data" / "example_rollouts.jsonl")


def _assistant_texts(output: list[dict[str, Any]]) -> list[str]:
    return [all_output_text([item]) for item in output if item.get("role") == "assistant"]


@pytest.mark.parametrize("recorded", RECORDED, ids=[f"task{r['_ng_task_index']}" for r in RECORDED])
def test_nemo_gyms_recorded_rollouts_earn_their_rewards(recorded: dict[str, Any]) -> None:
    row = ROWS[recorded["_ng_task_index"]]
    answers = _assistant_texts(recorded["response"]["output"])

    def policy(body: dict[str, Any]) -> list[dict[str, Any]]:
        turn = sum(1 for item in body["input"] if item.get("role") == "assistant")
        return [assistant_message(answers[turn])]

    with serve_rollout_stack(ScriptedUserEnv, Agent, policy, agent_config={"max_steps": 5}) as stack:
        result = _post(f"{stack.agent_url}/run", row)
    assert result["reward"] == recorded["reward"]
    assert (result["terminated"], result["truncated"]) == (recorded["terminated"], recorded["truncated"])
    got = [(item.get("role"), item.get("type")) for item in result["response"]["output"]]
    assert got == [(item.get("role"), item.get("type")) for item in recorded["response"]["output"]]
    assert len(stack.model.requests) == len(answers)
    assert stack.model.requests[0]["input"] == row["responses_create_params"]["input"]


def test_rewards_of_every_step_are_summed_and_tool_outputs_and_observations_come_back() -> None:
    row = {
        "responses_create_params": {"input": "play", "tools": [{"type": "function", "name": "look"}]},
        "reset_observation": "You are in a room.",
        "follow_ups": ["You see a door.", "The door is open."],
        "step_rewards": [0.5, 0.25, 0.125],
        "expected_answer": "leave",
    }

    def policy(body: dict[str, Any]) -> list[dict[str, Any]]:
        turn = sum(
            1
            for item in body["input"]
            if item.get("role") == "assistant" or item.get("type") == "function_call"
        )
        return [function_call("look", {})] if turn < 2 else [assistant_message("I leave.")]

    with serve_rollout_stack(ScriptedUserEnv, Agent, policy) as stack:
        result = _post(f"{stack.agent_url}/run", row)
    assert result["reward"] == 0.5 + 0.25 + 0.125 + 1.0
    assert (result["terminated"], result["truncated"], result["info"]) == (True, False, {"turns": 3})
    first, second, third = stack.model.requests
    user = [
        {"type": "message", "role": "user", "content": "play"},
        {"type": "message", "role": "user", "content": "You are in a room."},
    ]
    assert first["input"] == user
    assert result["responses_create_params"]["input"] == user
    call = stack.model.responses[0]["output"][0]
    assert second["input"][2:] == [
        call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": json.dumps({"ok": 0})},
        {"type": "message", "role": "user", "content": "You see a door."},
    ]
    assert third["input"][:5] == second["input"]
    assert [item.get("type") for item in result["response"]["output"]] == [
        "function_call", "function_call_output", "message",
        "function_call", "function_call_output", "message",
        "message",
    ]  # fmt: skip
    usage = result["response"]["usage"]
    assert usage["output_tokens"] == sum(r["usage"]["output_tokens"] for r in stack.model.responses)
    env: ScriptedUserEnv = stack.resources  # type: ignore[assignment]
    [episode] = env.episodes.values()
    assert [step["response"]["id"] for step in episode.steps] == [r["id"] for r in stack.model.responses]
    assert all(step["follow_ups"] == row["follow_ups"] for step in episode.steps)  # the row rides along
    assert env.closed == []  # close is called only when reset says the environment supports it


def test_max_steps_truncates_and_an_environment_that_closes_is_closed_once() -> None:
    row = {
        "responses_create_params": {"input": "chat"},
        "follow_ups": ["more", "more", "more"],
        "step_rewards": [0.25, 0.25, 0.25],
        "supports": ["supports_explicit_close", "supports_step_idempotency"],
    }
    with serve_rollout_stack(
        ScriptedUserEnv, Agent, lambda _body: [assistant_message("ok")], agent_config={"max_steps": 2}
    ) as stack:
        result = _post(f"{stack.agent_url}/run", row)
    assert (result["reward"], result["terminated"], result["truncated"]) == (0.5, False, True)
    env: ScriptedUserEnv = stack.resources  # type: ignore[assignment]
    [(episode_id, episode)] = env.episodes.items()
    assert env.closed == [episode_id]
    ids = [step["_ng_step_request_id"] for step in episode.steps]
    assert len(ids) == len(set(ids)) == 2


def test_a_bad_step_answer_fails_the_rollout_names_the_route_and_still_closes() -> None:
    row = {
        "responses_create_params": {"input": "x"},
        "bad_step": True,
        "supports": ["supports_explicit_close"],
    }
    with serve_rollout_stack(ScriptedUserEnv, Agent, lambda _body: [assistant_message("ok")]) as stack:
        with pytest.raises(urllib.error.HTTPError) as caught:
            _post(f"{stack.agent_url}/run", row)
        body = json.loads(caught.value.read())
    assert caught.value.code == 502
    assert "/step answered a body that is not a Gymnasium step answer" in body["error"]["message"]
    assert "reward" in body["error"]["message"]
    env: ScriptedUserEnv = stack.resources  # type: ignore[assignment]
    assert env.closed == list(env.episodes)


def test_v1_responses_is_one_model_call() -> None:
    with serve_rollout_stack(ScriptedUserEnv, Agent, lambda _body: [assistant_message("hi")]) as stack:
        response = _post(f"{stack.agent_url}/v1/responses", {"input": "hello"})
    assert response == stack.model.responses[0]
    assert stack.model.requests == [{"input": "hello"}]


def _agent_block(path: Path, instance: str) -> dict[str, Any]:
    tree = yaml.safe_load(path.read_text())
    block: dict[str, Any] = tree[instance]["responses_api_agents"]["gymnasium_agent"]
    return block


@pytest.mark.parametrize(
    ("path", "instance"),
    [
        (EXAMPLE / "configs" / "example_multi_turn_gymnasium.yaml", "example_multi_turn_gymnasium_agent"),
        (
            FIXTURES / "resources_servers" / "blackjack" / "configs" / "blackjack.yaml",
            "blackjack_gymnasium_agent",
        ),
    ],
)
def test_nemo_gyms_agent_blocks_validate_unchanged(path: Path, instance: str) -> None:
    config = validate_block(Agent.config_class, _agent_block(path, instance), instance=instance)
    assert config.max_steps == 5  # type: ignore[attr-defined]
    assert config.resources_server.type == "resources_servers"
    assert config.config_warnings == ()


def test_max_steps_below_one_is_refused_by_name() -> None:
    block = _agent_block(
        EXAMPLE / "configs" / "example_multi_turn_gymnasium.yaml", "example_multi_turn_gymnasium_agent"
    )
    with pytest.raises(ConfigError, match="max_steps"):
        validate_block(Agent.config_class, {**block, "max_steps": 0}, instance="agent")
