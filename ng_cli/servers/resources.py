"""`ResourcesServer`: an environment — tools the model can call, and a `/verify` that scores.

    POST /seed_session   start (or reset) the rollout's state; body = the input row
    POST /<tool>         one route per method decorated with `@tool`; body = the tool's arguments
    POST /verify         body = the row plus `response`; answers the same plus `reward`

State is per rollout, keyed by the session id from the `ng_session` cookie.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, TypeVar, get_type_hints

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, ValidationError

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.errors import BadRequestError, InvalidOutputError
from ng_cli.protocol.responses import final_assistant_text
from ng_cli.servers.app import JSONResponse, read_json_object
from ng_cli.servers.base import BaseServer
from ng_cli.servers.session import session_id

__all__ = ["ResourcesServer", "ToolError", "VerifyRequest", "tool"]

RC = TypeVar("RC", bound=ResourcesServerConfig)
ToolMethod = Callable[..., Awaitable[Any]]


class ToolError(BadRequestError):
    """A tool refused its input; the agent shows the message to the model as the tool's output."""


class VerifyRequest(BaseModel):
    """The input row plus the model's final response; unknown keys are the verifier's inputs."""

    model_config = ConfigDict(extra="allow")

    responses_create_params: dict[str, Any]
    response: dict[str, Any]

    def extra(self, key: str, default: Any = None) -> Any:
        return (self.model_extra or {}).get(key, default)

    def final_assistant_text(self) -> str:
        """The text of the last assistant message of the response ("" if there is none)."""
        output = self.response.get("output")
        return final_assistant_text(output if isinstance(output, list) else [])


def tool(method: ToolMethod) -> ToolMethod:
    """Mark `async def name(self, session_id: str, args: ArgsModel)` as the tool `POST /name`."""
    method.__ng_tool__ = True  # type: ignore[attr-defined]
    return method


class ResourcesServer(BaseServer[RC]):
    """Base of every environment. Override `verify`; add tools with `@tool`."""

    server_type: ClassVar[str] = "resources_servers"
    config_class: ClassVar[type[ResourcesServerConfig]] = ResourcesServerConfig
    row_model: ClassVar[type[BaseModel] | None] = None
    """The verifier's inputs on a data row (e.g. `expected_answer`), when the environment declares
    them: `ng_prepare_data` validates every row of this environment's datasets against it."""

    async def seed_session(self, session_id: str, row: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Prepare per-rollout state from the input row. The default keeps none (returns None)."""

    async def verify(self, session_id: str, request: VerifyRequest) -> float | Mapping[str, Any]:
        """The reward for a finished rollout: a float, or a mapping with `reward` and other numbers."""
        raise NotImplementedError(f"{type(self).__name__} must implement verify()")

    def tools(self) -> dict[str, ToolMethod]:
        """Tool name -> bound method, for every `@tool` method of this class."""
        return {
            name: getattr(self, name)
            for name, member in inspect.getmembers(type(self), inspect.isfunction)
            if getattr(member, "__ng_tool__", False)
        }

    def setup_routes(self, app: FastAPI) -> None:
        @app.post("/seed_session")
        async def seed(request: Request) -> JSONResponse:
            row = await read_json_object(request)
            result = await self.seed_session(session_id(request), row)
            return JSONResponse(dict(result or {}))

        @app.post("/verify")
        async def verify(request: Request) -> JSONResponse:
            body = await read_json_object(request)
            try:
                parsed = VerifyRequest.model_validate(body)
            except ValidationError as exc:
                raise ToolError(
                    f"invalid /verify body: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
                ) from exc
            verdict = await self.verify(session_id(request), parsed)
            return JSONResponse({**body, **_as_verdict(verdict, self.name)})

        for name, method in self.tools().items():
            app.add_api_route(f"/{name}", _tool_route(method), methods=["POST"], name=name)


def _tool_route(method: ToolMethod) -> Callable[[Request], Awaitable[JSONResponse]]:
    args_model = _args_model(method)

    async def route(request: Request) -> JSONResponse:
        body = await read_json_object(request)
        try:
            args = args_model.model_validate(body) if args_model is not None else body
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for tool '{method.__name__}': {problems}") from exc
        result = await method(session_id(request), args)
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        return JSONResponse(result)

    return route


def _args_model(method: ToolMethod) -> type[BaseModel] | None:
    """The pydantic model of a bound tool's arguments: its parameter after the session id, by position
    as the route calls it (a tool that ignores the session may name it `_session_id`)."""
    hints = get_type_hints(method)
    params = list(inspect.signature(method).parameters.values())[1:]
    if not params:
        return None
    hint = hints.get(params[0].name)
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


def _as_verdict(verdict: float | Mapping[str, Any], server: str) -> dict[str, Any]:
    if isinstance(verdict, int | float) and not isinstance(verdict, bool):
        return {"reward": float(verdict)}
    if isinstance(verdict, Mapping) and isinstance(verdict.get("reward"), int | float):
        return {**verdict, "reward": float(verdict["reward"])}
    raise InvalidOutputError(
        f"{server}.verify() must return a float or a mapping with 'reward', got {verdict!r}"
    )
