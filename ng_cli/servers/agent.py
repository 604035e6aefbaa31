"""`AgentServer`: the base of agents — `POST /v1/responses` (the tool loop) and `POST /run`.

`/run` is one whole rollout: seed the resources server's session, run the loop, verify. The
base wires the routes and the session cookie; an implementation provides `respond` and may
override `run`. `/v1/responses` with `stream: true` streams the loop's events
(`ng_cli.servers.agent_stream`); a client that goes away cancels the loop and its calls.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ng_cli.config.schema import AgentServerConfig
from ng_cli.errors import BadRequestError
from ng_cli.servers.agent_stream import AgentEvents, open_agent_stream
from ng_cli.servers.app import JSONResponse, event_stream, read_json_object
from ng_cli.servers.base import BaseServer
from ng_cli.servers.session import forwarded_cookies

__all__ = ["AgentServer"]

AC = TypeVar("AC", bound=AgentServerConfig)


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
        params = row.get("responses_create_params")
        if not isinstance(params, dict):
            raise BadRequestError("the row has no 'responses_create_params' object")
        await self.http.post_json(f"{self.resources_url}/seed_session", row, cookies=cookies)
        response = await self.respond(params, cookies=cookies)
        verified = await self.http.post_json(
            f"{self.resources_url}/verify", {**row, "response": response}, cookies=cookies
        )
        return dict(verified)

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
