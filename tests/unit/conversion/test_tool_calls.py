"""Our hermes parser behaves as vLLM's Hermes2ProToolParser.extract_tool_calls (vLLM 0.32's rules,
restated in ng_cli/conversion/tool_calls.py; tests/engine/test_token_exact.py compares the two on
real generations)."""

from __future__ import annotations

import pytest

from ng_cli.conversion.tool_calls import TOOL_CALL_PARSERS

HERMES = TOOL_CALL_PARSERS["hermes"]


def parsed(text: str) -> tuple[str | None, list[tuple[str, str]]]:
    out = HERMES.parse(text)
    return out.content, [(call.name, call.arguments) for call in out.tool_calls]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It is sunny.", ("It is sunny.", [])),
        (
            '<tool_call>\n{"name": "f", "arguments": {"city": "Paris"}}\n</tool_call>',
            (None, [("f", '{"city": "Paris"}')]),
        ),
        (
            'Let me check.<tool_call>{"name":"f","arguments":{"a":1}}</tool_call>',
            ("Let me check.", [("f", '{"a": 1}')]),
        ),
        (
            '<tool_call>{"name": "f", "arguments": {}}</tool_call>\n<tool_call>{"name": "g", "arguments": {"x": "é"}}</tool_call>',
            (None, [("f", "{}"), ("g", '{"x": "é"}')]),
        ),
        (
            '<tool_call>{"name": "f", "arguments": {"a": 1}}',
            (None, [("f", '{"a": 1}')]),
        ),  # unclosed, at the end
        ("<tool_call>{not json}</tool_call>", ("<tool_call>{not json}</tool_call>", [])),
        ('<tool_call>{"arguments": {}}</tool_call>', ('<tool_call>{"arguments": {}}</tool_call>', [])),
        (
            '<tool_call>{"name": 3, "arguments": {}}</tool_call>',
            ('<tool_call>{"name": 3, "arguments": {}}</tool_call>', []),
        ),
    ],
    ids=[
        "text",
        "one-call",
        "content-before",
        "two-calls",
        "unclosed",
        "bad-json",
        "no-name",
        "name-not-str",
    ],
)
def test_hermes_parse(text: str, expected: tuple[str | None, list[tuple[str, str]]]) -> None:
    assert parsed(text) == expected


def test_call_ids_are_unique_and_shaped_like_vllms() -> None:
    calls = HERMES.parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>' * 2).tool_calls
    assert len({call.call_id for call in calls}) == 2
    assert all(call.call_id.startswith("chatcmpl-tool-") for call in calls)
    assert calls[0].as_chat()["function"] == {"name": "f", "arguments": "{}"}
