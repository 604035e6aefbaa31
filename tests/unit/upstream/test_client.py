"""`UpstreamClient` over a scripted HTTP client: retries, failover, 4xx handling, bounded waiting."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from typing import Any

import orjson
import pytest

from ng_cli.errors import (
    ContextOverflowError,
    InvalidOutputError,
    UpstreamDownError,
    UpstreamHTTPError,
    UpstreamUnavailableError,
)
from ng_cli.servers.http import HttpClient, RetryPolicy, Timeouts
from ng_cli.upstream.client import UpstreamClient
from ng_cli.upstream.metrics import UpstreamMetrics
from ng_cli.upstream.pool import EndpointPool

A, B = "http://a:8000/v1", "http://b:8000/v1"
OK = {"choices": []}


def refused(url: str) -> UpstreamUnavailableError:
    error = UpstreamUnavailableError(f"{url} is unreachable", endpoint=url)
    error.__cause__ = ConnectionRefusedError("Connection refused")
    return error


def http_error(status: int, message: str, code: Any = None) -> UpstreamHTTPError:
    body = orjson.dumps(
        {"error": {"message": message, "type": "BadRequestError", "code": code or status}}
    ).decode()
    return UpstreamHTTPError(f"POST answered HTTP {status}", status=status, body=body)


class ScriptedHttp(HttpClient):
    """Answers each URL from a script (exceptions are raised); an empty script answers OK."""

    def __init__(self) -> None:
        super().__init__()
        self.script: dict[str, deque[Any]] = defaultdict(deque)
        self.calls: list[str] = []
        self.headers: list[dict[str, str]] = []

    async def post_json(self, url: str, _payload: Any, **kwargs: Any) -> Any:
        self.calls.append(url)
        self.headers.append(dict(kwargs.get("headers") or {}))
        await asyncio.sleep(0)
        outcome = self.script[url].popleft() if self.script[url] else OK
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def make_client(
    http: ScriptedHttp,
    *,
    urls: tuple[str, ...] = (A, B),
    attempts: int = 3,
    deadline_s: float = 0.3,
    down_grace_s: float = 300.0,
) -> UpstreamClient:
    pool = EndpointPool(list(urls), cooldown_s=0.05, max_cooldown_s=1.0)
    return UpstreamClient(
        http,
        pool,
        UpstreamMetrics(pool),
        api_key="sk-test",
        timeouts=Timeouts(connect_s=1, read_s=1, total_s=1),
        retry=RetryPolicy(max_attempts=attempts, backoff_s=0.001, max_backoff_s=0.002),
        deadline_s=deadline_s,
        down_grace_s=down_grace_s,
    )


def sample(client: UpstreamClient, name: str, **labels: str) -> float:
    value = client.metrics.registry.get_sample_value(name, labels or None)
    return value or 0.0


async def test_connection_error_fails_over_to_the_other_endpoint() -> None:
    http = ScriptedHttp()
    http.script[f"{A}/chat/completions"].append(refused(A))
    client = make_client(http)
    assert await client.post("/chat/completions", {}, session_id="s") == OK
    assert http.calls == [f"{A}/chat/completions", f"{B}/chat/completions"]
    assert client.pool.endpoint_of("s") is client.pool.endpoints[1]
    assert not client.pool.endpoints[0].is_healthy
    assert "Connection refused" in (client.pool.endpoints[0].last_error or "")
    assert client.pool.failovers == 1
    assert sample(client, "ng_model_retries_total", endpoint=A) == 1
    assert sample(client, "ng_model_upstream_requests_total", endpoint=A, outcome="unavailable") == 1
    assert sample(client, "ng_model_upstream_requests_total", endpoint=B, outcome="ok") == 1


async def test_the_key_travels_in_the_authorization_header_only() -> None:
    http = ScriptedHttp()
    await make_client(http).post("/chat/completions", {"x": 1}, session_id=None)
    assert http.headers == [{"Authorization": "Bearer sk-test"}]


async def test_a_400_is_not_retried_and_carries_the_upstream_message() -> None:
    http = ScriptedHttp()
    http.script[f"{A}/chat/completions"].append(http_error(400, "temperature must be non-negative"))
    client = make_client(http)
    with pytest.raises(UpstreamHTTPError) as caught:
        await client.post("/chat/completions", {}, session_id="s")
    assert not isinstance(caught.value, ContextOverflowError)
    assert caught.value.status == 400
    assert caught.value.message == "temperature must be non-negative"
    assert http.calls == [f"{A}/chat/completions"]
    assert client.pool.endpoints[0].is_healthy
    assert sample(client, "ng_model_upstream_requests_total", endpoint=A, outcome="client_error") == 1


@pytest.mark.parametrize(
    "error",
    [
        http_error(
            400, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"
        ),
        http_error(400, "Input too long", code="context_length_exceeded"),
    ],
    ids=["vllm-message", "openai-code"],
)
async def test_overflow_is_typed(error: UpstreamHTTPError) -> None:
    http = ScriptedHttp()
    http.script[f"{A}/chat/completions"].append(error)
    client = make_client(http)
    with pytest.raises(ContextOverflowError):
        await client.post("/chat/completions", {}, session_id="s")
    assert len(http.calls) == 1
    assert sample(client, "ng_model_upstream_requests_total", endpoint=A, outcome="context_overflow") == 1


async def test_attempts_are_bounded() -> None:
    http = ScriptedHttp()
    for url in (A, B):
        http.script[f"{url}/chat/completions"].extend(http_error(500, "boom") for _ in range(5))
    client = make_client(http, attempts=2)
    with pytest.raises(UpstreamHTTPError) as caught:
        await client.post("/chat/completions", {}, session_id="s")
    assert caught.value.status == 500
    assert len(http.calls) == 2


async def test_all_down_answers_503_after_the_deadline() -> None:
    http = ScriptedHttp()
    http.script[f"{A}/chat/completions"].append(refused(A))
    http.script[f"{B}/chat/completions"].append(refused(B))
    client = make_client(http, deadline_s=0.3)
    started = time.monotonic()
    with pytest.raises(UpstreamUnavailableError) as caught:
        await client.post("/chat/completions", {}, session_id="s")
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 10.0  # ended by the 0.3 s deadline, not never (a bound, not a timing)
    assert A in caught.value.message
    assert B in caught.value.message
    assert sample(client, "ng_model_unavailable_total") == 1


async def test_a_waiting_call_resumes_when_an_endpoint_rejoins() -> None:
    http = ScriptedHttp()
    client = make_client(http, urls=(A,), deadline_s=60.0)
    (endpoint,) = client.pool.endpoints
    client.pool.record_failure(endpoint, "refused", now=asyncio.get_running_loop().time())

    async def rejoin_soon() -> None:
        await asyncio.sleep(0.05)
        assert client.pool.record_probe_success(endpoint, now=1e9)
        client.notify_rejoined()

    started = time.monotonic()
    answer, _ = await asyncio.gather(client.post("/chat/completions", {}, session_id="s"), rejoin_soon())
    assert answer == OK
    assert time.monotonic() - started < 30.0  # woken by the rejoin, not by the 60 s deadline


async def test_tokenize_goes_to_the_server_root_of_the_sessions_endpoint() -> None:
    http = ScriptedHttp()
    pool = EndpointPool([A, B], root_urls=["http://a:8000", "http://b:8000"])
    client = UpstreamClient(
        http,
        pool,
        UpstreamMetrics(pool),
        api_key="k",
        timeouts=Timeouts(),
        retry=RetryPolicy(),
        deadline_s=1.0,
    )
    await client.post("/chat/completions", {}, session_id="s1")
    await client.post("/chat/completions", {}, session_id="s2")
    await client.post("/tokenize", {}, session_id="s2", at_root=True)
    assert http.calls[-1] == "http://b:8000/tokenize"


async def test_a_non_json_answer_is_not_retried() -> None:
    http = ScriptedHttp()
    http.script[f"{A}/chat/completions"].append(InvalidOutputError("not JSON"))
    client = make_client(http)
    with pytest.raises(InvalidOutputError):
        await client.post("/chat/completions", {}, session_id="s")
    assert len(http.calls) == 1


async def test_the_circuit_opens_after_the_grace_and_closes_when_an_endpoint_rejoins() -> None:
    http = ScriptedHttp()
    client = make_client(http, urls=(A, B), deadline_s=30.0, down_grace_s=0.2)
    now = asyncio.get_running_loop().time()
    for endpoint in client.pool.endpoints:
        client.pool.record_failure(endpoint, "refused", now=now)
    assert client.pool.all_down_since == now

    started = time.monotonic()
    with pytest.raises(UpstreamDownError) as waited:  # inside the grace: waits, but only until it ends
        await client.post("/chat/completions", {}, session_id="s")
    assert time.monotonic() - started < 15.0  # not request_deadline_s (30 s)
    assert waited.value.down_for_s >= 0.2

    # Open: refused at once, i.e. on the call's first step, before it ever suspends (no clock).
    call = client.post("/chat/completions", {}, session_id="s")
    with pytest.raises(UpstreamDownError) as refused_now:
        call.send(None)
    assert "upstream_down_grace_s=0.2" in refused_now.value.message
    assert refused_now.value.error_type == "upstream_unavailable"
    assert http.calls == []  # nothing was sent to a dead upstream

    assert client.pool.record_probe_success(client.pool.endpoints[1], now=now + 1e6)
    assert client.pool.all_down_since is None
    assert await client.post("/chat/completions", {}, session_id="s") == OK
    assert http.calls == [B + "/chat/completions"]


async def test_one_endpoint_up_keeps_the_circuit_closed() -> None:
    client = make_client(ScriptedHttp(), urls=(A, B), down_grace_s=0.0)
    client.pool.record_failure(client.pool.endpoints[0], "refused", now=asyncio.get_running_loop().time())
    assert client.pool.all_down_since is None
    assert client.circuit_error() is None
    assert await client.post("/chat/completions", {}, session_id="s") == OK


async def test_a_caller_deadline_bounds_the_wait_for_an_endpoint() -> None:
    from ng_cli.servers.deadline import deadline_scope

    client = make_client(ScriptedHttp(), urls=(A,), deadline_s=30.0)
    client.pool.record_failure(client.pool.endpoints[0], "refused", now=asyncio.get_running_loop().time())
    started = time.monotonic()
    with deadline_scope(0.2), pytest.raises(UpstreamUnavailableError) as raised:
        await client.post("/chat/completions", {}, session_id="s")
    assert time.monotonic() - started < 15.0  # the caller's 0.2 s, not request_deadline_s=30
    assert not isinstance(raised.value, UpstreamDownError)  # inside the grace: plain unavailable


async def test_a_call_cut_by_the_callers_deadline_does_not_take_the_endpoint_down() -> None:
    from ng_cli.errors import UpstreamTimeoutError
    from ng_cli.servers.deadline import deadline_scope

    class SlowHttp(ScriptedHttp):
        async def post_json(self, url: str, _payload: Any, **_kwargs: Any) -> Any:
            self.calls.append(url)
            await asyncio.sleep(0.3)  # the real client's timeout, capped at the caller's deadline
            raise UpstreamTimeoutError(f"{url} did not answer in time", endpoint=url)

    http = SlowHttp()
    client = make_client(http, urls=(A, B), deadline_s=30.0)
    with deadline_scope(0.3), pytest.raises(UpstreamTimeoutError):
        await client.post("/chat/completions", {}, session_id="s")
    assert len(http.calls) == 1  # no second attempt after the caller gave up
    assert all(endpoint.is_healthy for endpoint in client.pool.endpoints)
