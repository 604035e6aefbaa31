"""`UpstreamClient`: one call to a pool of endpoints — routed, bounded, retried, failed over.

    call ──route(session)──> endpoint ──POST──> 2xx ............................ body
                  │                      ├──> 4xx: overflow? ContextOverflowError, else
                  │                      │         UpstreamHTTPError with the upstream's message
                  │                      │         (the endpoint works: never retried)
                  │                      └──> connect error / timeout / 5xx: endpoint down,
                  │                           backoff, next attempt (its session moves)
                  └── no healthy endpoint: wait for one to rejoin, at most `deadline_s` in all,
                      then UpstreamUnavailableError (503); once every endpoint has been down
                      for `down_grace_s`, UpstreamDownError (503 upstream_unavailable) at once

Attempts are bounded by the retry policy and each by its timeouts; time without an endpoint to
run on (waiting for a rejoin, backoff) is bounded by `deadline_s` and by the caller's deadline
(`X-NG-Deadline-S`). Nothing waits forever, and nothing waits longer than its caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from ng_cli.conversion.overflow import is_context_overflow
from ng_cli.errors import (
    ContextOverflowError,
    InvalidOutputError,
    UpstreamDownError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from ng_cli.protocol.errors import parse_error_body
from ng_cli.servers.deadline import remaining_s
from ng_cli.servers.http import HttpClient, RetryPolicy, Timeouts, is_retryable
from ng_cli.upstream.metrics import UpstreamMetrics
from ng_cli.upstream.pool import Endpoint, EndpointPool

__all__ = ["UpstreamClient"]

logger = logging.getLogger("ng_cli.upstream")

_CLOCK_SLACK_S = 0.001
"""A wait timed to end when the circuit opens may wake a hair early; it counts as open."""
_DEADLINE_SLACK_S = 0.05
"""A timeout this close to the caller's deadline was the deadline's (the two timers race)."""


class UpstreamClient:
    """Sends JSON requests to the endpoint of a session, with failover and bounded waiting."""

    def __init__(
        self,
        http: HttpClient,
        pool: EndpointPool,
        metrics: UpstreamMetrics,
        *,
        api_key: str,
        timeouts: Timeouts,
        retry: RetryPolicy,
        deadline_s: float,
        down_grace_s: float = 300.0,
        on_endpoint_down: Callable[[Endpoint], None] | None = None,
        default_headers: Mapping[str, str] | None = None,
        authorizations: Mapping[str, str] | None = None,
    ) -> None:
        self.http = http
        self.pool = pool
        self.metrics = metrics
        self.timeouts = timeouts
        self.retry = retry
        self.deadline_s = deadline_s
        self.down_grace_s = down_grace_s
        self.on_endpoint_down = on_endpoint_down
        extra = {k: v for k, v in (default_headers or {}).items() if k.lower() != "authorization"}
        self.headers: Mapping[str, str] = {**extra, "Authorization": f"Bearer {api_key}"}
        self.authorizations: dict[str, str] = dict(authorizations or {})
        """Base URL -> the Authorization value its URL's `user:password@` asked for (`userinfo`)."""
        self._rejoined = asyncio.Event()

    def headers_for(self, endpoint: Endpoint) -> Mapping[str, str]:
        """The headers of every request to `endpoint`: basic auth when its URL had userinfo."""
        basic = self.authorizations.get(endpoint.base_url)
        return self.headers if basic is None else {**self.headers, "Authorization": basic}

    def notify_rejoined(self) -> None:
        """Wake every call waiting for a healthy endpoint (the prober calls this)."""
        self._rejoined.set()
        self._rejoined = asyncio.Event()

    async def post(self, path: str, payload: Any, *, session_id: str | None, at_root: bool = False) -> Any:
        """POST `payload` to `<base_url><path>` (or `<root_url><path>`) of the session's endpoint."""
        attempts = _Attempts(self, path, session_id)
        while True:
            endpoint = await attempts.next_endpoint()
            url = (endpoint.root_url if at_root else endpoint.base_url) + path
            try:
                return await self._attempt(endpoint, url, payload)
            except UpstreamError as error:
                if not await attempts.back_off(endpoint, error):
                    raise

    @asynccontextmanager
    async def stream(
        self, path: str, payload: Any, *, session_id: str | None
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """POST a streaming request; yields its events. Failover happens before the first event
        (nothing has reached our caller yet); an error after it is raised to the caller, who has
        already sent bytes and must end its own stream with an error event."""
        attempts = _Attempts(self, path, session_id)
        while True:
            endpoint = await attempts.next_endpoint()
            stack = AsyncExitStack()
            try:
                events = await stack.enter_async_context(
                    self._stream_attempt(endpoint, endpoint.base_url + path, payload)
                )
                first = await anext(events, None)
            except BaseException as error:
                await stack.aclose()
                if not await attempts.back_off(endpoint, error):
                    raise
                continue
            async with stack:
                yield _prepended(first, events)
            return

    @asynccontextmanager
    async def _stream_attempt(
        self, endpoint: Endpoint, url: str, payload: Any
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """One streamed attempt, accounted as `_attempt` is (held until the stream is read)."""
        async with (
            self._accounted(endpoint),
            self.http.stream_json(
                url, payload, headers=self.headers_for(endpoint), timeouts=self.timeouts
            ) as events,
        ):
            yield events

    async def _attempt(self, endpoint: Endpoint, url: str, payload: Any) -> Any:
        async with self._accounted(endpoint):
            return await self.http.post_json(
                url, payload, headers=self.headers_for(endpoint), timeouts=self.timeouts
            )

    @asynccontextmanager
    async def _accounted(self, endpoint: Endpoint) -> AsyncIterator[None]:
        """One attempt on `endpoint`: in flight while it runs, its latency and outcome counted, the
        endpoint marked down for what is its fault (5xx, timeout, unreachable), a 4xx translated."""
        metrics = self.metrics.endpoints[endpoint.base_url]
        outcome = "ok"
        self.pool.begin(endpoint)
        started = time.perf_counter()
        try:
            yield
        except UpstreamHTTPError as error:
            if error.status >= 500:
                outcome = "server_error"
                self._endpoint_failed(endpoint, f"HTTP {error.status}")
                raise
            self.pool.record_success(endpoint)  # it answered: the request was at fault
            translated = _client_error(error, endpoint)
            outcome = "context_overflow" if isinstance(translated, ContextOverflowError) else "client_error"
            try:
                raise translated from None
            finally:
                # A frame that names the exception it raises is a reference cycle (frame ->
                # exception -> traceback -> frame): the request and its payload, held by the
                # frames, would wait for the cyclic GC instead of going when the call ends.
                del translated
        except UpstreamTimeoutError:
            outcome = "timeout"
            if not _caller_gave_up():  # cut by the caller's deadline, the endpoint is not to blame
                self._endpoint_failed(
                    endpoint,
                    f"timed out (connect {self.timeouts.connect_s:g} s, read {self.timeouts.read_s:g} s)",
                )
            raise
        except UpstreamUnavailableError as error:
            outcome = "unavailable"
            self._endpoint_failed(endpoint, _cause(error))
            raise
        except InvalidOutputError:
            outcome = "invalid"
            raise
        except (asyncio.CancelledError, GeneratorExit):
            outcome = "aborted"  # our caller went away; the closed connection makes vLLM abort
            raise
        finally:
            self.pool.end(endpoint)
            metrics.latency.observe(time.perf_counter() - started)
            metrics.outcomes[outcome].inc()
        self.pool.record_success(endpoint)

    def _endpoint_failed(self, endpoint: Endpoint, reason: str) -> None:
        if self.pool.record_failure(endpoint, reason, now=asyncio.get_running_loop().time()):
            logger.warning(
                "endpoint %s is down (%s); its sessions move to the other endpoints until a health probe passes",
                endpoint.base_url,
                reason,
            )
            if self.on_endpoint_down is not None:
                self.on_endpoint_down(endpoint)

    def circuit_error(self) -> UpstreamDownError | None:
        """The open circuit's error when every endpoint has been down for the grace period."""
        since = self.pool.all_down_since
        if since is None:
            return None
        down_s = asyncio.get_running_loop().time() - since
        if down_s + _CLOCK_SLACK_S < self.down_grace_s:
            return None
        return UpstreamDownError(
            f"upstream unavailable: every endpoint has been down for {down_s:.0f} s "
            f"(upstream_down_grace_s={self.down_grace_s:g}); probing in the background: {self.pool.describe_down()}",
            down_for_s=down_s,
            hint="start (or restart) the model server behind base_url; requests succeed again once it answers",
        )

    async def _wait_for_endpoint(self, budget_s: float) -> float:
        """Wait for an endpoint to rejoin, no longer than the budget or until the circuit opens;
        the budget left, or UpstreamDownError / UpstreamUnavailableError."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        until_open_s = budget_s
        if self.pool.all_down_since is not None:
            until_open_s = self.pool.all_down_since + self.down_grace_s - started
        wait_s = min(budget_s, until_open_s)
        if wait_s > 0 and self.circuit_error() is None:
            try:
                await asyncio.wait_for(self._rejoined.wait(), timeout=wait_s)
            except TimeoutError:
                pass
            else:
                return budget_s - (loop.time() - started)
        self.metrics.unavailable.inc()
        circuit = self.circuit_error()
        if circuit is not None:
            raise circuit
        raise UpstreamUnavailableError(
            f"no healthy upstream endpoint within request_deadline_s={self.deadline_s:g}: {self.pool.describe_down()}",
            hint="check that the model server is running: curl <base_url>/models",
        )


class _Attempts:
    """The retry loop `post` and `stream` share: the session's endpoint for each attempt (waiting
    for one while none is healthy), one budget for all attempts and waits, backoff between them."""

    def __init__(self, client: UpstreamClient, path: str, session_id: str | None) -> None:
        self.client = client
        self.path = path
        self.session_id = session_id
        caller_s = remaining_s()
        self.budget_s = client.deadline_s if caller_s is None else min(client.deadline_s, caller_s)
        self.attempt = 0

    async def next_endpoint(self) -> Endpoint:
        while True:
            endpoint = self.client.pool.route(self.session_id)
            if endpoint is None:
                self.budget_s = await self.client._wait_for_endpoint(self.budget_s)
                continue
            if self.attempt and _caller_gave_up():
                raise UpstreamTimeoutError(
                    f"{self.path}: the caller's deadline passed before attempt {self.attempt + 1}"
                )
            self.attempt += 1
            return endpoint

    async def back_off(self, endpoint: Endpoint, error: BaseException) -> bool:
        """Sleep before the next attempt; False when another attempt cannot help (the caller
        re-raises: raised here, `error` would tie this frame into a reference cycle with it)."""
        client = self.client
        if not isinstance(error, UpstreamError) or not is_retryable(error):
            return False
        if self.attempt >= client.retry.max_attempts or self.budget_s <= 0:
            return False
        client.metrics.endpoints[endpoint.base_url].retries.inc()
        delay_s = min(client.retry.delay_s(self.attempt), self.budget_s)
        await asyncio.sleep(delay_s)
        self.budget_s -= delay_s
        return True


def _caller_gave_up() -> bool:
    """Whether the caller's deadline (`X-NG-Deadline-S`) has (all but) passed."""
    left = remaining_s()
    return left is not None and left <= _DEADLINE_SLACK_S


def _client_error(error: UpstreamHTTPError, endpoint: Endpoint) -> UpstreamHTTPError:
    """The upstream's own message (not our URL dump), typed as overflow when it is one."""
    detail = parse_error_body(error.body)
    message = detail.message if detail is not None else error.body.strip()[:2000] or f"HTTP {error.status}"
    code = detail.code if detail is not None else None
    error_type = (
        ContextOverflowError if is_context_overflow(error.status, message, code=code) else UpstreamHTTPError
    )
    return error_type(message, status=error.status, body=error.body, endpoint=endpoint.base_url)


def _cause(error: UpstreamUnavailableError) -> str:
    cause = error.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else error.message


async def _prepended(
    first: dict[str, Any] | None, rest: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    """The stream again, its first event (already read to decide on failover) included."""
    if first is None:
        return
    yield first
    async for event in rest:
        yield event
