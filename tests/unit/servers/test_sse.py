"""Reading server-sent events (pure): lines of any length, where a stream ends, and when it was cut off."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ng_cli.errors import InvalidOutputError, UpstreamUnavailableError
from ng_cli.servers.sse import iter_lines, iter_sse_json

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


async def _chunked(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("size", [7, 64 * 1024, 10**7])
async def test_lines_are_whole_however_the_chunks_cut_them(size: int) -> None:
    long = b"data: " + b"7" * 900_000 + b"\n"  # past aiohttp's 512 KiB line limit
    data = b"event: x\n" + long + b"\n" + b"data: [DONE]"
    lines = [line async for line in iter_lines(_chunked(data, size), source=SOURCE)]
    assert lines == [b"event: x\n", long, b"\n", b"data: [DONE]"]


@pytest.mark.parametrize("ending", [b"\n", b""], ids=["whole-line", "still-pending"])
async def test_a_line_over_the_limit_is_refused_after_the_lines_before_it(ending: bytes) -> None:
    data = b"data: 1\n" + b"data: " + b"7" * 5000 + ending
    seen: list[bytes] = []

    async def read_all() -> None:
        async for line in iter_lines(_chunked(data, 1000), source=SOURCE, max_line_bytes=4096):
            seen.append(line)

    with pytest.raises(InvalidOutputError, match="event line of more than 4096 bytes"):
        await read_all()
    assert seen == [b"data: 1\n"]
