"""`AgentServer`: the base of agents — `POST /v1/responses` (the tool loop) and `POST /run`.

`/run` is one whole rollout: seed the resources server's session, run the loop, verify. The
base wires the routes and the session cookie; an implementation provides `respond` and may
override `run`. `/v1/responses` with `stream: true` streams the loop's events
(`ng_cli.servers.agent_stream`); a client that goes away cancels the loop and its calls.
`call_model` / `stream_model` make one model call under a `HopConfig` (deadlines, retries) and
check the Response the loop relies on. `OneCallAgent` is the base of agents whose `respond` is one
model call (their config: `OneCallAgentConfig`, with that call's `model_call`).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from ng_cli.config.schema import AgentServerConfig
from ng_cli.errors import BadRequestError, InvalidOutputError, UpstreamError, UpstreamUnavailableError
from ng_cli.servers.agent_stream import AgentEvents, open_agent_stream
from ng_cli.servers.app import JSONResponse, event_stream, read_json_object
from ng_cli.servers.base import BaseServer
from ng_cli.servers.http import RetryPolicy, Timeouts, is_retryable
from ng_cli.servers.session import RolloutCookies, forwarded_cookies

__all__ = [
    "AgentServer",
    "HopConfig",
    "OneCallAgent",
    "OneCallAgentConfig",
    "checked_response",
    "create_params",
]


class HopConfig(BaseModel):
    """Deadlines and retries for the calls to one neighbour server."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    connect_s: float = Field(default=5.0, gt=0)
    """Time to connect (or get a pooled connection)."""
    read_s: float = Field(default=300.0, gt=0)
    """Longest silence while waiting for the answer."""
    total_s: float = Field(default=600.0, gt=0)
    """Longest time for one call, from start to the last byte."""
    max_attempts: int = Field(default=3, ge=1)
    """Attempts per call; retried on connection errors, timeouts and 5xx, never on 4xx."""
    backoff_s: float = Field(default=0.1, ge=0)
    """First retry delay (exponential, full jitter)."""

    def timeouts(self) -> Timeouts:
        return Timeouts(connect_s=self.connect_s, read_s=self.read_s, total_s=self.total_s)

    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.max_attempts, backoff_s=self.backoff_s)


AC = TypeVar("AC", bound=AgentServerConfig)


def create_params(row: dict[str, Any]) -> dict[str, Any]:
    """The row's Responses create body (`responses_create_params`); a 400 when it has none."""
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        raise BadRequestError("the row has no 'responses_create_params' object")
    return params


class AgentServer(BaseServer[AC]):
    """Agents talk to one resources server and one model server, both named in their config."""

    server_type: ClassVar[str] = "responses_api_agents"
    config_class: ClassVar[type[AgentServerConfig]] = AgentServerConfig

    @property
    def resources_url(self) -> str:
        return self.url_of(self.config.resources_server)

    @property
    def model_url(self) -> str:
        return self.url_of(self.config.model_server)

    async def respond(
        self, params: dict[str, Any], *, cookies: dict[str, str], events: AgentEvents | None = None
    ) -> dict[str, Any]:
        """Run the loop for one Responses create body and return the final Response; with `events`
        (the client asked for `stream: true`), also put the Response's events there as they happen."""
        raise NotImplementedError(f"{type(self).__name__} must implement respond()")

    async def run(self, row: dict[str, Any], *, cookies: dict[str, str]) -> dict[str, Any]:
        """seed_session -> respond -> verify; returns the verify answer (row + response + reward)."""
        params = create_params(row)
        cookies = RolloutCookies(cookies)  # a server's own session cookie travels to later calls
        await self.post_resources("/seed_session", row, cookies=cookies)
        response = await self.respond(params, cookies=cookies)
        verified = await self.post_resources("/verify", {**row, "response": response}, cookies=cookies)
        return dict(verified)

    async def post_resources(self, path: str, payload: Any, **kwargs: Any) -> Any:
        """POST to the resources server once (followed to its new address if it moved)."""
        return await self.post_json_to(self.config.resources_server, path, payload, **kwargs)

    async def call_model(
        self, body: dict[str, Any], cookies: dict[str, str], hop: HopConfig
    ) -> dict[str, Any]:
        """One `POST /v1/responses` to the model server, retried as `hop` says (followed to its new
        address if it moved); its Response."""
        answer = await self.post_json_to(
            self.config.model_server, "/v1/responses", body,
            retry=hop.retry(), cookies=cookies, timeouts=hop.timeouts(),
        )  # fmt: skip
        return checked_response(answer, f"{self.model_url}/v1/responses")

    async def stream_model(
        self,
        body: dict[str, Any],
        cookies: dict[str, str],
        hop: HopConfig,
        *,
        events: AgentEvents,
        offset: int,
    ) -> dict[str, Any]:
        """One streamed model call, its items relayed to `events` (output indexes from `offset`),
        retried as `call_model` is while nothing was relayed yet."""
        url = f"{self.model_url}/v1/responses"
        for attempt in range(1, hop.max_attempts + 1):
            relayed = events.sequence
            try:
                answer = await events.relay_turn(
                    self.http, url, body, cookies=cookies, timeouts=hop.timeouts(), offset=offset
                )
                return checked_response(answer, url)
            except UpstreamError as error:
                if attempt == hop.max_attempts or events.sequence != relayed or not is_retryable(error):
                    raise
                await asyncio.sleep(hop.retry().delay_s(attempt))
        raise AssertionError("HopConfig.max_attempts must be >= 1")

    async def post_environment(
        self,
        path: str,
        payload: Any,
        cookies: dict[str, str],
        hop: HopConfig,
        *,
        text_ok: bool = False,
    ) -> Any:
        """POST to the resources server (`/<tool>`, `/step`, ...), retrying only a connection
        that failed (refused, reset, or a pooled keep-alive connection the server had just
        closed), never after a timeout or an error status: such a call may change the
        environment's state and must not run twice. A server the head says has moved is
        followed to its new address."""
        for attempt in range(1, hop.max_attempts + 1):
            try:
                url = f"{self.resources_url}{path}"
                return await self.http.post_json(
                    url, payload, cookies=cookies, timeouts=hop.timeouts(), text_ok=text_ok
                )
            except UpstreamUnavailableError:
                if attempt == hop.max_attempts:
                    raise
                if not await self.follow_moves():  # moved (restarted on another node): at once
                    await asyncio.sleep(hop.retry().delay_s(attempt))
        raise AssertionError("HopConfig.max_attempts must be >= 1")

    def setup_routes(self, app: FastAPI) -> None:
        @app.post("/v1/responses")
        async def responses(request: Request) -> Response:
            params = await read_json_object(request)
            cookies = forwarded_cookies(request)
            if params.get("stream"):
                return event_stream(
                    await open_agent_stream(
                        params, lambda events: self.respond(params, cookies=cookies, events=events)
                    )
                )
            return JSONResponse(await self.respond(params, cookies=cookies))

        @app.post("/run")
        async def run(request: Request) -> JSONResponse:
            row = await read_json_object(request)
            return JSONResponse(await self.run(row, cookies=forwarded_cookies(request)))


class OneCallAgentConfig(AgentServerConfig):
    """An agent whose `/v1/responses` is one model call."""

    model_call: HopConfig = HopConfig()
    """Deadlines and retries of `POST /v1/responses` on the model server."""


OC = TypeVar("OC", bound=OneCallAgentConfig)


class OneCallAgent(AgentServer[OC]):
    """Agents whose loop is not a tool loop (non_executing_simple_agent, gymnasium_agent,
    tool_simulation_agent): `respond` is one model call, under the config's `model_call`."""

    async def respond(
        self, params: dict[str, Any], *, cookies: dict[str, str], events: AgentEvents | None = None
    ) -> dict[str, Any]:
        """The model's Response to the Responses create body as it came (streamed to `events` when
        the client asked for `stream: true`)."""
        body = {key: value for key, value in params.items() if key != "stream"}
        hop = self.config.model_call
        if events is None:
            return await self.call_model(body, cookies, hop)
        return await self.stream_model(body, cookies, hop, events=events, offset=0)


def checked_response(answer: Any, url: str) -> dict[str, Any]:
    """The model's Response, after checking the parts an agent relies on (an `output` list of
    objects)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("output"), list):
        raise InvalidOutputError(f"{url} answered without an 'output' list: {_short(answer)}")
    for index, item in enumerate(answer["output"]):
        if not isinstance(item, dict):
            raise InvalidOutputError(
                f"{url} answered with output[{index}] that is not an object: {_short(item)}"
            )
    return answer


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
