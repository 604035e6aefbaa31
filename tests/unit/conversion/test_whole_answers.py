"""A whole JSON answer given to `stream: true` -> the events its stream would have carried."""

from __future__ import annotations

import pytest

from ng_cli.conversion.chunks import ChunkAccumulator
from ng_cli.conversion.whole_answers import events_of_whole_answer
from ng_cli.errors import InvalidOutputError

CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "", "tool_calls": [CALL]},
            "finish_reason": "tool_calls",
            "token_ids": [5, 6],
        }
    ],
    "prompt_token_ids": [1, 2, 3],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
}


def test_a_chat_completion_is_one_chunk_that_adds_up_to_it() -> None:
    (chunk,) = events_of_whole_answer(COMPLETION, source="u")
    total = ChunkAccumulator()
    total.add(chunk)
    again = total.completion()
    assert again["choices"][0]["message"]["tool_calls"] == [CALL]
    assert again["choices"][0]["token_ids"] == [5, 6]
    assert (again["prompt_token_ids"], again["usage"]) == ([1, 2, 3], COMPLETION["usage"])


def test_a_response_is_its_events_ending_completed_with_its_id_and_items() -> None:
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"}
    response = {"id": "resp_7", "object": "response", "status": "completed", "output": [item]}
    events = events_of_whole_answer(response, source="u")
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_item.added" in kinds
    assert "response.output_item.done" in kinds
    assert kinds[-1] == "response.completed"
    assert events[-1]["response"]["id"] == "resp_7"
    assert events[-1]["response"]["output"][0]["name"] == "lookup"


def test_an_error_body_is_the_error_event() -> None:
    error = {"error": {"message": "bad", "code": 400}}
    assert events_of_whole_answer(error, source="u") == [error]


@pytest.mark.parametrize("answer", [{"object": "list"}, [1, 2]])
def test_anything_else_is_a_clear_error_naming_the_source(answer: object) -> None:
    with pytest.raises(InvalidOutputError, match="http://up/v1/x answered `stream: true` with a whole JSON"):
        events_of_whole_answer(answer, source="http://up/v1/x")
