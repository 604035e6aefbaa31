"""simple_agent's pure parts: input normalisation, call checks, error messages, usage sums, config."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ng_cli.errors import BadRequestError, InvalidOutputError, UpstreamHTTPError
from ng_cli.servers.agent import checked_response
from ng_cli.servers.loading import load_server_class

Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")
agent_module = sys.modules[Agent.__module__]
REFS = {
    "resources_server": {"type": "resources_servers", "name": "env"},
    "model_server": {"type": "responses_api_models", "name": "policy_model"},
}


def test_a_string_input_becomes_one_user_message() -> None:
    assert agent_module.input_items("hi") == [{"type": "message", "role": "user", "content": "hi"}]


def test_a_list_input_is_copied_not_rebuilt() -> None:
    item = {"role": "user", "content": "hi", "prompt_token_ids": [1, 2]}
    items = agent_module.input_items([item])
    assert items == [item]
    assert items[0] is item


@pytest.mark.parametrize("value", [None, 3, {"role": "user"}])
def test_other_inputs_are_a_bad_request(value: Any) -> None:
    with pytest.raises(BadRequestError, match="input must be a string or a list"):
        agent_module.input_items(value)


def test_declared_tools_are_the_function_tools_of_the_request() -> None:
    params = {"tools": [{"type": "function", "name": "a"}, {"name": "b"}, {"type": "web_search"}, "junk"]}
    assert agent_module.declared_tools(params) == frozenset({"a", "b"})
    assert agent_module.declared_tools({}) == frozenset()


def call(name: Any, arguments: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": "c1", "name": name, "arguments": arguments}


DECLARED = frozenset({"get", "verify", "seed_session"})


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("get", '{"x": 1}', None),
        ("get", "", None),
        ("verify", "{}", "there is no tool named 'verify'"),
        ("seed_session", "{}", "there is no tool named 'seed_session'"),
        ("../verify", "{}", "there is no tool named '../verify'"),
        (None, "{}", "there is no tool named None"),
        ("other", "{}", "the tools offered are: get, seed_session, verify"),
        ("get", '{"x": ', "the arguments of get are not valid JSON"),
        ("get", "[1, 2]", "the arguments of get must be a JSON object, got list"),
    ],
)
def test_check_call_describes_what_the_model_got_wrong(
    name: Any, arguments: str, problem: str | None
) -> None:
    found, decoded = agent_module.check_call(call(name, arguments), DECLARED)
    if problem is None:
        assert found is None
        assert decoded == ({"x": 1} if arguments else {})
    else:
        assert problem in found
        assert decoded == {}


def test_tool_error_message_prefers_the_envelope_message() -> None:
    error = UpstreamHTTPError("x", status=400, body='{"error": {"message": "bad city", "type": "ToolError"}}')
    assert agent_module.tool_error_message(error) == "bad city"


@pytest.mark.parametrize("body", ["<html>oops</html>", '{"detail": "Not Found"}', '{"error": "flat"}'])
def test_tool_error_message_falls_back_to_status_and_body(body: str) -> None:
    error = UpstreamHTTPError("x", status=404, body=body)
    assert agent_module.tool_error_message(error) == f"the tool failed with HTTP 404: {body}"


def test_function_call_output_is_a_json_string() -> None:
    item = agent_module.function_call_output("c9", {"temperature": 24, "city": "Zürich"})
    assert item == {
        "type": "function_call_output",
        "call_id": "c9",
        "output": '{"temperature":24,"city":"Zürich"}',
    }


@pytest.mark.parametrize("answer", [None, [], {"output": None}, {"output": [1]}, {"id": "r"}])
def test_checked_response_rejects_unusable_bodies(answer: Any) -> None:
    with pytest.raises(InvalidOutputError, match="http://m/v1/responses"):
        checked_response(answer, "http://m/v1/responses")


def test_add_usage_sums_counts_and_details() -> None:
    first = {
        "input_tokens": 10,
        "output_tokens": 3,
        "total_tokens": 13,
        "input_tokens_details": {"cached_tokens": 4},
    }
    second = {
        "input_tokens": 20,
        "output_tokens": 5,
        "total_tokens": 25,
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    total = agent_module.add_usage(agent_module.add_usage(None, first), second)
    assert total == {
        "input_tokens": 30,
        "output_tokens": 8,
        "total_tokens": 38,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    assert agent_module.add_usage(None, None) is None
    assert agent_module.add_usage(total, None) is total


def test_config_defaults_and_hop_conversion() -> None:
    config = Agent.config_class.model_validate(REFS)
    assert config.max_steps == 10
    assert config.tool_call.max_attempts == 2
    assert config.model_call.timeouts().read_s == config.model_call.read_s
    assert config.model_call.retry().max_attempts == 3


@pytest.mark.parametrize(
    "extra",
    [{"max_steps": 0}, {"max_step": 3}, {"model_call": {"read": 1}}, {"tool_call": {"max_attempts": 0}}],
)
def test_config_rejects_bad_values_and_unknown_keys(extra: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Agent.config_class.model_validate({**REFS, **extra})
