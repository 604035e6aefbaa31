"""vllm_model's streaming over the stub vLLM: the faults a real engine cannot produce on demand.

Failover happens before the first byte (a 500 from one endpoint moves the stream to the other);
a stream cut after it ends with an error event the `openai` SDK raises `APIError` from; a bad
request or a context overflow is answered as without streaming (400; the seed's empty,
incomplete response). The real-engine behaviour is in tests/engine/test_streaming_engine.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.served_model import STUB_MODEL, VLLM_MODEL_APP, make_model_server
from tests.fixtures.stub_vllm import StubVllm, prompt_ids, reply_ids

pytestmark = pytest.mark.integration


@contextmanager
def serve_over(stubs: list[StubVllm], max_event_bytes: int | None = None, **overrides: Any) -> Iterator[str]:
    """vllm_model over in-thread stubs (reading event lines up to `max_event_bytes`); its URL."""
    with ExitStack() as stack:
        roots = [stack.enter_context(serve_in_thread(stub.build_app())) for stub in stubs]
        block = {
            "base_url": [f"{root}/v1" for root in roots],
            **STUB_MODEL,
            "health_probe_interval_s": 0.5,
            "backoff_s": 0.01,
            **overrides,
        }
        server = make_model_server(VLLM_MODEL_APP, block)
        if max_event_bytes is not None:
            server.http.max_event_bytes = max_event_bytes
        yield stack.enter_context(serve_in_thread(server.build_app()))


@pytest.fixture
async def client() -> AsyncIterator[Any]:
    made: list[openai.AsyncOpenAI] = []

    def make(url: str) -> openai.AsyncOpenAI:
        made.append(openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30))
        return made[-1]

    yield make
    for one in made:
        await one.close()


async def test_a_500_before_the_first_byte_fails_over(client: Any) -> None:
    broken, working = StubVllm(fault="error_500"), StubVllm()
    with serve_over([broken, working]) as url:
        for n in range(4):  # new sessions: the pool sends some of them to the broken endpoint first
            stream = await client(url).responses.create(model="m", input=f"hello {n}", stream=True)
            events = [event async for event in stream]
            assert events[-1].type == "response.completed"
            assert events[-1].response.output_text == f"Echo: hello {n}"
    assert broken.calls["chat"] >= 1  # tried, failed before any byte went out, moved on
    assert working.calls["chat"] == 4


async def test_a_stream_cut_after_the_first_byte_ends_with_an_error_event(client: Any) -> None:
    with serve_over([StubVllm(fault="stream_cut")]) as url:
        stream = await client(url).responses.create(model="m", input="hello", stream=True)
        seen = await _event_types_until_error(stream, r"unreachable")
        assert seen[:2] == ["response.created", "response.in_progress"]
        assert "response.output_text.delta" in seen  # bytes had gone out: no failover, an error event

        chat = await client(url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}], stream=True
        )
        with pytest.raises(openai.APIError, match=r"unreachable"):
            await _drain(chat)


async def test_a_stream_that_ends_without_done_is_an_error_never_a_finished_answer(client: Any) -> None:
    """The upstream closes its stream cleanly after two tokens, with no `[DONE]`: the text is cut off.
    Before: the Response was `completed` with the cut text, and chat got a `[DONE]` of ours."""
    with serve_over([StubVllm(fault="stream_truncated")]) as url:
        stream = await client(url).responses.create(model="m", input="hello", stream=True)
        seen = await _event_types_until_error(stream, r"ended its event stream before it was complete")
        assert "response.output_text.delta" in seen
        assert "response.completed" not in seen
        assert "response.incomplete" not in seen

        chat = await client(url).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}], stream=True
        )
        with pytest.raises(openai.APIError, match=r"ended its event stream before it was complete"):
            await _drain(chat)


async def test_vllms_error_chunk_mid_stream_is_an_error_never_a_finished_answer(client: Any) -> None:
    """vLLM ends a failed generation with an error chunk and `[DONE]`. Before: the Response was
    `completed` with the text up to the failure."""
    with serve_over([StubVllm(fault="stream_error")]) as url:
        stream = await client(url).responses.create(model="m", input="hello", stream=True)
        seen = await _event_types_until_error(stream, r"EngineCore died mid-generation")
        assert "response.output_text.delta" in seen
        assert "response.completed" not in seen


async def test_raw_error_event_is_openais_shape() -> None:
    with serve_over([StubVllm(fault="stream_cut")]) as url:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{url}/v1/responses", json={"input": "hello", "stream": True}) as answer,
        ):
            assert answer.status == 200
            assert answer.headers["Content-Type"].startswith("text/event-stream")
            blocks = (await answer.read()).decode().strip().split("\n\n")
    event, data = blocks[-1].split("\n")
    assert event == "event: error"
    error = orjson.loads(data.removeprefix("data: "))
    assert error["type"] == "error"
    assert "unreachable" in error["message"]
    assert error["sequence_number"] == len(blocks) - 1


async def test_bad_request_with_stream_is_a_400_before_any_event(client: Any) -> None:
    stub = StubVllm()
    with serve_over([stub]) as url, pytest.raises(openai.BadRequestError, match="input"):
        await client(url).responses.create(model="m", input=5, stream=True)  # type: ignore[arg-type]
    assert stub.calls["chat"] == 0


async def test_several_choices_with_stream_are_a_400_before_vllm_is_asked(client: Any) -> None:
    """The chat relay adds up one choice: n > 1 streamed is refused up front (it used to stream
    the first chunks, then end with an error event at the first choice other than index 0)."""
    stub = StubVllm()
    ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    with serve_over([stub]) as url:
        with pytest.raises(openai.BadRequestError, match="n=2 is not supported with stream: true"):
            await client(url).chat.completions.create(**ask, n=2, stream=True)
        assert stub.calls["chat"] == 0
        whole = await client(url).chat.completions.create(**ask, n=1, stream=True)
        assert [chunk async for chunk in whole]


async def test_overflow_with_stream_is_the_marked_empty_response(client: Any) -> None:
    with serve_over([StubVllm(fault="overflow")]) as url:
        events = [e async for e in await client(url).responses.create(model="m", input="hi", stream=True)]
    assert [e.type for e in events][:2] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details is not None


async def test_streamed_token_ids_equal_the_unstreamed_ones(client: Any) -> None:
    with serve_over([StubVllm()], return_token_id_information=True) as url:
        sdk = client(url)
        whole = await sdk.responses.create(model="m", input="count")
        events = [e async for e in await sdk.responses.create(model="m", input="count", stream=True)]
        chunks = [
            c
            async for c in await sdk.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "count"}], stream=True
            )
        ]
    final = events[-1].response
    fields = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
    assert {f: final.output[-1].model_dump()[f] for f in fields} == {
        f: whole.output[-1].model_dump()[f] for f in fields
    }
    assert final.output[-1].model_dump()["generation_token_ids"] == reply_ids("Echo: count")
    chat_ids = [
        i for c in chunks if c.choices for i in (c.choices[0].model_extra or {}).get("token_ids") or []
    ]
    assert chat_ids == reply_ids("Echo: count")


async def test_a_first_chunk_over_512_kib_streams(client: Any) -> None:
    """An 200k-token prompt's `prompt_token_ids` make vLLM's first chunk an ~800 KB line. Before:
    aiohttp's line limit (512 KiB) made it a 500 `LineTooLong` before any event."""
    messages: list[Any] = [{"role": "user", "content": "y" * 200_000}, {"role": "user", "content": "hi"}]
    expected = prompt_ids(messages)
    with serve_over([StubVllm(max_model_len=300_000)], return_token_id_information=True) as url:
        sdk = client(url)
        events = [e async for e in await sdk.responses.create(model="m", input=messages, stream=True)]
        chunks = [
            c async for c in await sdk.chat.completions.create(model="m", messages=messages, stream=True)
        ]
    assert events[-1].type == "response.completed"
    assert events[-1].response.output[-1].model_dump()["prompt_token_ids"] == expected
    assert (chunks[0].model_extra or {})["prompt_token_ids"] == expected
    assert len(orjson.dumps(expected)) > 512 * 1024


async def test_a_first_chunk_over_the_line_limit_is_a_clear_502(client: Any) -> None:
    """A line over what we read (`max_event_bytes`, 64 MiB by default; 4 KiB here) is refused with
    a message that says so, before any event; never a 500 with aiohttp's `LineTooLong`."""
    messages: list[Any] = [{"role": "user", "content": "y" * 5_000}, {"role": "user", "content": "hi"}]
    with (
        serve_over(
            [StubVllm(max_model_len=20_000)], max_event_bytes=4096, return_token_id_information=True
        ) as url,
        pytest.raises(openai.APIStatusError, match="streamed an event line of more than 4096 bytes") as info,
    ):
        await client(url).responses.create(model="m", input=messages, stream=True)
    assert info.value.status_code == 502
    assert info.value.body["type"] == "InvalidOutputError"  # type: ignore[index]


async def test_streamed_tool_call_arguments_add_up(client: Any) -> None:
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    with serve_over([StubVllm()]) as url:
        async with client(url).responses.stream(
            model="m", input="find it", tools=[tool], tool_choice="required", max_output_tokens=200
        ) as stream:
            events = [event async for event in stream]
            final = await stream.get_final_response()
    (call,) = [item for item in final.output if item.type == "function_call"]
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert "".join(pieces) == call.arguments
    assert call.name == "lookup"


async def _event_types_until_error(stream: Any, match: str) -> list[str]:
    """The types of a Responses stream's events, read until the stream raises the APIError `match` says."""
    seen: list[str] = []

    async def read_all() -> None:
        async for event in stream:
            seen.append(event.type)

    with pytest.raises(openai.APIError, match=match):
        await read_all()
    return seen


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


async def test_an_upstream_that_ignores_stream_is_relayed_with_its_tool_call(client: Any) -> None:
    """Some OpenAI-compatible servers answer `stream: true` with the whole JSON completion: the
    stream carries it (the tool call and token ids included), never an empty "completed" stream."""
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    ask = {
        "model": "m",
        "input": "find it",
        "tools": [tool],
        "tool_choice": "required",
        "max_output_tokens": 200,
    }
    with serve_over([StubVllm()], return_token_id_information=True) as url:
        whole = await client(url).responses.create(**ask)
    with serve_over([StubVllm(fault="stream_ignored")], return_token_id_information=True) as url:
        async with client(url).responses.stream(**ask) as stream:
            events = [event async for event in stream]
            final = await stream.get_final_response()
    (call,) = [item for item in final.output if item.type == "function_call"]
    (expected,) = [item for item in whole.output if item.type == "function_call"]
    assert (call.name, call.arguments) == (expected.name, expected.arguments)
    assert [e.type for e in events][-1] == "response.completed"
    assert (
        final.output[-1].model_dump()["generation_token_ids"]
        == whole.output[-1].model_dump()["generation_token_ids"]
    )


async def test_an_upstream_that_ignores_stream_on_the_chat_route_is_one_chunk(client: Any) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    ask: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "find it"}],
        "tools": [tool],
        "tool_choice": "required",
        "max_tokens": 200,
    }
    with serve_over([StubVllm(fault="stream_ignored")]) as url:
        stream = await client(url).chat.completions.create(**ask, stream=True)
        chunks = [chunk async for chunk in stream]
        whole = await client(url).chat.completions.create(**ask)
    (streamed_call,) = [
        call for chunk in chunks for choice in chunk.choices for call in choice.delta.tool_calls or []
    ]
    (call,) = whole.choices[0].message.tool_calls or []
    assert (streamed_call.index, streamed_call.function.name) == (0, call.function.name)
    assert streamed_call.function.arguments == call.function.arguments
