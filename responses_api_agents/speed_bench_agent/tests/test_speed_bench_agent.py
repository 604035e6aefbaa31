"""speed_bench_agent on loopback: an environment, a model and the agent, each a real uvicorn server.

The environment here is a plain app that records what `/seed_session` and `/verify` get (bodies
and cookies) and sets a cookie of its own on `/seed_session`, as NeMo Gym's servers do. The model
is the scripted model, whose answer names the turn it saw; with `sets_cookie`, it also sets a
cookie on its first answer and records the cookies of every request, as an engine pinning a
rollout to one replica would. NeMo Gym's own speed_bench server, unchanged, is in
test_speed_bench_server.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml
from fastapi import Request, Response

from ng_cli.config.schema import validate_block
from ng_cli.servers.app import JSONResponse, build_app, read_json_object
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import ScriptedModel, assistant_message, serve_in_thread
from tests.fixtures.served_model import STUB_MODEL, VLLM_MODEL_APP, serve_model_server
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
NEMO_GYM_ROOT = REPO / "tests" / "fixtures" / "nemo_gym_servers"
Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")
ENV_COOKIE, MODEL_COOKIE = "env_state", "model_replica"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "type": "message"}


def reply_to(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The scripted model: 'reply to <the last user message>'."""
    last = next(item for item in reversed(body["input"]) if item.get("role") == "user")
    return [assistant_message(f"reply to {last['content']}")]


@dataclass
class Recorder:
    """What the environment was sent."""

    seeded: list[dict[str, Any]] = field(default_factory=list)
    verified: list[dict[str, Any]] = field(default_factory=list)
    verify_cookies: list[dict[str, str]] = field(default_factory=list)
    model_cookies: list[dict[str, str]] = field(default_factory=list)


def environment_app(recorder: Recorder) -> Any:
    app = build_app("env")

    @app.post("/seed_session")
    async def seed(request: Request) -> Response:
        recorder.seeded.append(await read_json_object(request))
        answer = JSONResponse({})
        answer.set_cookie(ENV_COOKIE, "seeded")
        return answer

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        body = await read_json_object(request)
        recorder.verified.append(body)
        recorder.verify_cookies.append(dict(request.cookies))
        return JSONResponse({**body, "reward": 0.25})

    return app


@dataclass
class Stack:
    agent_url: str
    model: ScriptedModel
    env: Recorder


@contextmanager
def served(*, sets_cookie: bool = False) -> Iterator[Stack]:
    model = ScriptedModel(reply_to)
    recorder = Recorder()
    model_app = model.build_app()
    if sets_cookie:

        @model_app.middleware("http")
        async def replica_cookie(request: Request, call_next: Any) -> Response:
            recorder.model_cookies.append(dict(request.cookies))
            answer: Response = await call_next(request)
            if MODEL_COOKIE not in request.cookies:
                answer.set_cookie(MODEL_COOKIE, "replica-1")
            return answer

    with ExitStack() as stack:
        env_url = stack.enter_context(serve_in_thread(environment_app(recorder)))
        model_url = stack.enter_context(serve_in_thread(model_app))
        servers = {
            "env": ServerAddress(server_type="resources_servers", implementation="env", url=env_url),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="scripted", url=model_url
            ),
        }
        block = {
            "resources_server": {"type": "resources_servers", "name": "env"},
            "model_server": {"type": "responses_api_models", "name": "policy_model"},
        }
        agent = Agent(Agent.config_class.model_validate(block), name="agent", servers=servers)
        yield Stack(stack.enter_context(serve_in_thread(agent.build_app())), model, recorder)


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return dict(orjson.loads(answer.read()))


def assistant(text: str) -> dict[str, Any]:
    """The reply the agent carries into the next turn (NeMo Gym's EasyInputMessage as it sends it)."""
    return {"role": "assistant", "content": text}


SYSTEM = {"role": "system", "content": "Be brief."}


def test_each_trailing_user_turn_is_one_call_with_every_reply_so_far() -> None:
    u1, u2, u3 = user("one"), user("two"), user("three")
    row = {
        "responses_create_params": {"input": [SYSTEM, u1, u2, u3], "temperature": 0.5},
        "verifier_metadata": {"src_id": "t-1", "num_turns": 3},
    }
    with served() as stack:
        result = post(f"{stack.agent_url}/run", row)
    assert [request["input"] for request in stack.model.requests] == [
        [SYSTEM, u1],
        [SYSTEM, u1, assistant("reply to one"), u2],
        [SYSTEM, u1, assistant("reply to one"), u2, assistant("reply to two"), u3],
    ]
    assert all(request["temperature"] == 0.5 for request in stack.model.requests)  # the row's params
    responses = stack.model.responses
    response = result["response"]
    assert response["output"] == [item for r in responses for item in r["output"]]  # in call order
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        assert response["usage"][key] == sum(r["usage"][key] for r in responses)
    assert response["id"] == responses[-1]["id"]  # the last call's Response carries the rest
    assert (result["reward"], result["verifier_metadata"]) == (0.25, row["verifier_metadata"])
    assert stack.env.seeded == [row]
    assert [v["response"] for v in stack.env.verified] == [response]


def test_the_preamble_and_an_earlier_exchange_are_kept_only_trailing_users_are_turns() -> None:
    earlier = [
        {"role": "developer", "content": "Answer in English."},
        user("hello"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
    ]
    u2, u3 = user("two"), user("three")
    with served() as stack:
        response = post(f"{stack.agent_url}/v1/responses", {"input": [*earlier, u2, u3]})
    assert [request["input"] for request in stack.model.requests] == [
        [*earlier, u2],
        [*earlier, u2, assistant("reply to two"), u3],
    ]
    assert len(response["output"]) == 2


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("just this", [{"type": "message", "role": "user", "content": "just this"}]),
        ([SYSTEM, user("only")], [SYSTEM, user("only")]),
        (
            [user("asked"), {"role": "assistant", "content": "answered"}],
            [user("asked"), {"role": "assistant", "content": "answered"}],
        ),
    ],
    ids=["string-input", "one-user-turn", "ends-with-assistant"],
)
def test_without_several_trailing_user_turns_the_input_is_sent_whole_once(
    given: Any, sent: list[dict[str, Any]]
) -> None:
    with served() as stack:
        response = post(f"{stack.agent_url}/v1/responses", {"input": given})
    assert [request["input"] for request in stack.model.requests] == [sent]
    assert response == stack.model.responses[0]


def test_an_empty_input_is_refused_before_any_model_call() -> None:
    with served() as stack, pytest.raises(urllib.error.HTTPError) as refused:
        post(f"{stack.agent_url}/v1/responses", {"input": []})
    assert refused.value.code == 400
    assert "input is empty" in json.loads(refused.value.read())["error"]["message"]
    assert stack.model.requests == []


def test_cookies_the_model_and_the_environment_set_travel_to_the_next_calls() -> None:
    row = {"responses_create_params": {"input": [user("one"), user("two"), user("three")]}}
    with served(sets_cookie=True) as stack:
        post(f"{stack.agent_url}/run", row)
    replicas = [cookies.get(MODEL_COOKIE) for cookies in stack.env.model_cookies]
    assert replicas == [None, "replica-1", "replica-1"]  # set on turn 1, sent back on 2 and 3
    assert [cookies.get(ENV_COOKIE) for cookies in stack.env.model_cookies] == ["seeded"] * 3
    [verify_cookies] = stack.env.verify_cookies
    assert (verify_cookies.get(ENV_COOKIE), verify_cookies.get(MODEL_COOKIE)) == ("seeded", "replica-1")


def test_v1_responses_keeps_the_models_cookie_across_turns_too() -> None:
    with served(sets_cookie=True) as stack:
        post(f"{stack.agent_url}/v1/responses", {"input": [user("one"), user("two")]})
    assert [cookies.get(MODEL_COOKIE) for cookies in stack.env.model_cookies] == [None, "replica-1"]


async def test_stream_relays_every_turns_events_one_call_after_the_other() -> None:
    """With `stream: true` (our vllm_model over the stub vLLM, which streams): each turn's items
    come after the previous turns' and the final event has them all, as without streaming."""
    stub = StubVllm()
    with ExitStack() as stack:
        stub_url = stack.enter_context(serve_in_thread(stub.build_app()))
        model_url = stack.enter_context(
            serve_model_server(VLLM_MODEL_APP, {**STUB_MODEL, "base_url": f"{stub_url}/v1"})
        )
        servers = {
            "env": ServerAddress(
                server_type="resources_servers", implementation="x", url="http://127.0.0.1:9"
            ),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="x", url=model_url
            ),
        }
        config = {"resources_server": {"type": "resources_servers", "name": "env"},
                  "model_server": {"type": "responses_api_models", "name": "policy_model"}}  # fmt: skip
        agent = Agent(Agent.config_class.model_validate(config), name="agent", servers=servers)
        agent_url = stack.enter_context(serve_in_thread(agent.build_app()))
        async with openai.AsyncOpenAI(base_url=f"{agent_url}/v1", api_key="x", max_retries=0) as client:
            streamed = await client.responses.create(
                model="m", input=[user("one"), user("two")], stream=True, max_output_tokens=20
            )
            events = [event async for event in streamed]
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed"
    final = events[-1].response
    assert [item.type for item in final.output] == ["message", "message"]
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == [0, 1]  # the second call's item after the first's
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert stub.calls["chat"] == 2
    second = stub.requests[-1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == final.output[0].content[0].text  # the first reply, carried


def _agent_block(path: Path, instance: str) -> dict[str, Any]:
    block: dict[str, Any] = yaml.safe_load(path.read_text())[instance]["responses_api_agents"][
        "speed_bench_agent"
    ]
    return block


@pytest.mark.parametrize(
    ("path", "instance"),
    [
        ("resources_servers/speed_bench/configs/speed_bench.yaml", "speed_bench_simple_agent"),
        (
            "responses_api_agents/speed_bench_agent/configs/speed_bench_agent.yaml",
            "speed_bench_agent_default",
        ),
    ],
)
def test_nemo_gyms_agent_blocks_validate_unchanged(path: str, instance: str) -> None:
    config = validate_block(
        Agent.config_class, _agent_block(NEMO_GYM_ROOT / path, instance), instance=instance
    )
    assert config.config_warnings == ()
    assert (config.resources_server.name, config.model_server.name) == (
        "speed_bench_resources_server",
        "policy_model",
    )
