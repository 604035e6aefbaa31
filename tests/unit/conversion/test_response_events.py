"""Streamed chat chunks -> Responses events: the order, the ids, and `<think>` split across chunks."""

from __future__ import annotations

from typing import Any

import pytest

from ng_cli.conversion import to_response
from ng_cli.conversion.chunks import ChunkAccumulator
from ng_cli.conversion.response_events import ResponseEvents, ThinkSplitter
from ng_cli.conversion.to_responses import response_envelope
from ng_cli.errors import InvalidOutputError
from ng_cli.protocol import ResponsesRequest
from ng_cli.servers.agent_stream import AgentEvents


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _stream(deltas: list[dict[str, Any]], *, parser: bool) -> list[dict[str, Any]]:
    request = ResponsesRequest.model_validate({"input": "q"})
    events = ResponseEvents(response_envelope(request, model="m", output=[]), splits_think_tags=parser)
    total = ChunkAccumulator()
    out = events.opening()
    for n, delta in enumerate(deltas):
        out += events.on_delta(total.add(_chunk(delta, "stop" if n == len(deltas) - 1 else None)))
    final = to_response(
        total.completion(), request=request, model="m", uses_reasoning_parser=parser, wants_token_ids=False
    )
    return out + events.closing(final)


@pytest.mark.parametrize(
    "pieces",
    [["<think>a</think>b"], ["<thi", "nk>a</th", "ink>b"], ["<", "think>", "a", "</think", ">", "b"]],
)
def test_think_tags_split_anywhere_give_the_same_pieces(pieces: list[str]) -> None:
    splitter = ThinkSplitter()
    found = [piece for text in pieces for piece in splitter.feed(text)] + splitter.flush()
    merged: list[tuple[bool, str]] = []
    for is_reasoning, _, text in found:
        if merged and merged[-1][0] == is_reasoning:
            merged[-1] = (is_reasoning, merged[-1][1] + text)
        else:
            merged.append((is_reasoning, text))
    assert merged == [(True, "a"), (False, "b")]


def test_a_reasoning_then_text_stream_in_openais_order() -> None:
    events = _stream(
        [{"content": "<think>why"}, {"content": "</think>"}, {"content": "Hello"}, {"content": " there"}],
        parser=True,
    )
    kinds = [event["type"] for event in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    final = events[-1]["response"]
    added = [event["item"]["id"] for event in events if event["type"] == "response.output_item.added"]
    assert [item["id"] for item in final["output"]] == added
    assert final["id"] == events[0]["response"]["id"]
    assert final["output"][1]["content"][0]["text"] == "Hello there"


def test_tool_call_pieces_add_up_and_keep_vllms_call_id() -> None:
    first = {"tool_calls": [{"index": 0, "id": "call_9", "function": {"name": "f", "arguments": '{"a"'}}]}
    rest = {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}
    events = _stream([first, rest], parser=False)
    final = events[-1]["response"]
    (call,) = final["output"]
    assert (call["call_id"], call["arguments"]) == ("call_9", '{"a": 1}')
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert "".join(deltas) == call["arguments"]


def test_a_blank_answer_still_streams_its_text() -> None:
    events = _stream([{"content": "\n"}, {"content": "\n"}], parser=False)
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "\n\n" == events[-1]["response"]["output"][0]["content"][0]["text"]


def test_chunks_with_two_choices_are_refused() -> None:
    chunk = {"choices": [{"index": 0, "delta": {}}, {"index": 1, "delta": {}}]}
    with pytest.raises(InvalidOutputError, match="one index-0 choice"):
        ChunkAccumulator().add(chunk)


def test_the_accumulated_completion_carries_token_ids_and_usage() -> None:
    total = ChunkAccumulator()
    total.add({**_chunk({"content": "a"}), "prompt_token_ids": [1, 2]})
    first = _chunk({"content": "b"}, "stop")
    first["choices"][0]["token_ids"] = [5]
    first["choices"][0]["logprobs"] = {"content": [{"token": "token_id:5", "logprob": -0.1}]}
    total.add(first)
    total.add({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1}})
    completion = total.completion()
    assert completion["prompt_token_ids"] == [1, 2]
    assert completion["choices"][0]["token_ids"] == [5]
    assert completion["choices"][0]["message"]["content"] == "ab"
    assert completion["usage"]["completion_tokens"] == 1


def test_two_think_blocks_are_two_summary_parts_of_one_item() -> None:
    events = _stream([{"content": "<think>a</think><th"}, {"content": "ink>b</think>done"}], parser=True)
    parts = [e["summary_index"] for e in events if e["type"] == "response.reasoning_summary_part.added"]
    assert parts == [0, 1]
    (reasoning, message) = events[-1]["response"]["output"]
    assert [part["text"] for part in reasoning["summary"]] == ["a", "b"]
    assert message["content"][0]["text"] == "done"


def test_vllms_parsed_reasoning_field_streams_as_reasoning() -> None:
    events = _stream([{"reasoning": "let me see"}, {"content": "42"}], parser=True)
    deltas = {e["type"]: e["delta"] for e in events if e["type"].endswith(".delta")}
    assert deltas == {
        "response.reasoning_summary_text.delta": "let me see",
        "response.output_text.delta": "42",
    }
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["reasoning", "message"]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        ("completed", "response.completed"),
        ("failed", "response.failed"),
        ("incomplete", "response.incomplete"),
        (None, "response.incomplete"),
    ],
)
def test_a_stream_ends_with_the_event_its_status_names(status: str | None, kind: str) -> None:
    """A failed Response ends its stream `response.failed` (an agent's stream said `incomplete`)."""
    events = AgentEvents({"model": "m", "input": "x"})
    events.finish({"status": status, "output": []})
    assert events.queue.get_nowait()["type"] == kind
    assert (
        ResponseEvents({}, splits_think_tags=False).closing({"status": status, "output": []})[-1]["type"]
        == kind
    )


def test_token_ids_and_logprobs_of_many_chunks_add_up_in_order_without_sharing_a_chunk_list() -> None:
    total = ChunkAccumulator()
    chunks = []
    for token in range(300):
        chunk = _chunk({"content": "x"})
        chunk["choices"][0]["token_ids"] = [token]
        chunk["choices"][0]["logprobs"] = {
            "content": [{"token": f"token_id:{token}", "logprob": -token / 1000}]
        }
        chunks.append(chunk)
        total.add(chunk)
    chunks[0]["choices"][0]["token_ids"].append(999)  # a chunk's own list, changed after it was added
    choice = total.completion()["choices"][0]
    assert choice["token_ids"] == list(range(300))
    assert [entry["logprob"] for entry in choice["logprobs"]["content"]] == [-t / 1000 for t in range(300)]
