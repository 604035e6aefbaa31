"""vllm_model over two stub vLLM upstreams: affinity, failover when one dies or hangs, bounded 503s.

Real uvicorn servers on loopback; the upstream that gets killed runs in its own process, so its
death is a real one (connections reset, then refused).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import aiohttp
import orjson
import pytest

from ng_cli.servers.session import SESSION_COOKIE
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.served_model import STUB_MODEL, VLLM_MODEL_APP, serve_model_server
from tests.fixtures.stub_vllm import StubProcess, StubVllm

pytestmark = pytest.mark.integration


@contextmanager
def serve_model(base_urls: list[str], **overrides: Any) -> Iterator[str]:
    block = {
        "base_url": base_urls,
        **STUB_MODEL,
        "health_probe_interval_s": 0.5,
        # Neither timeout is a subject here (a killed stub refuses at once; a hung one answers
        # its probes): a 1 s start-up probe of two in-thread stubs failed once in CI on 2 busy
        # cores, so they are hang caps.
        "connect_timeout_s": HANG_CAP_S,
        "probe_timeout_s": HANG_CAP_S,
        "backoff_s": 0.01,
        **overrides,
    }
    with serve_model_server(VLLM_MODEL_APP, block) as url:
        yield url


@contextmanager
def serve_over(stubs: list[StubVllm], **overrides: Any) -> Iterator[tuple[str, list[str]]]:
    """vllm_model over in-thread stubs: (its URL, the stubs' root URLs)."""
    with ExitStack() as stack:
        roots = [stack.enter_context(serve_in_thread(stub.build_app())) for stub in stubs]
        yield stack.enter_context(serve_model([f"{root}/v1" for root in roots], **overrides)), roots


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(limit=1000)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


class Session:
    """One rollout's client: keeps the `ng_session` cookie the model server hands out."""

    def __init__(self, http: aiohttp.ClientSession, url: str, name: str) -> None:
        self.http, self.url, self.name = http, url, name
        self.cookie: str | None = None

    async def respond(self, text: str) -> tuple[int, dict[str, Any]]:
        headers = {"Content-Type": "application/json"}
        if self.cookie:
            headers["Cookie"] = f"{SESSION_COOKIE}={self.cookie}"
        body = orjson.dumps({"input": f"{self.name} {text}", "max_output_tokens": 64})
        async with self.http.post(f"{self.url}/v1/responses", data=body, headers=headers) as response:
            if SESSION_COOKIE in response.cookies:
                self.cookie = response.cookies[SESSION_COOKIE].value
            return response.status, orjson.loads(await response.read())


async def metric(http: aiohttp.ClientSession, url: str, name: str) -> float:
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + " ", name + "{"))
    )


async def stub_requests(http: aiohttp.ClientSession, root_url: str) -> list[dict[str, Any]]:
    async with http.get(f"{root_url}/_stub/requests") as response:
        return list(await response.json())


async def set_fault(http: aiohttp.ClientSession, root_url: str, fault: str, **extra: Any) -> None:
    async with http.post(f"{root_url}/_stub/fault", json={"fault": fault, **extra}) as response:
        assert response.status == 200


async def user_texts(http: aiohttp.ClientSession, root_url: str) -> list[str]:
    """The last user text of each chat call a stub saw."""
    return [str(request["messages"][-1]["content"]) for request in await stub_requests(http, root_url)]


def senders(requests: list[dict[str, Any]]) -> list[str]:
    """The session name of each request a stub saw (the first word of the user text)."""
    return [request["messages"][-1]["content"].split()[0] for request in requests]


async def test_sessions_stick_to_one_endpoint_and_spread_over_both(http: aiohttp.ClientSession) -> None:
    stubs = [StubVllm(), StubVllm()]
    with serve_over(stubs) as (url, _):
        sessions = [Session(http, url, f"s{i}") for i in range(40)]
        for turn in range(3):
            results = await asyncio.gather(*(s.respond(f"turn {turn}") for s in sessions))
            assert all(status == 200 for status, _ in results)
        assert await metric(http, url, "ng_model_failovers_total") == 0
    seen = [set(senders(list(stub.requests))) for stub in stubs]
    assert not seen[0] & seen[1], "a session was served by both endpoints"
    assert seen[0] | seen[1] == {s.name for s in sessions}
    assert min(len(seen[0]), len(seen[1])) >= 10, "new sessions should spread over idle endpoints"
    assert all(
        count == 3 for count in Counter(senders(list(stubs[0].requests) + list(stubs[1].requests))).values()
    )


async def test_killing_an_upstream_mid_run_moves_every_call_to_the_other(http: aiohttp.ClientSession) -> None:
    with (
        StubProcess(delay_s=0.2) as doomed,
        StubProcess(delay_s=0.2) as survivor,
        serve_model([doomed.base_url, survivor.base_url]) as url,
    ):
        sessions = [Session(http, url, f"s{i}") for i in range(200)]
        first = await asyncio.gather(*(s.respond("turn 0") for s in sessions))
        assert all(status == 200 for status, _ in first)
        on_doomed = set(senders(await stub_requests(http, doomed.root_url)))
        assert 50 <= len(on_doomed) <= 150
        # From now on the doomed upstream never answers in time: every second-turn call it got
        # is still in flight when it dies, however late a loaded machine gets to the kill.
        await set_fault(http, doomed.root_url, "none", delay_s=3600.0)

        async def kill_once_it_holds_a_call() -> None:
            """The kill follows an event (a second-turn call reached the doomed upstream), not a clock."""
            deadline = asyncio.get_running_loop().time() + 60
            while not any(text.endswith("turn 1") for text in await user_texts(http, doomed.root_url)):
                assert asyncio.get_running_loop().time() < deadline, "no second-turn call reached it"
                await asyncio.sleep(0.02)
            doomed.kill()

        second, _ = await asyncio.gather(
            asyncio.gather(*(s.respond("turn 1") for s in sessions)), kill_once_it_holds_a_call()
        )
        third = await asyncio.gather(*(s.respond("turn 2") for s in sessions))
        failovers = await metric(http, url, "ng_model_failovers_total")
        retries = await metric(http, url, "ng_model_retries_total")
        healthy = await metric(http, url, "ng_model_endpoint_healthy")
        served_by_survivor = senders(await stub_requests(http, survivor.root_url))
    assert [status for status, _ in second] == [200] * 200, [
        body for status, body in second if status != 200
    ][:3]
    assert [status for status, _ in third] == [200] * 200
    assert all(body["output"][0]["content"][0]["text"].startswith("Echo: s") for _, body in second + third)
    assert failovers >= len(on_doomed)
    assert retries >= 1, "calls in flight on the killed upstream were retried on the other"
    assert healthy == 1
    counts = Counter(served_by_survivor)
    assert all(counts[name] >= 2 for name in on_doomed), "moved sessions finish on the survivor"


async def test_a_hung_upstream_is_cut_off_by_the_read_timeout_and_retried(
    http: aiohttp.ClientSession,
) -> None:
    hung, fine = StubVllm(fault="hang"), StubVllm()
    with serve_over([hung, fine], read_timeout_s=0.5) as (url, (a, _)):
        started = time.monotonic()
        status, body = await Session(http, url, "s0").respond("hello")
        elapsed = time.monotonic() - started
        timeouts = await metric(
            http, url, 'ng_model_upstream_requests_total{endpoint="' + a + '/v1",outcome="timeout"}'
        )
        failovers = await metric(http, url, "ng_model_failovers_total")
    assert status == 200, body
    # Cut off by the 0.5 s read timeout, not the 600 s default: the bound tells them apart
    # without timing a busy machine.
    assert 0.5 <= elapsed < 60.0
    assert (hung.calls["chat"], fine.calls["chat"]) == (1, 1)
    assert timeouts == 1
    assert failovers == 1


async def test_all_upstreams_down_answers_503_within_the_deadline(http: aiohttp.ClientSession) -> None:
    with (
        StubProcess() as a,
        StubProcess() as b,
        serve_model([a.base_url, b.base_url], request_deadline_s=1.0) as url,
    ):
        status, _ = await Session(http, url, "s0").respond("warm up")
        assert status == 200
        a.kill()
        b.kill()
        started = time.monotonic()
        status, body = await Session(http, url, "s1").respond("anyone?")
        elapsed = time.monotonic() - started
        unavailable = await metric(http, url, "ng_model_unavailable_total")
    assert status == 503
    assert body["error"]["type"] == "UpstreamUnavailableError"
    assert a.base_url in body["error"]["message"]
    assert b.base_url in body["error"]["message"]
    assert elapsed < 30.0, "answered by the 1 s request deadline, not the 60 s default"
    assert unavailable == 1


async def test_a_non_overflow_400_is_returned_and_never_retried(http: aiohttp.ClientSession) -> None:
    stubs = [StubVllm(fault="bad_request"), StubVllm(fault="bad_request")]
    with serve_over(stubs) as (url, _):
        status, body = await Session(http, url, "s0").respond("hi")
        retries = await metric(http, url, "ng_model_retries_total")
        healthy = await metric(http, url, "ng_model_endpoint_healthy")
    assert status == 400
    assert body["error"]["message"] == "temperature must be non-negative, got -1.0."
    assert stubs[0].calls["chat"] + stubs[1].calls["chat"] == 1
    assert retries == 0
    assert healthy == 2, "a 4xx says nothing bad about the endpoint"


async def test_overflow_is_an_incomplete_empty_response_and_counted(http: aiohttp.ClientSession) -> None:
    stubs = [StubVllm(max_model_len=64), StubVllm(max_model_len=64)]
    with serve_over(stubs) as (url, _):
        status, body = await Session(http, url, "s0").respond("x" * 500)
        overflows = await metric(http, url, "ng_model_context_overflows_total")
        retries = await metric(http, url, "ng_model_retries_total")
    assert status == 200
    assert body["status"] == "incomplete"
    assert body["incomplete_details"]["reason"] == "context_length_exceeded"
    assert body["output"][0]["content"][0]["text"] == ""
    assert overflows == 1
    assert retries == 0
    assert stubs[0].calls["chat"] + stubs[1].calls["chat"] == 1
