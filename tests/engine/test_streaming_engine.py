"""Streaming and cancellation against the real CPU vLLM (tiny random-weight Qwen2).

Streaming must be vLLM's stream relayed as it comes (a first event while vLLM is still
decoding), in the event order the official `openai` SDK's stream helper accepts, ending with the
same Response a non-streamed call gives (token ids for training included). A client that goes
away must stop the engine's work: its running-requests metric drops.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import aiohttp
import orjson
import pytest

from tests.fixtures.model_server import serve_model
from tests.fixtures.vllm_engine import VllmServer

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ASK = [{"role": "user", "content": "What is the weather in Paris today?"}]
LONG: dict[str, Any] = {
    "max_output_tokens": 1900,
    "ignore_eos": True,
    "temperature": 0,
    "vllm_xargs": {"step_sleep_s": 0.01},
}
"""A generation of at least 19 s, nearly all of it asleep: the test engine's step_sleep plugin
(tests/fixtures/vllm_plugins) sleeps 10 ms in each of its 1,900 steps (the tiny model's context is
2,048 tokens; `ignore_eos` and `vllm_xargs` pass through to vLLM). A test that must act while the
engine still decodes has that long, and the engine takes no CPU from the test or from vLLM's API
server meanwhile: at full speed (about 3 s here, 1 s on a faster CPU) the generation once ended
whole between two polls of a test on a busy 2-core machine."""
GENERATED = "vllm:generation_tokens_total"
IDLE_CAP_S = 30.0


async def engine_metric(engine: VllmServer, name: str) -> float:
    """One of vLLM's /metrics series (summed over its label sets)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{engine.root_url}/metrics", headers={"Authorization": f"Bearer {engine.api_key}"}
        ) as answer,
    ):
        text = await answer.text()
    values = re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.MULTILINE)
    assert values, f"vLLM's /metrics has no {name}"
    return sum(float(value) for value in values)


async def engine_running(engine: VllmServer) -> float:
    """vLLM's `vllm:num_requests_running` gauge."""
    return await engine_metric(engine, "vllm:num_requests_running")


async def wait_until_idle(engine: VllmServer, *, within_s: float) -> float:
    """Poll the engine until nothing runs; the seconds it took (fails past `within_s`, a cap for
    a hung engine, not the measurement: tests/engine prints the time, docs/vllm_model.md has it)."""
    started = time.monotonic()
    while await engine_running(engine) > 0:
        assert time.monotonic() - started < within_s, f"the engine still runs the request after {within_s} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def wait_until_running(engine: VllmServer, call: asyncio.Task[Any]) -> None:
    for _ in range(600):
        if await engine_running(engine) > 0:
            return
        if call.done():
            answer = call.result()
            pytest.fail(f"the call ended before the engine ran it: {answer.status} {await answer.text()}")
        await asyncio.sleep(0.05)
    pytest.fail("the engine never started the request")


def our_metric(url: str, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match[1]) if match else 0.0


async def wait_for_our_metric(url: str, name: str, value: float, *, within_s: float) -> None:
    """Wait until the model server's counter reaches `value`. The relay counts an abort when its
    generator is closed, which may come after vLLM has already gone idle (the engine sees the
    upstream connection drop first): reading the counter once at idle was a race (`0.0 == 1`).
    `within_s` caps a counter that never moves; a count past `value` fails at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while (seen := await asyncio.to_thread(our_metric, url, name)) < value:
        assert loop.time() < deadline, f"{name} stayed at {seen} (expected {value}) for {within_s} s"
        await asyncio.sleep(0.05)
    assert seen == value, f"{name} is {seen}, expected {value}"


async def assert_stopped_and_counted(engine: VllmServer, url: str, generated_before: float) -> None:
    """After a client left mid-generation: the engine goes idle (the time is printed) having
    generated fewer tokens than asked (it stopped early, and the client did leave before the end),
    and the model server at `url` counts one abort."""
    print(f"engine idle {await wait_until_idle(engine, within_s=IDLE_CAP_S):.2f} s after the disconnect")
    assert await engine_metric(engine, GENERATED) - generated_before < LONG["max_output_tokens"]
    await wait_for_our_metric(url, "ng_model_aborted_requests_total", 1, within_s=IDLE_CAP_S)


async def test_responses_stream_is_relayed_while_vllm_decodes(vllm_engine: VllmServer, sdk: Any) -> None:
    with serve_model(vllm_engine) as url:
        stream = await sdk(url).responses.create(model="m", input=ASK, stream=True, **_sdk_extra(LONG))
        kinds = []
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                # The first token is here while the engine still decodes the rest: relayed, not buffered.
                assert await engine_running(vllm_engine) == 1
                break
        await stream.close()
        await wait_until_idle(vllm_engine, within_s=IDLE_CAP_S)
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]


async def test_streamed_response_equals_the_unstreamed_one_with_token_ids(
    vllm_engine: VllmServer, sdk: Any
) -> None:
    """Cut by max_output_tokens (random weights never stop): the stream ends with
    `response.incomplete`, as OpenAI's does, carrying the same Response as the unstreamed call."""
    request = {"input": ASK, "max_output_tokens": 24, "temperature": 0, "extra_body": {"seed": 7}}
    with serve_model(vllm_engine, return_token_id_information=True) as url:
        client = sdk(url)
        whole = await client.responses.create(model="m", **request)
        events = [event async for event in await client.responses.create(model="m", stream=True, **request)]
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert events[-1].type == "response.incomplete"
    final = events[-1].response
    streamed_last = final.output[-1].model_dump()
    whole_last = whole.output[-1].model_dump()
    for field in ("prompt_token_ids", "generation_token_ids", "generation_log_probs"):
        assert streamed_last[field] == whole_last[field], field
    assert len(streamed_last["generation_token_ids"]) == final.usage.output_tokens
    assert "".join(deltas) == final.output_text == whole.output_text
    assert final.status == whole.status


async def test_streamed_forced_tool_call(vllm_engine: VllmServer, sdk: Any) -> None:
    request = {
        "input": ASK,
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 64,
        "temperature": 0,
    }
    with serve_model(vllm_engine) as url:
        events = [event async for event in await sdk(url).responses.create(model="m", stream=True, **request)]
    assert events[-1].type in ("response.completed", "response.incomplete")  # random weights may hit the cap
    final = events[-1].response
    calls = [item for item in final.output if item.type == "function_call"]
    assert [call.name for call in calls] == ["get_weather"]
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert pieces
    assert "".join(pieces) == calls[0].arguments
    added = next(
        e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"
    )
    assert (added.item.call_id, added.item.id) == (calls[0].call_id, calls[0].id)
    done = next(e for e in events if e.type == "response.output_item.done")
    assert done.item == calls[0]


async def test_chat_stream_is_vllms_chunks_with_token_ids(vllm_engine: VllmServer, sdk: Any) -> None:
    with serve_model(vllm_engine, return_token_id_information=True) as url:
        stream = await sdk(url).chat.completions.create(
            model="m",
            messages=ASK,
            max_tokens=16,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    ids = [i for c in chunks if c.choices for i in (c.choices[0].model_extra or {}).get("token_ids") or []]
    assert ids
    assert len(ids) == sum(c.usage.completion_tokens for c in chunks if c.usage)
    assert isinstance(text, str)
    assert any((c.model_extra or {}).get("prompt_token_ids") for c in chunks)


async def test_a_client_that_disconnects_stops_the_engine(vllm_engine: VllmServer) -> None:
    """The acceptance: a long generation whose client goes away while the engine decodes it leaves
    the engine (its running-requests metric back to 0); the model server counts the abort. That the
    engine stopped decoding is asserted by the tokens it generated (fewer than the request asked
    for), not by a clock; the time to idle is printed (about 0.1 s here, the acceptance says 1 s).
    The client leaves as soon as the engine runs the request (an event), never after a sleep: a
    fast CPU decodes the tiny model at up to about 1,900 tokens/s, so a 0.5 s sleep could outlast
    the generation (a fresh-clone run saw the stream end whole and no abort counted). LONG lasts
    at least 19 s, so no busy machine can delay the client past its end."""
    generated_before = await engine_metric(vllm_engine, GENERATED)
    with serve_model(vllm_engine) as url:
        async with aiohttp.ClientSession() as http:
            body = orjson.dumps({"input": ASK, **LONG})
            call = asyncio.create_task(
                http.post(f"{url}/v1/responses", data=body, headers={"Content-Type": "application/json"})
            )
            await wait_until_running(vllm_engine, call)
            call.cancel()  # aiohttp closes the connection: the client is gone
            with pytest.raises(asyncio.CancelledError):
                await call
        await assert_stopped_and_counted(vllm_engine, url, generated_before)


async def test_a_streaming_client_that_disconnects_stops_the_engine(vllm_engine: VllmServer) -> None:
    """As above, streamed: the client drops the connection as soon as the first chunk is here (an
    event, not a sleep that a fast machine's whole generation can outlast)."""
    generated_before = await engine_metric(vllm_engine, GENERATED)
    with serve_model(vllm_engine) as url:
        async with aiohttp.ClientSession() as http:
            body = orjson.dumps({"messages": ASK, **_as_chat(LONG), "stream": True})
            async with http.post(
                f"{url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
            ) as answer:
                assert answer.status == 200
                assert (await answer.content.readline()).startswith(b"data: ")
                answer.close()  # drop the connection mid-stream
        await assert_stopped_and_counted(vllm_engine, url, generated_before)


def _as_chat(fields: dict[str, Any]) -> dict[str, Any]:
    """Responses request fields as a chat completion's (the token cap is `max_tokens` there)."""
    return {("max_tokens" if key == "max_output_tokens" else key): value for key, value in fields.items()}


async def test_long_sleeps_in_the_engine(vllm_engine: VllmServer) -> None:
    """What the tests above rely on: `vllm_xargs.step_sleep_s` reaches the engine through
    /v1/responses and the test engine sleeps it in every step. 20 steps of 0.1 s cannot take less
    than 2 s (a lower bound that a busy machine only makes larger; at full speed 20 tokens take
    about 0.05 s here), so this fails if the plugin is not loaded or the field is lost on the way."""
    with serve_model(vllm_engine) as url:
        async with aiohttp.ClientSession() as http:
            body = orjson.dumps(
                {"input": ASK, **LONG, "max_output_tokens": 20, "vllm_xargs": {"step_sleep_s": 0.1}}
            )
            started = time.monotonic()
            async with http.post(
                f"{url}/v1/responses", data=body, headers={"Content-Type": "application/json"}
            ) as answer:
                assert answer.status == 200, await answer.text()
                assert (await answer.json())["usage"]["output_tokens"] == 20
            assert time.monotonic() - started >= 20 * 0.1


def _sdk_extra(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields the SDK's signature lacks go in `extra_body` (as a user would send them)."""
    known = {key: value for key, value in fields.items() if key in ("max_output_tokens", "temperature")}
    extra = {key: value for key, value in fields.items() if key not in known}
    return {**known, "extra_body": extra} if extra else known


async def test_the_sdk_stream_helper_accumulates_a_finished_answer(vllm_engine: VllmServer, sdk: Any) -> None:
    """Structured output makes the random model stop: `response.completed`, which the SDK's
    `responses.stream()` helper checks item by item against what it accumulated."""
    schema = {"type": "string", "enum": ["sunny", "rainy"]}
    text = {"format": {"type": "json_schema", "name": "weather", "schema": schema}}
    with serve_model(vllm_engine) as url:
        async with sdk(url).responses.stream(model="m", input=ASK, text=text, max_output_tokens=32) as stream:
            deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
            final = await stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text in ('"sunny"', '"rainy"')
    assert "".join(deltas) == final.output_text
