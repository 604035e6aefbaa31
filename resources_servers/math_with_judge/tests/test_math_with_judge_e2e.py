"""math_with_judge end to end: environment, simple_agent, a scripted policy and a stub judge on loopback."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.errors import NgError, UpstreamHTTPError
from ng_cli.servers import HttpClient
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import (
    Policy,
    ScriptedModel,
    assistant_message,
    serve_in_child,
    serve_in_thread,
    serve_rollout_stack,
)

pytestmark = pytest.mark.integration

ENV_DIR = Path(__file__).resolve().parents[1]
REPO = ENV_DIR.parents[1]
Environment = load_server_class(ENV_DIR / "app.py")
Agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
ROWS = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]
ENV_CONFIG = {"verify_workers": 1}
ANSWERS = {  # equivalent to, but mostly not written like, each row's expected answer
    "3/4 + 1/8": "Adding, 6/8 + 1/8 = \\boxed{0.875}.",
    "2x + 6 = 20": "So $x = 7$, that is \\boxed{x = 7}.",
    "(x + 1)^2": "\\boxed{x^{2} + 2x + 1}",
    "hexagon": "(6 - 2) * 180 = \\boxed{720}",
    "square root of 50": "\\boxed{\\sqrt{25 \\cdot 2}}",
}


def question_key(request: dict[str, Any]) -> str:
    text = next(item["content"] for item in request["input"] if item.get("role") == "user")
    return next(key for key in ANSWERS if key in text)


def correct_policy(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [assistant_message(ANSWERS[question_key(request)])]


async def test_equivalent_answers_earn_full_reward_on_every_example_row(client: HttpClient) -> None:
    with serve_rollout_stack(
        Environment, Agent, correct_policy, resources_config=ENV_CONFIG, resources_name="math_with_judge"
    ) as stack:
        results = await asyncio.gather(*(client.post_json(f"{stack.agent_url}/run", row) for row in ROWS))
    assert [result["reward"] for result in results] == [1.0] * len(ROWS)
    assert all(result["library_reward"] == 1.0 and not result["judge_used"] for result in results)
    assert [result["expected_answer"] for result in results] == [row["expected_answer"] for row in ROWS]


async def test_wrong_answers_earn_nothing_and_a_bad_row_is_a_400(client: HttpClient) -> None:
    def wrong_policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
        return [assistant_message("I think it is \\boxed{13}.")]

    with serve_rollout_stack(Environment, Agent, wrong_policy, resources_config=ENV_CONFIG) as stack:
        results = await asyncio.gather(*(client.post_json(f"{stack.agent_url}/run", row) for row in ROWS))
        with pytest.raises(UpstreamHTTPError) as caught:
            await client.post_json(
                f"{stack.resources_url}/verify", {"responses_create_params": {}, "response": {}}
            )
    assert [result["reward"] for result in results] == [0.0] * len(ROWS)
    assert [result["extracted_answer"] for result in results] == ["13"] * len(ROWS)
    assert caught.value.status == 400
    assert "expected_answer" in orjson.loads(caught.value.body)["error"]["message"]


@dataclass
class JudgedStack:
    agent_url: str
    judge: ScriptedModel


@contextmanager
def judged_stack(policy: Policy, judge_policy: Policy) -> Iterator[JudgedStack]:
    """Environment with a judge, agent and policy, wired as ng_run would (one session secret)."""
    secret = secrets.token_hex(16)
    judge, model = ScriptedModel(judge_policy, name="judge_model"), ScriptedModel(policy)
    with serve_in_thread(judge.build_app()) as judge_url, serve_in_thread(model.build_app()) as model_url:
        judge_address = ServerAddress(
            server_type="responses_api_models", implementation="stub", url=judge_url
        )
        block = {**ENV_CONFIG, "judge_model_server": {"type": "responses_api_models", "name": "judge_model"}}
        environment = Environment(
            Environment.config_class.model_validate(block),
            name="math_with_judge",
            servers={"judge_model": judge_address},
            session_secret=secret,
        )
        with serve_in_thread(environment.build_app()) as env_url:
            agent_block = {
                "resources_server": {"type": "resources_servers", "name": "math_with_judge"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
            }
            servers = {
                "math_with_judge": ServerAddress(
                    server_type="resources_servers", implementation="math", url=env_url
                ),
                "policy_model": ServerAddress(
                    server_type="responses_api_models", implementation="stub", url=model_url
                ),
            }
            agent = Agent(
                Agent.config_class.model_validate(agent_block),
                name="agent",
                servers=servers,
                session_secret=secret,
            )
            with serve_in_thread(agent.build_app()) as agent_url:
                yield JudgedStack(agent_url, judge)


def words_policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
    return [assistant_message("The sum is \\boxed{\\text{seven eighths}}.")]


async def test_the_judge_rewards_what_math_verify_cannot_read(client: HttpClient) -> None:
    with judged_stack(
        words_policy, lambda _request: [assistant_message("7/8 either way.\n[[A=B]]")]
    ) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[0])
        judge_requests = list(stack.judge.requests)
    assert (result["reward"], result["library_reward"], result["judge_verdict"]) == (1.0, 0.0, "equal")
    (judge_request,) = judge_requests
    assert "\\text{seven eighths}" in judge_request["input"][1]["content"]


async def test_a_broken_judge_never_turns_into_a_reward(client: HttpClient) -> None:
    def broken_judge(_request: dict[str, Any]) -> Any:
        raise NgError("judge is down")

    with judged_stack(words_policy, broken_judge) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROWS[0])
    assert (result["reward"], result["judge_used"]) == (0.0, True)
    assert "HTTP 500" in result["judge_error"]


def test_it_runs_as_a_launcher_child_and_stops_its_workers(tmp_path: Path) -> None:
    """The path ng_run takes: spec file -> `python -m ng_cli.servers.child` -> workers spawned there."""
    config = {"entrypoint": "app.py", "domain": "math", "verify_workers": 1}
    with serve_in_child(ENV_DIR / "app.py", config, name="math_with_judge", spec_dir=tmp_path) as server:
        row = {**ROWS[0], "response": {"output": [assistant_message("\\boxed{0.875}")]}}
        verdict = server.post("/verify", row)
        pid = server.process.pid
        workers = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert verdict["reward"] == 1.0
    assert len(workers) == 1
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
