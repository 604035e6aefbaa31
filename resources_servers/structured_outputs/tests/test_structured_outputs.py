"""structured_outputs without sockets: where the schema comes from, and every verdict of verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.errors import BadRequestError
from ng_cli.servers import VerifyRequest
from ng_cli.servers.loading import load_server_class
from tests.fixtures.environment_config import check_environment_config

ENV_DIR = Path(__file__).resolve().parents[1]
Server = load_server_class(ENV_DIR / "app.py")
ROWS = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "born": {"type": "string", "format": "date"}},
    "required": ["name"],
    "additionalProperties": False,
}


def make_server(**block: Any) -> Any:
    return Server(Server.config_class.model_validate(block), name="so")


def request(text: str | None, *, params: dict[str, Any] | None = None, **extra: Any) -> VerifyRequest:
    output = (
        []
        if text is None
        else [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]
    )
    params = (
        params
        if params is not None
        else {"input": "q", "text": {"format": {"type": "json_schema", "name": "p", "schema": PERSON}}}
    )
    return VerifyRequest.model_validate(
        {"responses_create_params": params, "response": {"output": output}, **extra}
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"name": "Ada"}', None),
        ('  {"name": "Ada", "born": "1815-12-10"}\n', None),
        ('```json\n{"name": "Ada"}\n```', "the final message is not valid JSON"),
        ('{"name": "Ada",}', "the final message is not valid JSON"),
        ("", "the response has no final assistant message text"),
        ('{"name": 3}', "does not match the schema at name: 3 is not of type 'string'"),
        ('{"nom": "Ada"}', "does not match the schema at (root)"),
        (
            '{"name": "Ada", "born": "1815-13-40"}',
            "does not match the schema at born: '1815-13-40' is not a 'date'",
        ),
        ("[]", "does not match the schema at (root): [] is not of type 'object'"),
    ],
)
async def test_verify_scores_and_explains(text: str, reason: str | None) -> None:
    verdict = await make_server().verify("s", request(text))
    if reason is None:
        assert verdict == {"reward": 1.0}
    else:
        assert verdict["reward"] == 0.0
        assert reason in verdict["reason"]


async def test_no_final_message_is_a_zero_not_an_error() -> None:
    verdict = await make_server().verify("s", request(None))
    assert verdict == {"reward": 0.0, "reason": "the response has no final assistant message text"}


async def test_format_checks_can_be_turned_off() -> None:
    verdict = await make_server(check_formats=False).verify(
        "s", request('{"name": "Ada", "born": "not a date"}')
    )
    assert verdict == {"reward": 1.0}


async def test_a_row_json_schema_overrides_the_request_format() -> None:
    override = {"type": "object", "required": ["id"]}
    verdict = await make_server().verify("s", request('{"name": "Ada"}', json_schema=override))
    assert verdict["reward"] == 0.0
    assert "'id' is a required property" in verdict["reason"]


async def test_the_schema_draft_named_by_the_schema_is_used() -> None:
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "number",
        "maximum": 5,
        "exclusiveMaximum": True,
    }
    verdict = await make_server().verify("s", request("5", json_schema=draft4))
    assert verdict["reward"] == 0.0


@pytest.mark.parametrize(
    ("params", "extra", "message"),
    [
        ({"input": "q"}, {}, "the row has no JSON schema"),
        ({"input": "q", "text": {"format": {"type": "text"}}}, {}, "the row has no JSON schema"),
        ({"input": "q"}, {"json_schema": {"type": "banana"}}, "the row's JSON schema is invalid"),
    ],
)
async def test_a_row_without_a_usable_schema_is_a_bad_request(
    params: dict[str, Any], extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(BadRequestError, match=message):
        await make_server().verify("s", request('{"name": "Ada"}', params=params, **extra))


def test_example_rows_ask_for_json_with_valid_schemas() -> None:
    assert len(ROWS) == 5
    server = make_server()
    for row in ROWS:
        fmt = row["responses_create_params"]["text"]["format"]
        assert fmt["type"] == "json_schema"
        server.validator_for(fmt["schema"])


def test_config_file_declares_the_environment_and_its_agent() -> None:
    check_environment_config(ENV_DIR, Server)
