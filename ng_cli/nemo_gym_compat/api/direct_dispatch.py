"""Call a FastAPI route's handler once, without HTTP, as the route would have run it.

NeMo Gym's MCP exposure (`mcp_auto_exposure`) serves each tool call this way: no middleware, no
routing, one handler call with the arguments validated by its body model and a `Request` whose
session is the rollout's. `bind_route` decides at start-up whether a handler's shape allows that
(any shape a direct call could get wrong is a reason, never a guess); `call_direct` makes the call
and gives back what the HTTP route would have answered, or its error status and text. NeMo Gym
defines both in `nemo_gym.mcp_auto_exposure`, which re-exports them from here.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from aiohttp import ClientResponseError
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from ng_cli.nemo_gym_compat.api.server_utils import SESSION_ID_KEY

__all__ = ["BindResult", "DirectBinding", "DirectDispatchError", "bind_route", "call_direct", "is_model"]

LOG = logging.getLogger(__name__)
_PATH_PARAM = re.compile(r"{([^}:]+)(?::[^}]*)?}")


@dataclass
class DirectBinding:
    """How to call one route's handler without HTTP: resolved at start-up, used per call."""

    endpoint: Callable[..., Any]
    path: str
    request_params: tuple[str, ...] = ()
    body_param: str | None = None
    body_model: type[BaseModel] | None = None
    path_param: str | None = None
    """A catch-all route's `{name}` parameter, given the tool's name."""
    return_model: type[BaseModel] | None = None
    body_is_dict: bool = False
    is_coroutine: bool = False


@dataclass(frozen=True)
class BindResult:
    """A route's binding, or why it has none; the body model either way (for the listed schema)."""

    binding: DirectBinding | None
    reasons: list[str]
    body_model: type[BaseModel] | None


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def bind_route(route: APIRoute) -> BindResult:
    """Classify a handler's parameters as FastAPI reads them (its signature first, type hints for
    string annotations); any shape a direct call could get wrong is a reason, never a guess."""
    endpoint = route.endpoint
    try:
        hints = get_type_hints(endpoint)
    except Exception:  # unresolvable forward references: fatal only where a parameter needs one
        hints = {}
    signature = inspect.signature(endpoint)
    path_params = set(_PATH_PARAM.findall(route.path))
    reasons: list[str] = []
    request_params: list[str] = []
    body_param: str | None = None
    body_model: type[BaseModel] | None = None
    body_is_dict = False
    path_param: str | None = None

    for name, param in signature.parameters.items():
        annotation = (
            hints.get(name, param.annotation) if isinstance(param.annotation, str) else param.annotation
        )
        if isinstance(annotation, str):
            reasons.append(f"unresolvable string annotation on {name!r}: {annotation!r}")
        elif param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            reasons.append(f"*args/**kwargs parameter {name!r}")
        elif annotation is Request:
            request_params.append(name)
        elif is_model(annotation):
            if body_param is not None:
                reasons.append(f"multiple body models ({body_param!r}, {name!r})")
            else:
                body_param, body_model = name, annotation
        elif get_origin(annotation) in (Union, UnionType) and any(is_model(a) for a in get_args(annotation)):
            reasons.append(f"union/optional body param {name!r} is not supported over MCP: {annotation!r}")
        elif annotation is dict or get_origin(annotation) is dict:
            if body_param is not None:
                reasons.append(f"multiple body params ({body_param!r}, {name!r})")
            else:
                body_param, body_is_dict = name, True
        elif name in path_params:
            if annotation not in (str, inspect.Parameter.empty):
                reasons.append(f"non-str path param {name!r}: {annotation!r}")
            else:
                path_param = name
        elif param.default is not inspect.Parameter.empty:
            kind = f"{type(param.default).__module__}.{type(param.default).__name__}"
            if kind.startswith("fastapi."):
                reasons.append(f"DI marker default on {name!r}: {kind}")
            else:
                reasons.append(f"defaulted query param {name!r} is not supported over MCP: {annotation!r}")
        else:
            reasons.append(f"unsupported required param {name!r}: {annotation!r}")

    if is_model(route.response_model):  # FastAPI filters through it, ahead of the return annotation
        return_model: type[BaseModel] | None = route.response_model
    else:
        returned = signature.return_annotation
        returned = hints.get("return", returned) if isinstance(returned, str) else returned
        return_model = returned if is_model(returned) else None
    if reasons:
        return BindResult(binding=None, reasons=reasons, body_model=body_model)
    binding = DirectBinding(
        endpoint=endpoint,
        path=route.path,
        request_params=tuple(request_params),
        body_param=body_param,
        body_model=body_model,
        path_param=path_param,
        return_model=return_model,
        body_is_dict=body_is_dict,
        is_coroutine=inspect.iscoroutinefunction(inspect.unwrap(endpoint)),
    )
    return BindResult(binding=binding, reasons=[], body_model=body_model)


class DirectDispatchError(Exception):
    """A call the HTTP route would have answered with an error status: that status and text."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status} (direct): {detail}")
        self.status = status
        self.detail = detail


def _direct_request(app: FastAPI, session_id: str, body: bytes, path: str) -> Request:
    """The request the handler reads: its session is the token's, its body the call's arguments
    (a handler may read `await request.json()` beside its model, as over HTTP)."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 0),
        "server": ("internal-mcp-direct", 80),
        "state": {},
        "app": app,
        "session": {SESSION_ID_KEY: session_id},
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


async def call_direct(
    app: FastAPI,
    binding: DirectBinding,
    session_id: str,
    arguments: dict[str, Any],
    path_value: str | None = None,
) -> Any:
    """Run the route's handler once and return what the HTTP route would answer, as JSON-able data;
    an answer that would be an error status raises DirectDispatchError with it."""
    kwargs: dict[str, Any] = {}
    if binding.path_param is not None:
        kwargs[binding.path_param] = path_value or ""
    if binding.body_model is not None and binding.body_param is not None:
        try:
            kwargs[binding.body_param] = binding.body_model.model_validate(arguments)
        except ValidationError as error:
            raise DirectDispatchError(422, json.dumps(jsonable_encoder(error.errors()))) from error
    elif binding.body_is_dict and binding.body_param is not None:
        kwargs[binding.body_param] = dict(arguments or {})
    if binding.request_params:
        path = binding.path if path_value is None else "/" + path_value
        request = _direct_request(app, session_id, json.dumps(arguments or {}).encode(), path)
        kwargs.update(dict.fromkeys(binding.request_params, request))
    try:
        if binding.is_coroutine:
            result = await binding.endpoint(**kwargs)
        else:  # as FastAPI runs a `def` handler: off the event loop
            result = await run_in_threadpool(binding.endpoint, **kwargs)
        if inspect.isawaitable(result):  # a `def` that returns a coroutine
            result = await result
    except StarletteHTTPException as error:
        raise DirectDispatchError(error.status_code, str(error.detail)) from error
    except ClientResponseError as error:
        detail = getattr(error, "response_content", None)
        raise DirectDispatchError(
            500, f"Hit an exception calling an inner server: {detail or error}"
        ) from error
    except Exception as error:
        LOG.exception("Unhandled exception dispatching %s directly over MCP", binding.path)
        raise DirectDispatchError(500, repr(error)) from error

    if isinstance(result, Response):
        text = bytes(result.body).decode("utf-8", errors="replace")
        if not 200 <= result.status_code < 300:
            raise DirectDispatchError(result.status_code, text)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    if binding.return_model is not None:  # FastAPI's response_model filtering: no hidden field leaks
        data = result.model_dump() if isinstance(result, BaseModel) else result
        try:
            result = binding.return_model.model_validate(data)
        except ValidationError as error:
            raise DirectDispatchError(500, json.dumps(jsonable_encoder(error.errors()))) from error
    return jsonable_encoder(result)
