"""The one HTTP client of a process: bounded connections, explicit timeouts, typed failures.

Every hop between servers goes through `HttpClient`. aiohttp's own exceptions are translated
here, at one boundary (as httpx's `map_httpcore_exceptions` does), into the `UpstreamError`
tree, so callers never see `aiohttp.ClientOSError` and never wait without a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson

from ng_cli.conversion.whole_answers import events_of_whole_answer
from ng_cli.errors import (
    UPSTREAM_DOWN_TYPE,
    InvalidOutputError,
    UpstreamDownError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from ng_cli.servers.deadline import DEADLINE_HEADER, remaining_s
from ng_cli.servers.hop import ConnectionLimits, RetryPolicy, Timeouts
from ng_cli.servers.session import RolloutCookies
from ng_cli.servers.sse import MAX_EVENT_BYTES, iter_lines, iter_sse_json

__all__ = [
    "ConnectionLimits",
    "HttpClient",
    "PlainText",
    "RetryPolicy",
    "Timeouts",
    "error_envelope",
    "is_retryable",
]


class PlainText(str):
    """A body that is not JSON, returned as its text where the caller accepts one (`text_ok`): a
    tool may answer the model in plain text, and NeMo Gym's agents hand it on as it came."""


_JSON_HEADERS = {"Content-Type": "application/json"}


def is_retryable(error: BaseException) -> bool:
    """Connection failures, timeouts and 5xx may succeed elsewhere or later; 4xx never will.

    Not retried either: an open circuit (`UpstreamDownError`), and a 502/503/504 that one of our
    own servers answered (its envelope names the server): it has already retried and waited
    with its own budget, so asking again would multiply that budget, not add a chance.
    """
    if isinstance(error, UpstreamDownError):
        return False
    if isinstance(error, UpstreamHTTPError):
        if error.status in (502, 503, 504) and error_envelope(error.body).get("server"):
            return False
        return error.status >= 500
    return isinstance(error, UpstreamTimeoutError | UpstreamUnavailableError)


def error_envelope(body: str) -> dict[str, Any]:
    """The `error` object of the OpenAI-style envelope our servers answer with, or {}."""
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return {}
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error if isinstance(error, dict) else {}


class HttpClient:
    """One aiohttp session per process, created lazily inside the running event loop.

    The cookie jar is disabled on purpose: servers talk for many rollouts at once, and a shared
    jar would leak one rollout's session cookie into another. Cookies are passed per call.
    """

    def __init__(
        self,
        *,
        timeouts: Timeouts | None = None,
        max_connections: int = 2048,
        max_connections_per_host: int = 0,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self.timeouts = timeouts or Timeouts()
        self.max_event_bytes = max_event_bytes
        """Longest server-sent event line `stream_json` reads (a longer one is InvalidOutputError)."""
        self._max_connections = max_connections
        self._max_connections_per_host = max_connections_per_host
        self._session: aiohttp.ClientSession | None = None

    def limit_connections(self, limits: ConnectionLimits) -> None:
        """Size the connection pool; only before the first call (the pool is made then)."""
        if self._session is not None:
            raise RuntimeError("limit_connections: this client has already made its connection pool")
        self._max_connections = limits.total
        self._max_connections_per_host = limits.per_host

    @property
    def limits(self) -> ConnectionLimits:
        return ConnectionLimits(total=self._max_connections, per_host=self._max_connections_per_host)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=self._max_connections_per_host,
                # Below uvicorn's default keep-alive (5 s), so we never reuse a connection the
                # server (ours, or vLLM's) is closing at that moment.
                keepalive_timeout=4.0,
                enable_cleanup_closed=True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self.timeouts.to_aiohttp(),
                cookie_jar=aiohttp.DummyCookieJar(),
                json_serialize=lambda obj: orjson.dumps(obj).decode(),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def request_json(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        cookies: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        text_ok: bool = False,
    ) -> Any:
        """Send one request and return the decoded JSON body (with `text_ok`, a body that is not
        JSON as `PlainText`); raise the UpstreamError tree.

        Under a caller's deadline (`ng_cli.servers.deadline`), the timeouts are capped by what is
        left of it and the rest is forwarded in `X-NG-Deadline-S`; a passed deadline sends nothing.
        """
        all_headers = {**_JSON_HEADERS, **(headers or {})}
        timeouts = self._under_deadline(f"{method} {url}", url, timeouts, all_headers)
        async with self._translated_errors(url, timeouts):
            data = None if json is None else orjson.dumps(json)
            if cookies:
                all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
            async with self.session.request(
                method, url, data=data, headers=all_headers, timeout=timeouts.to_aiohttp()
            ) as response:
                body = await response.read()
                if isinstance(cookies, RolloutCookies) and response.cookies:
                    cookies.keep({name: morsel.value for name, morsel in response.cookies.items()})
                if response.status >= 400:
                    raise _http_error(method, url, response.status, body.decode("utf-8", "replace"))
        if text_ok and body:
            try:
                return orjson.loads(body)
            except orjson.JSONDecodeError:
                return PlainText(body.decode("utf-8", "replace"))
        return _decoded_json(body, f"{method} {url}") if body else None

    def _under_deadline(
        self, what: str, url: str, timeouts: Timeouts | None, headers: dict[str, str]
    ) -> Timeouts:
        """The timeouts capped by the caller's deadline, whose rest goes on in `X-NG-Deadline-S`
        (added to `headers`); a passed deadline sends nothing."""
        timeouts = timeouts or self.timeouts
        left = remaining_s()
        if left is None:
            return timeouts
        if left <= 0:
            raise UpstreamTimeoutError(f"{what} not sent: the caller's deadline has passed", endpoint=url)
        headers[DEADLINE_HEADER] = f"{left:.3f}"
        return timeouts.capped(left)

    @asynccontextmanager
    async def stream_json(
        self,
        url: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """POST and read the answer as server-sent events: the JSON object of each `data:` line.

        Errors before and during the stream are the UpstreamError tree, as for `request_json`;
        an error status is raised before anything is yielded, and a stream that ends before its
        `[DONE]` or final event raises (`iter_sse_json`): cut-off text never reads as complete.
        Leaving the block early (the caller's client went away) closes the connection, which is
        how vLLM learns to abort.
        """
        all_headers = {**_JSON_HEADERS, "Accept": "text/event-stream", **(headers or {})}
        timeouts = self._under_deadline(f"POST {url}", url, timeouts, all_headers)
        async with self._translated_errors(url, timeouts):
            response = await self.session.post(
                url, data=orjson.dumps(payload), headers=all_headers, timeout=timeouts.to_aiohttp()
            )
        try:
            if response.status >= 400:
                async with self._translated_errors(url, timeouts):
                    body = await response.read()
                raise _http_error("POST", url, response.status, body.decode("utf-8", "replace"))
            if response.content_type == "application/json":  # `stream` ignored: the whole answer
                async with self._translated_errors(url, timeouts):
                    body = await _read_at_most(response, self.max_event_bytes, url)
                answer = _decoded_json(body, f"POST {url}")
                yield _listed(events_of_whole_answer(answer, source=url))
            else:
                lines = iter_lines(
                    response.content.iter_any(), source=url, max_line_bytes=self.max_event_bytes
                )
                yield self._translated_events(iter_sse_json(lines, source=url), url, timeouts)
        finally:
            # Read to the end: the connection goes back to the pool. Left early (the caller's
            # client went away, or the stream broke): closed, so the server stops generating.
            if response.content.at_eof():
                response.release()
            else:
                response.close()

    async def post_json(self, url: str, payload: Any, **kwargs: Any) -> Any:
        return await self.request_json("POST", url, json=payload, **kwargs)

    async def get_json(self, url: str, **kwargs: Any) -> Any:
        return await self.request_json("GET", url, **kwargs)

    async def post_json_with_retry(self, url: str, payload: Any, *, retry: RetryPolicy, **kwargs: Any) -> Any:
        """POST with bounded retries on connection errors, timeouts and 5xx (never on 4xx)."""
        for attempt in range(1, retry.max_attempts + 1):
            try:
                return await self.post_json(url, payload, **kwargs)
            except UpstreamError as error:
                if attempt == retry.max_attempts or not is_retryable(error):
                    raise
                delay_s = retry.delay_s(attempt)
                left = remaining_s()
                if left is not None and left <= delay_s:
                    raise  # the caller would be gone before the retry answers
                await asyncio.sleep(delay_s)
        raise AssertionError("RetryPolicy.max_attempts must be >= 1")

    async def _translated_events(
        self, events: AsyncIterator[dict[str, Any]], url: str, timeouts: Timeouts
    ) -> AsyncIterator[dict[str, Any]]:
        """The events, with a failure while reading them (connection cut, read timeout) typed."""
        async with self._translated_errors(url, timeouts):
            async for event in events:
                yield event

    @asynccontextmanager
    async def _translated_errors(self, url: str, timeouts: Timeouts) -> AsyncIterator[None]:
        try:
            yield
        except UpstreamError:
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise UpstreamTimeoutError(
                f"{url} did not answer in time (connect {timeouts.connect_s:g} s, read {timeouts.read_s:g} s, "
                f"total {timeouts.total_s:g} s)",
                endpoint=url,
            ) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError) as exc:
            raise UpstreamUnavailableError(
                f"{url} is unreachable: {type(exc).__name__}: {exc}", endpoint=url
            ) from exc


def _http_error(method: str, url: str, status: int, text: str) -> UpstreamError:
    """The error for an HTTP error answer; one of our servers' open-circuit 503 keeps its type."""
    message = f"{method} {url} answered HTTP {status}: {_short(text)}"
    envelope = error_envelope(text)
    if status == 503 and envelope.get("type") == UPSTREAM_DOWN_TYPE:
        down_s = envelope.get("upstream_down_s")
        return UpstreamDownError(
            str(envelope.get("message") or message),
            down_for_s=float(down_s) if isinstance(down_s, int | float) else 0.0,
            body=text,
            endpoint=url,
        )
    return UpstreamHTTPError(message, status=status, body=text, endpoint=url)


def _decoded_json(body: bytes, what: str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidOutputError(
            f"{what} answered with a body that is not JSON: {_short(body.decode('utf-8', 'replace'))}"
        ) from exc


async def _read_at_most(response: aiohttp.ClientResponse, limit: int, url: str) -> bytes:
    """The body of an answer that should have been a stream of events, each at most `limit` bytes:
    a whole answer is held to the same bound."""
    body = await response.content.read(limit + 1)
    if len(body) > limit:
        raise InvalidOutputError(
            f"{url} answered `stream: true` with a whole JSON body over {limit} bytes (the longest "
            "event this client reads)"
        )
    return body


async def _listed(events: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for event in events:
        yield event


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
