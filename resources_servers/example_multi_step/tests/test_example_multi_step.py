"""example_multi_step without sockets: each lookup, the per-session id bookkeeping, and verify."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from ng_cli.servers import ToolError, VerifyRequest
from ng_cli.servers.loading import load_server_class
from tests.fixtures.environment_config import check_environment_config

ENV_DIR = Path(__file__).resolve().parents[1]
Server = load_server_class(ENV_DIR / "app.py")
env = sys.modules[Server.__module__]


@pytest.fixture
def server() -> Any:
    return Server(Server.config_class.model_validate({}), name="orders")


def verify_request(text: str, expected: Any = "125.00") -> VerifyRequest:
    response = {
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        ]
    }
    return VerifyRequest.model_validate(
        {"responses_create_params": {"input": "q"}, "response": response, "expected_answer": expected}
    )


async def walk_the_chain(server: Any, session: str, name: str) -> Decimal:
    """Call every tool in a valid order, as a good model would; return the summed total."""
    user = await server.get_user_id(session, env.GetUserIdArgs(name=name))
    orders = await server.get_orders(session, env.GetOrdersArgs(user_id=user["user_id"]))
    totals = [
        await server.get_order_total(session, env.GetOrderTotalArgs(order_id=o)) for o in orders["order_ids"]
    ]
    return sum((Decimal(str(t["total"])) for t in totals), Decimal("0"))


async def test_a_valid_chain_with_the_right_total_earns_full_reward(server: Any) -> None:
    await server.seed_session("s1", {})
    total = await walk_the_chain(server, "s1", "Carol")
    assert total == Decimal("125.00")
    verdict = await server.verify("s1", verify_request(f"Carol's orders add up to ${total:,.2f}."))
    assert verdict == {
        "reward": 1.0,
        "answer_correct": 1.0,
        "valid_order": 1.0,
        "used_all_tools": 1.0,
        "tool_calls": 5,
    }


async def test_a_wrong_total_earns_nothing(server: Any) -> None:
    await walk_the_chain(server, "s1", "Carol")
    verdict = await server.verify("s1", verify_request("They add up to $124.99."))
    assert verdict["reward"] == 0.0
    assert verdict["answer_correct"] == 0.0
    assert verdict["valid_order"] == 1.0


async def test_guessing_a_user_id_is_out_of_order_even_with_the_right_answer(server: Any) -> None:
    orders = await server.get_orders("s1", env.GetOrdersArgs(user_id="u-103"))
    assert orders["order_ids"] == env.ORDERS["u-103"]
    for order_id in orders["order_ids"]:
        await server.get_order_total("s1", env.GetOrderTotalArgs(order_id=order_id))
    assert server.trails["s1"].out_of_order == ["get_orders(u-103) before get_user_id returned it"]
    verdict = await server.verify("s1", verify_request("125.00"))
    assert (verdict["reward"], verdict["answer_correct"], verdict["valid_order"]) == (0.0, 1.0, 0.0)


async def test_an_order_of_another_user_is_out_of_order(server: Any) -> None:
    await walk_the_chain(server, "s1", "Bob")
    await server.get_order_total("s1", env.GetOrderTotalArgs(order_id="o-5006"))
    assert server.trails["s1"].out_of_order == ["get_order_total(o-5006) before get_orders returned it"]


async def test_the_right_number_without_the_tools_earns_nothing(server: Any) -> None:
    verdict = await server.verify("s1", verify_request("125"))
    assert (verdict["reward"], verdict["answer_correct"], verdict["used_all_tools"]) == (0.0, 1.0, 0.0)


async def test_sessions_do_not_share_discovered_ids(server: Any) -> None:
    await server.get_user_id("a", env.GetUserIdArgs(name="carol"))
    await server.get_orders("b", env.GetOrdersArgs(user_id="u-103"))
    assert server.trails["a"].out_of_order == []
    assert len(server.trails["b"].out_of_order) == 1


async def test_seed_session_resets_and_verify_forgets_the_session(server: Any) -> None:
    await server.get_orders("s1", env.GetOrdersArgs(user_id="u-103"))
    await server.seed_session("s1", {})
    assert server.trails["s1"] == env.Trail()
    await server.verify("s1", verify_request("0"))
    assert "s1" not in server.trails


@pytest.mark.parametrize(
    ("call", "args", "message"),
    [
        ("get_user_id", {"name": "Zed"}, "no user named 'Zed'"),
        ("get_orders", {"user_id": "u-999"}, "no user with id 'u-999'"),
        ("get_order_total", {"order_id": "o-1"}, "no order with id 'o-1'"),
    ],
)
async def test_unknown_ids_are_tool_errors(
    server: Any, call: str, args: dict[str, str], message: str
) -> None:
    args_model = {"get_user_id": env.GetUserIdArgs, "get_orders": env.GetOrdersArgs}.get(
        call, env.GetOrderTotalArgs
    )
    with pytest.raises(ToolError, match=message):
        await getattr(server, call)("s1", args_model(**args))


@pytest.mark.parametrize(
    ("model", "body"),
    [
        ("GetUserIdArgs", {}),
        ("GetUserIdArgs", {"name": ""}),
        ("GetOrdersArgs", {"user": "u-101"}),
        ("GetOrderTotalArgs", {"order_id": 5}),
    ],
)
def test_bad_arguments_are_rejected(model: str, body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        getattr(env, model).model_validate(body)


async def test_verify_requires_a_numeric_expected_answer(server: Any) -> None:
    with pytest.raises(ToolError, match="expected_answer"):
        await server.verify("s1", verify_request("1", expected="lots"))


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("$1,234.50 in 3 orders", {Decimal("1234.5"), Decimal(3)}),
        ("-7.25", {Decimal("-7.25")}),
        ("none", set()),
    ],
)
def test_numbers_in_reads_grouped_and_signed_numbers(text: str, numbers: set[Decimal]) -> None:
    assert env.numbers_in(text) == numbers


def test_example_rows_expect_the_table_totals() -> None:
    rows = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]
    assert len(rows) == 5
    for row in rows:
        orders = env.ORDERS[env.USER_IDS[row["user_name"].lower()]]
        assert Decimal(row["expected_answer"]) == sum(env.ORDER_TOTALS[o] for o in orders)
        assert {t["name"] for t in row["responses_create_params"]["tools"]} == set(env.REQUIRED_TOOLS)


def test_config_file_declares_the_environment_and_its_agent() -> None:
    check_environment_config(ENV_DIR, Server)
