"""example_single_tool_call without sockets: the weather tool, its argument model, and verify."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ng_cli.errors import BadRequestError
from ng_cli.servers import ToolError, VerifyRequest
from ng_cli.servers.loading import load_server_class
from tests.fixtures.environment_config import check_environment_config

ENV_DIR = Path(__file__).resolve().parents[1]
Server = load_server_class(ENV_DIR / "app.py")
app_module = sys.modules[Server.__module__]


def make_server(**block: Any) -> Any:
    return Server(Server.config_class.model_validate(block), name="weather")


def answer(text: str) -> dict[str, Any]:
    return {
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        ]
    }


def verify_request(city: Any, text: str) -> VerifyRequest:
    return VerifyRequest.model_validate(
        {"responses_create_params": {"input": "q"}, "response": answer(text), "expected_city": city}
    )


async def test_get_weather_reads_the_table_case_insensitively() -> None:
    server = make_server()
    args = app_module.GetWeatherArgs(city="  new   YORK ")
    result = await server.get_weather("s1", args)
    condition, celsius = app_module.WEATHER["new york"]
    assert result == {"city": "new   YORK", "condition": condition, "temperature": celsius, "unit": "celsius"}


async def test_get_weather_converts_to_fahrenheit_when_configured() -> None:
    server = make_server(temperature_unit="fahrenheit")
    result = await server.get_weather("s1", app_module.GetWeatherArgs(city="Oslo"))
    assert result["temperature"] == round(app_module.WEATHER["oslo"][1] * 9 / 5 + 32)
    assert result["unit"] == "fahrenheit"


async def test_unknown_city_is_a_tool_error_listing_the_known_ones() -> None:
    server = make_server()
    with pytest.raises(ToolError, match=r"unknown city 'Atlantis'.*Paris"):
        await server.get_weather("s1", app_module.GetWeatherArgs(city="Atlantis"))
    assert issubclass(ToolError, BadRequestError)


@pytest.mark.parametrize("body", [{}, {"city": ""}, {"city": 3}, {"city": "Paris", "unit": "k"}])
def test_bad_arguments_are_rejected_by_the_argument_model(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        app_module.GetWeatherArgs.model_validate(body)


@pytest.mark.parametrize(
    ("text", "reward"),
    [
        ("It is sunny and 24 °C in Paris.", 1.0),
        ("SUNNY, 24 degrees", 1.0),
        ("It is sunny in Paris.", 0.0),
        ("It is 24 degrees in Paris.", 0.0),
        ("It is sunny and 124 degrees.", 0.0),
        ("It is sunnyish and 24 degrees.", 0.0),
        ("", 0.0),
    ],
)
async def test_verify_needs_condition_and_temperature(text: str, reward: float) -> None:
    verdict = await make_server().verify("s1", verify_request("Paris", text))
    assert verdict == {"reward": reward}


async def test_verify_reads_the_last_assistant_message_only() -> None:
    response = answer("sunny and 24")
    response["output"].append({"type": "message", "role": "assistant", "content": "I don't know."})
    request = VerifyRequest.model_validate(
        {"responses_create_params": {"input": "q"}, "response": response, "expected_city": "Paris"}
    )
    assert await make_server().verify("s1", request) == {"reward": 0.0}


async def test_verify_handles_negative_temperatures() -> None:
    verdict = await make_server().verify("s1", verify_request("oslo", "Snowy, -3 degrees."))
    assert verdict == {"reward": 1.0}


async def test_verify_with_a_non_string_expected_city_names_the_field() -> None:
    with pytest.raises(ToolError, match="expected_city"):
        await make_server().verify("s1", verify_request(None, "sunny 24"))


def _without_expected_city(response: dict[str, Any]) -> VerifyRequest:
    return VerifyRequest.model_validate({"responses_create_params": {"input": "q"}, "response": response})


async def test_a_row_without_expected_city_is_scored_by_nemo_gyms_rule() -> None:
    call = {"type": "function_call", "name": "get_weather", "arguments": "{}", "call_id": "c1"}
    other = {**call, "name": "get_time"}
    server = make_server()
    assert await server.verify("s1", _without_expected_city({"output": [call]})) == {"reward": 1.0}
    assert await server.verify("s1", _without_expected_city({"output": [other]})) == {"reward": 0.0}
    text_only = answer("It is sunny and 24 degrees in Paris.")
    assert await server.verify("s1", _without_expected_city(text_only)) == {"reward": 0.0}


def test_example_rows_name_known_cities_and_offer_the_tool() -> None:
    import orjson

    rows = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]
    assert len(rows) == 5
    for row in rows:
        assert row["expected_city"].lower() in app_module.WEATHER
        assert [tool["name"] for tool in row["responses_create_params"]["tools"]] == ["get_weather"]


def test_config_file_declares_the_environment_and_its_agent() -> None:
    check_environment_config(ENV_DIR, Server)
