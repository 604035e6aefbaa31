"""example_stateful_counter without sockets: the tools, per-session isolation, seeding and verify."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from ng_cli.errors import BadRequestError
from ng_cli.servers import ToolError, VerifyRequest
from ng_cli.servers.loading import load_server_class
from tests.fixtures.environment_config import check_environment_config

ENV_DIR = Path(__file__).resolve().parents[1]
Server = load_server_class(ENV_DIR / "app.py")
env = sys.modules[Server.__module__]


def make_server(**block: Any) -> Any:
    return Server(Server.config_class.model_validate(block), name="counter")


def verify_request(expected: Any) -> VerifyRequest:
    return VerifyRequest.model_validate(
        {"responses_create_params": {"input": "q"}, "response": {"output": []}, "expected_count": expected}
    )


async def test_increment_and_get_count_act_on_the_callers_session_only() -> None:
    server = make_server()
    assert await server.seed_session("a", {"initial_count": 5}) == {"count": 5}
    await server.seed_session("b", {})
    assert await server.increment("a", env.IncrementArgs(by=3)) == {"count": 8}
    assert await server.increment("b", env.IncrementArgs(by=-2)) == {"count": -2}
    assert await server.get_count("a", env.GetCountArgs()) == {"count": 8}
    assert await server.get_count("b", env.GetCountArgs()) == {"count": -2}
    assert await server.get_count("never-seeded", env.GetCountArgs()) == {"count": 0}


async def test_seed_session_restarts_the_counter() -> None:
    server = make_server()
    await server.increment("a", env.IncrementArgs(by=9))
    await server.seed_session("a", {"initial_count": 1})
    assert await server.get_count("a", env.GetCountArgs()) == {"count": 1}


@pytest.mark.parametrize("initial", ["3", 1.5, True, None])
async def test_seed_session_rejects_a_non_integer_initial_count(initial: Any) -> None:
    with pytest.raises(BadRequestError, match="initial_count"):
        await make_server().seed_session("a", {"initial_count": initial})


async def test_increments_beyond_the_configured_limit_are_tool_errors() -> None:
    server = make_server(max_increment=10)
    assert await server.increment("a", env.IncrementArgs(by=-10)) == {"count": -10}
    with pytest.raises(ToolError, match="between -10 and 10, got 11"):
        await server.increment("a", env.IncrementArgs(by=11))
    assert await server.get_count("a", env.GetCountArgs()) == {"count": -10}


@pytest.mark.parametrize(
    ("model", "body"),
    [
        ("IncrementArgs", {}),
        ("IncrementArgs", {"by": 1.5}),
        ("IncrementArgs", {"by": "many"}),
        ("GetCountArgs", {"x": 1}),
    ],
)
def test_bad_arguments_are_rejected(model: str, body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        getattr(env, model).model_validate(body)


async def test_verify_compares_the_final_count_and_forgets_the_session() -> None:
    server = make_server()
    await server.seed_session("a", {"initial_count": 2})
    await server.increment("a", env.IncrementArgs(by=5))
    await server.seed_session("b", {})
    assert await server.verify("a", verify_request(7)) == {"reward": 1.0, "final_count": 7}
    assert await server.verify("b", verify_request(7)) == {"reward": 0.0, "final_count": 0}
    assert server.counts == {}


async def test_verify_requires_an_integer_expected_count() -> None:
    with pytest.raises(ToolError, match="expected_count"):
        await make_server().verify("a", verify_request("7"))


def test_example_rows_are_consistent() -> None:
    rows = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]
    assert len(rows) == 5
    assert all(
        isinstance(row["expected_count"], int) and isinstance(row["initial_count"], int) for row in rows
    )


def test_config_file_declares_the_environment_and_its_agent() -> None:
    check_environment_config(ENV_DIR, Server)
