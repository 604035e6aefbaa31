"""Reading server-sent events (pure): where a stream ends, and when it was cut off instead."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ng_cli.errors import UpstreamUnavailableError
from ng_cli.servers.sse import iter_sse_json

SOURCE = "http://upstream/v1/chat/completions"


async def _lines(text: bytes) -> AsyncIterator[bytes]:
    for line in text.splitlines(keepends=True):
        yield line


async def _read(text: bytes) -> list[dict[str, object]]:
    return [event async for event in iter_sse_json(_lines(text), source=SOURCE)]


@pytest.mark.parametrize(
    "text",
    [
        b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n',
        b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]',  # no blank line after [DONE]
        b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\ndata: {"n": 3}\n\n',  # nothing after [DONE]
    ],
    ids=["done", "done-without-blank-line", "after-done-ignored"],
)
async def test_a_chat_stream_ends_at_done(text: bytes) -> None:
    assert await _read(text) == [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize("final", ["response.completed", "response.incomplete", "response.failed", "error"])
async def test_a_responses_stream_ends_at_its_final_event(final: str) -> None:
    text = (
        b'event: response.created\ndata: {"type": "response.created"}\n\n'
        + f'event: {final}\ndata: {{"type": "{final}"}}\n\n'.encode()
    )
    assert [event["type"] for event in await _read(text)] == ["response.created", final]


@pytest.mark.parametrize(
    "text",
    [
        b'data: {"n": 1}\n\ndata: {"n": 2}\n\n',
        b'data: {"n": 1}\n\ndata: {"n": 2}',
        b"",
        b'event: response.created\ndata: {"type": "response.created"}\n\n'
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta"}\n\n',
    ],
    ids=["chat-without-done", "chat-cut-mid-event", "empty", "responses-without-final-event"],
)
async def test_a_stream_that_stops_before_its_end_raises_after_what_it_sent(text: bytes) -> None:
    seen: list[dict[str, object]] = []

    async def read_all() -> None:
        async for event in iter_sse_json(_lines(text), source=SOURCE):
            seen.append(event)

    with pytest.raises(
        UpstreamUnavailableError, match="ended its event stream before it was complete"
    ) as info:
        await read_all()
    assert len(seen) == text.count(b"data:")  # every event it did send was passed on first
    assert info.value.endpoint == SOURCE
    assert SOURCE in info.value.message
