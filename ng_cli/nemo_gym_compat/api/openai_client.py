"""`nemo_gym.openai_utils.NeMoGymAsyncOpenAI`: NeMo Gym's thin client for an OpenAI-style
endpoint given by URL (verifif calls its judge with it, at `judge_base_url`), rather than a
server of the stack given by name (`server_client`).

It is theirs in shape: a pydantic model (`base_url`, `api_key`, `internal`,
`max_connection_retries`, `max_http_attempts`, `default_headers`) whose `create_*` methods post
the keywords as the JSON body and answer the endpoint's JSON as a dict. Calls go through the
layer's one HTTP path (`server_utils.request`: its aiohttp session, connection errors retried
there); this module adds the bearer key, the retry of answers whose status is in
`RETRY_ERROR_CODES` (0.5 s apart, `max_http_attempts` in all; an `internal` client keeps
retrying rate limits, as theirs), and typed failures: `EndpointHTTPError` (an
`aiohttp.ClientResponseError`, which servers catch) for an HTTP error, `PermanentEndpointError`
once the endpoint calls the key invalid or spent (later calls on that client fail without a
request, as theirs), `EndpointBodyError` for a success whose body is not JSON.

The key is never in an error, a repr or a log line: errors carry no request headers, and every
body or URL quoted is redacted of it (an endpoint that echoes the Authorization header).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from yarl import URL

from ng_cli.config.secrets import Redactor
from ng_cli.nemo_gym_compat.api.server_utils import MAX_NUM_TRIES, request

__all__ = [
    "PERMANENT_AUTH_CODES",
    "PERMANENT_QUOTA_CODES",
    "RATE_LIMIT_ERROR_CODES",
    "RETRY_ERROR_CODES",
    "EndpointBodyError",
    "EndpointHTTPError",
    "NeMoGymAsyncOpenAI",
    "PermanentEndpointError",
]

logger = logging.getLogger(__name__)

RATE_LIMIT_ERROR_CODES = [429, 502, 503, 504, 520]
RETRY_ERROR_CODES = [*RATE_LIMIT_ERROR_CODES, 404, 408, 500]
PERMANENT_QUOTA_CODES = ("budget_exceeded", "insufficient_quota")
"""A 429 with one of these `error.code`/`error.type` is a spent key, not a passing rate limit."""
PERMANENT_AUTH_CODES = ("invalid_api_key", "invalid_api_token", "authentication_error")
RETRY_PAUSE_S = 0.5
SNIPPET_CHARS = 200


class EndpointHTTPError(aiohttp.ClientResponseError):
    """The endpoint answered an HTTP error (after the retries its status allows).

    `status` and `response_content` (the body, redacted of the key) as NeMo Gym's errors carry
    them; `request_info` names the method and URL but no header."""

    response_content: bytes


class PermanentEndpointError(EndpointHTTPError):
    """The endpoint called the key invalid (401/403) or spent (429): this client sends no more."""


class EndpointBodyError(ValueError):
    """The endpoint answered success with a body that is not JSON."""


def _error_codes(body: bytes) -> set[str]:
    """`error.code` / `error.type` of an OpenAI-style error body, lower-cased."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return set()
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, str):
        return {error.lower()}
    if not isinstance(error, dict):
        return set()
    return {str(error[key]).lower() for key in ("code", "type") if error.get(key) is not None}


def _is_permanent(status: int, body: bytes) -> bool:
    """NeMo Gym's test: a revoked/invalid key (401, 403) or a spent one (429), read from the body."""
    codes = _error_codes(body)
    if status in (401, 403):
        lowered = body.decode("utf-8", errors="replace").lower()
        return bool(codes & set(PERMANENT_AUTH_CODES)) or any(
            phrase in lowered for phrase in ("invalid api key", "incorrect api key")
        )
    return status == 429 and bool(codes & set(PERMANENT_QUOTA_CODES))


class NeMoGymAsyncOpenAI(BaseModel):
    """An OpenAI-style endpoint's client: `await client.create_chat_completion(model=..., messages=...)`
    answers the endpoint's JSON (a dict), as NeMo Gym's does."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a bad value is never echoed: the key

    base_url: str
    api_key: str = Field(repr=False)
    internal: bool = False
    """True for the stack's own servers: rate-limit answers are retried without a limit."""
    max_connection_retries: int | None = None
    """Connection-error retries per request; None: the layer's own (NeMo Gym retries forever)."""
    max_http_attempts: int = Field(default=MAX_NUM_TRIES, ge=1)
    default_headers: dict[str, str] = Field(default_factory=dict)

    _tripped: tuple[str, int, bytes] | None = PrivateAttr(default=None)
    """(url, status, body) of the answer that called the key invalid or spent."""

    def _redactor(self) -> Redactor:
        return Redactor([self.api_key])

    def _error(
        self, method: str, url: str, status: int, body: bytes, *, permanent: bool = False
    ) -> EndpointHTTPError:
        redactor = self._redactor()
        body = redactor.bytes(body)
        shown_url = redactor.text(url)
        snippet = body.decode("utf-8", errors="replace")[:SNIPPET_CHARS]
        verdict = "; the key is invalid or spent: this client sends no more requests" if permanent else ""
        kind = PermanentEndpointError if permanent else EndpointHTTPError
        info = aiohttp.RequestInfo(URL(shown_url), method, CIMultiDictProxy(CIMultiDict()), URL(shown_url))
        error = kind(
            info,
            (),
            status=status,
            message=f"{method} {shown_url} answered HTTP {status}{verdict}: {snippet}",
        )
        error.response_content = body
        return error

    async def _request(self, method: str, url: str, **kwargs: Any) -> bytes:
        """The body of a successful answer; HTTP errors retried by NeMo Gym's rule, then raised."""
        if self._tripped is not None:
            raise self._error(method, *self._tripped, permanent=True)
        headers = {
            **self.default_headers,
            **kwargs.pop("headers", {}),
            "Authorization": f"Bearer {self.api_key}",
        }
        tries, max_tries = 0, self.max_http_attempts
        while True:
            tries += 1
            response = await request(
                method,
                url,
                headers=headers,
                _max_connection_retries=self.max_connection_retries,
                **kwargs,
            )
            body = await response.read()
            if response.ok:
                return body
            if _is_permanent(response.status, body):
                self._tripped = (url, response.status, body)
                raise self._error(method, url, response.status, body, permanent=True)
            if response.status not in RETRY_ERROR_CODES:
                raise self._error(method, url, response.status, body)
            if response.status in RATE_LIMIT_ERROR_CODES and self.internal:
                max_tries += 1
            if tries >= max_tries:
                raise self._error(method, url, response.status, body)
            logger.warning(
                "%s answered HTTP %d (try %d of %d), retrying: %s",
                self._redactor().text(url),
                response.status,
                tries,
                max_tries,
                self._redactor().bytes(body)[:SNIPPET_CHARS].decode("utf-8", errors="replace"),
            )
            await asyncio.sleep(RETRY_PAUSE_S)

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        body = await self._request(method, url, **kwargs)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            snippet = self._redactor().bytes(body)[:SNIPPET_CHARS].decode("utf-8", errors="replace")
            raise EndpointBodyError(
                f"{method} {self._redactor().text(url)} answered success with a body that is not JSON: "
                f"{snippet!r}"
            ) from None

    async def create_models(self) -> Any:
        return await self._json("GET", f"{self.base_url}/models")

    async def create_chat_completion(self, **kwargs: Any) -> Any:
        return await self._json("POST", f"{self.base_url}/chat/completions", json=kwargs)

    async def create_completion(self, **kwargs: Any) -> Any:
        return await self._json("POST", f"{self.base_url}/completions", json=kwargs)

    async def create_response(self, **kwargs: Any) -> Any:
        return await self._json("POST", f"{self.base_url}/responses", json=kwargs)

    async def create_tokenize(self, **kwargs: Any) -> Any:
        """vLLM's `/tokenize` sits beside `/v1`, not under it."""
        return await self._json("POST", f"{self.base_url.removesuffix('/v1')}/tokenize", json=kwargs)
