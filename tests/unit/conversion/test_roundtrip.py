"""One turn's output items, sent back as the next turn's input, rebuild the assistant message the
model generated (the property that keeps re-rendered history close to the real tokens)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.conversion import to_chat_request, to_response
from ng_cli.protocol import ResponsesRequest

TOOL_CALL = {"id": "call_7", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}


def _next_turn_messages(message: dict[str, Any], *, uses_reasoning_parser: bool) -> list[dict[str, Any]]:
    completion = {
        "prompt_token_ids": [1, 2],
        "choices": [
            {
                "message": message,
                "finish_reason": "stop",
                "token_ids": [3],
                "logprobs": {"content": [{"token": "token_id:3", "logprob": -0.5}]},
            }
        ],
    }
    first = ResponsesRequest.model_validate({"input": [{"role": "user", "content": "q"}]})
    response = to_response(
        completion,
        request=first,
        model="m",
        uses_reasoning_parser=uses_reasoning_parser,
        wants_token_ids=True,
    )
    # What a client does: JSON over the wire, output items appended to the input.
    output = orjson.loads(orjson.dumps(response))["output"]
    follow_up = [{"role": "user", "content": "q"}, *output]
    if any(item["type"] == "function_call" for item in output):
        follow_up.append({"type": "function_call_output", "call_id": "call_7", "output": "done"})
    second = ResponsesRequest.model_validate({"input": follow_up})
    return to_chat_request(second, model="m", wants_token_ids=True)["messages"]


@pytest.mark.parametrize(
    ("content", "uses_reasoning_parser"),
    [
        ("plain answer", False),
        ("<think>x</think>kept as text", False),
        ("<think>why</think>\n\nanswer", True),
        ("<think>a</think><think>b</think>answer", True),
        ("", True),
    ],
)
def test_assistant_text_round_trips(content: str, uses_reasoning_parser: bool) -> None:
    messages = _next_turn_messages({"content": content}, uses_reasoning_parser=uses_reasoning_parser)
    assert messages == [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]


def test_tool_call_round_trips_with_its_id() -> None:
    messages = _next_turn_messages(
        {"content": "<think>use f</think>", "tool_calls": [TOOL_CALL]}, uses_reasoning_parser=True
    )
    assert messages[1] == {"role": "assistant", "content": "<think>use f</think>", "tool_calls": [TOOL_CALL]}
    assert messages[2] == {"role": "tool", "tool_call_id": "call_7", "content": "done"}


def test_token_fields_come_back_on_input_items() -> None:
    """The fields survive parsing of the next request (unchanged) but are not sent to vLLM."""
    completion = {
        "prompt_token_ids": [1, 2],
        "choices": [
            {
                "message": {"content": "a"},
                "token_ids": [3],
                "logprobs": {"content": [{"token": "x", "logprob": -0.5}]},
            }
        ],
    }
    response = to_response(
        completion,
        request=ResponsesRequest(input="q"),
        model="m",
        uses_reasoning_parser=False,
        wants_token_ids=True,
    )
    second = ResponsesRequest.model_validate(
        {"input": [{"role": "user", "content": "q"}, *response["output"]]}
    )
    item = second.input[1]
    assert not isinstance(item, str)
    assert (item.prompt_token_ids, item.generation_token_ids, item.generation_log_probs) == (
        [1, 2],
        [3],
        [-0.5],
    )
    assert b"token_ids" not in orjson.dumps(to_chat_request(second, model="m", wants_token_ids=False))


# NeMo Gym 0.7.0's vllm_model round-trip fixture (tests/fixtures/nemo_gym/, see its README): the
# output of a real Qwen3 rollout, sent back as input after a system and a user message, and the
# chat request NeMo Gym built from it (with and without token ids).
NEMO_GYM_ROUND_TRIP = (
    Path(__file__).resolve().parents[2]
    / "fixtures/nemo_gym/responses_api_models/vllm_model/tests/round_trip_test_data.json"
)
_NEMO_GYM_ONLY = {"parallel_tool_calls"}
"""Top-level fields NeMo Gym sends that we do not, on purpose (docs/conversion.md says why)."""


def _set_fields(value: Any) -> Any:
    """NeMo Gym's pydantic dump with its unset (None) fields left out, as our dict never has them."""
    if isinstance(value, dict):
        return {key: _set_fields(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_set_fields(item) for item in value]
    return value


@pytest.mark.parametrize(
    ("expected_key", "wants_token_ids"),
    [("expected_output", False), ("expected_output_return_token_id_information", True)],
)
def test_nemo_gyms_round_trip_fixture_gives_its_chat_messages(
    expected_key: str, wants_token_ids: bool
) -> None:
    data = orjson.loads(NEMO_GYM_ROUND_TRIP.read_bytes())
    history = [{"content": "system", "role": "system"}, {"content": "hello!", "role": "user"}]
    request = ResponsesRequest.model_validate({"input": [*history, *data["input"]["output"]]})
    chat = to_chat_request(
        request, model="m", wants_token_ids=wants_token_ids, keeps_token_ids=wants_token_ids
    )
    expected = _set_fields(data[expected_key])
    assert chat["messages"] == expected["messages"]
    assert set(expected) - set(chat) == _NEMO_GYM_ONLY
    assert chat.get("return_token_ids", False) is wants_token_ids  # ours asks vLLM for the ids itself


def test_nemo_gyms_round_trip_fixture_messages_come_back_as_its_items() -> None:
    """Chat -> Responses: each assistant message of the fixture, as vLLM's answer, gives the
    fixture's own output items (ids aside: ours are fresh)."""
    data = orjson.loads(NEMO_GYM_ROUND_TRIP.read_bytes())
    recorded = [item for item in data["input"]["output"] if item["type"] != "function_call_output"]
    assistants = [
        m for m in data["expected_output_return_token_id_information"]["messages"] if m["role"] == "assistant"
    ]
    produced: list[dict[str, Any]] = []
    for message in assistants:
        completion = {
            "prompt_token_ids": message["prompt_token_ids"],
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": message["content"],
                        "tool_calls": message.get("tool_calls"),
                    },
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    "token_ids": message["generation_token_ids"],
                    "logprobs": {
                        "content": [
                            {"token": f"token_id:{token}", "logprob": logprob}
                            for token, logprob in zip(
                                message["generation_token_ids"], message["generation_log_probs"], strict=True
                            )
                        ]
                    },
                }
            ],
        }
        request = ResponsesRequest.model_validate({"input": "q"})
        response = to_response(
            completion, request=request, model="m", uses_reasoning_parser=True, wants_token_ids=True
        )
        produced.extend(response["output"])

    def comparable(item: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in item.items() if key != "id"}

    assert [comparable(item) for item in produced] == [_set_fields(comparable(item)) for item in recorded]
