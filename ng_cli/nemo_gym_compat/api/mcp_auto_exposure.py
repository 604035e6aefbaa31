"""`nemo_gym.mcp_auto_exposure`: a server's plain `POST /<tool>` routes served as MCP tools.

A NeMo Gym resources server sets `expose_tools_over_mcp: true` and, with its handlers unchanged,
its typed tool routes are listed and callable on a streamable-HTTP `/mcp` endpoint (MCP-native
agents such as Claude Code call tools that way). As in NeMo Gym 0.7.0:

* start-up (`install_auto_exposure`): every `POST /<name>` route whose handler shape can be called
  directly becomes a tool (its docstring the description, its pydantic body's JSON schema the
  input schema); `mcp_tools()` may filter them or add tools served by one catch-all route. A setup
  whose tools could be dispatched wrongly is refused, naming the route and why (a second `/mcp`,
  middleware of the server's own, two catch-all routes, a handler shape such as a FastAPI
  dependency, a reserved, illegal or duplicate name, no `/seed_session` or `/verify` route);
* `/seed_session` answers carry `mcp`: the server name, `/mcp`, and a header with a signed
  per-rollout token (the rollout's session id, and the tools `mcp_allowed_tools_for_session`
  allows); an environment server's typed answer gets it in `resources_tools`;
* each `tools/call` runs the route's own handler once, with a `Request` whose session is the
  token's, so state seed_session set is seen and /verify sees what the call did; the errors
  the HTTP route would give come back as the call's `isError` text;
* /verify reads `mcp__<server>__<tool>` tool-call names as `<tool>`, and echoes them as sent.

The one difference is the SDK: NeMo Gym uses mcp 1.x, this module the 2.x line (`mcp` extra),
whose server speaks both the handshake-era protocol (Claude Code's) and the 2026 one.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, get_type_hints
from uuid import uuid4

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute
from itsdangerous import BadSignature, URLSafeSerializer
from pydantic import BaseModel
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from ng_cli.nemo_gym_compat.api.direct_dispatch import (
    BindResult,
    DirectBinding,
    DirectDispatchError,
    bind_route,
    call_direct,
    is_model,
)
from ng_cli.nemo_gym_compat.api.mcp_access import (
    MCP_TOKEN_SALT,
    NEMO_GYM_MCP_METADATA_KEY,
    NEMO_GYM_MCP_SESSION_TOKEN_HEADER,
    RESERVED_MCP_TOOL_NAMES,
    MCPServerMetadata,
)
from ng_cli.nemo_gym_compat.api.server_utils import SESSION_ID_KEY
from ng_cli.nemo_gym_compat.mcp_extra import install_hint, mcp_problem

_problem = mcp_problem()
if _problem is not None:
    raise ImportError(f"NeMo Gym's expose_tools_over_mcp: {_problem}; {install_hint()}")

import mcp_types as types  # noqa: E402 - only after the check above, which says what to install
from mcp.server.context import ServerRequestContext  # noqa: E402
from mcp.server.lowlevel import Server as LowLevelServer  # noqa: E402
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402

__all__ = [
    "MCP_URL_PATH",
    "PERMISSIVE_SCHEMA",
    "TOKEN_HEADER",
    "BindResult",
    "CatchAll",
    "DirectBinding",
    "DirectDispatchError",
    "MCPTool",
    "bind_route",
    "call_direct",
    "harvest_tools",
    "install_auto_exposure",
    "maybe_auto_expose",
]

LOG = logging.getLogger(__name__)

TOKEN_HEADER = NEMO_GYM_MCP_SESSION_TOKEN_HEADER
MCP_URL_PATH = "/mcp"
PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")
"""What MCP clients accept, and what `mcp__<server>__<tool>` can be read back from."""
_PLUMBING_MODULES = ("ng_cli.",)
"""Middleware of ours (the adapter's plumbing, the stand-ins' session and rollout middleware):
it bounds, signs and redacts the `/mcp` HTTP call itself, so skipping it on dispatch loses nothing."""
_SESSION_MIDDLEWARE = "starlette.middleware.sessions.SessionMiddleware"


class _Tool(types.Tool):  # type: ignore[misc, unused-ignore]  # Any where the extra is not installed
    """The SDK's tool, also readable by mcp 1.x's attribute name (`inputSchema`), which NeMo Gym's
    `mcp_tools()` overrides were written against."""

    @property
    def inputSchema(self) -> dict[str, Any]:  # mcp 1.x's name
        schema: dict[str, Any] = self.input_schema
        return schema


@dataclass
class MCPTool:
    """One exposed tool: what tools/list shows, and how tools/call runs it."""

    name: str
    tool: types.Tool
    binding: DirectBinding | None = None
    path_value: str | None = None
    path: str | None = None
    reasons: tuple[str, ...] = field(default_factory=tuple)
    """Why `binding` is None; an error at start-up only if the tool is exposed."""


class CatchAll:
    """A server's one `POST /{name}` route, handed to `mcp_tools()`: `tool(name, schema,
    description)` makes a tool that route serves with `name` as its path parameter."""

    def __init__(self, server: Any, route: APIRoute) -> None:
        self.server = server
        self.route = route
        self._binding: DirectBinding | None = None

    def tool(
        self, name: str, input_schema: dict[str, Any] | None = None, description: str | None = None
    ) -> MCPTool:
        if self._binding is None:
            bound = bind_route(self.route)
            if bound.binding is None:
                raise ValueError(
                    f"{type(self.server).__name__} catch-all route {self.route.path!r} cannot be dispatched "
                    f"directly: {'; '.join(bound.reasons)}. Direct MCP dispatch does not reproduce this handler shape."
                )
            self._binding = bound.binding
        schema = input_schema or dict(PERMISSIVE_SCHEMA)
        return MCPTool(
            name=name,
            tool=_Tool(name=name, description=description, input_schema=schema),
            binding=self._binding,
            path_value=name,
            path=self.route.path,
        )


_CatchAll = CatchAll  # NeMo Gym's name


def _foreign_middleware(app: FastAPI) -> list[str]:
    """Middleware a direct call would skip and that is not ours or NeMo Gym's session plumbing."""
    found: list[str] = []
    for middleware in app.user_middleware:
        cls = middleware.cls
        name = f"{cls.__module__}.{getattr(cls, '__name__', cls)}"
        dispatch = middleware.kwargs.get("dispatch")
        if name == _SESSION_MIDDLEWARE or name.startswith(_PLUMBING_MODULES):
            continue
        if dispatch is not None and str(getattr(dispatch, "__module__", "")).startswith(_PLUMBING_MODULES):
            continue  # the stand-ins' add_session_id
        found.append(name)
    return found


def harvest_tools(app: FastAPI, server: Any) -> dict[str, MCPTool]:
    """Every typed `POST /<name>` route as a tool, passed through the server's `mcp_tools()`."""
    foreign = _foreign_middleware(app)
    if foreign:
        raise ValueError(
            f"{type(server).__name__} installs non-Gym middleware {foreign}, which direct MCP "
            "dispatch would silently skip. Remove the middleware, or leave expose_tools_over_mcp off in the config."
        )
    harvested: list[MCPTool] = []
    catchalls: list[APIRoute] = []
    for route in app.routes:
        if not isinstance(route, APIRoute) or "POST" not in (route.methods or set()):
            continue
        if route.path.lstrip("/") in RESERVED_MCP_TOOL_NAMES or route.path == MCP_URL_PATH:
            continue
        if "{" in route.path:
            catchalls.append(route)
            continue
        name = route.path.lstrip("/")
        bound = bind_route(route)
        schema = (
            bound.body_model.model_json_schema() if bound.body_model is not None else dict(PERMISSIVE_SCHEMA)
        )
        description = (route.description or route.summary or "").strip() or None
        harvested.append(
            MCPTool(
                name=name,
                tool=_Tool(name=name, description=description, input_schema=schema),
                binding=bound.binding,
                path=route.path,
                reasons=tuple(bound.reasons),
            )
        )
    if len(catchalls) > 1:
        raise ValueError(
            f"{type(server).__name__} has multiple parameterized catch-all routes "
            f"{sorted(r.path for r in catchalls)}; MCP auto-exposure cannot tell which backs the tools. "
            "Collapse them to one, or leave expose_tools_over_mcp off in the config."
        )
    catchall = CatchAll(server, catchalls[0]) if catchalls else None
    tools = _validate_tools(server, server.mcp_tools(harvested, catchall))
    if catchall is not None and not any(t.path_value is not None for t in tools.values()):
        LOG.warning(
            "%s has a parameterized catch-all route %r but no exposed MCP tool dispatches through it; tools "
            "behind that route are not callable over MCP (rollouts needing them would score 0). Override "
            "mcp_tools() to add catch-all-backed tools via harvested + [catchall.tool(...)].",
            type(server).__name__,
            catchall.route.path,
        )
    LOG.info("%s MCP: exposing %d tool(s) over direct dispatch", type(server).__name__, len(tools))
    return tools


def _validate_tools(server: Any, selected: list[MCPTool] | None) -> dict[str, MCPTool]:
    """The final list's names legal, not reserved, unique, and every tool dispatchable."""
    tools: dict[str, MCPTool] = {}
    owner = type(server).__name__
    for tool in selected or []:
        name = tool.name
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(
                f"{owner} exposes MCP tool name {name!r}, which does not match "
                "^[A-Za-z0-9_-]+$; MCP clients reject such names and verify-time normalization cannot "
                "round-trip them. Rename the route or tool, or leave expose_tools_over_mcp off in the config."
            )
        if name in RESERVED_MCP_TOOL_NAMES:
            raise ValueError(
                f"{owner} exposes MCP tool {name!r}, which collides with a reserved endpoint "
                f"name {sorted(RESERVED_MCP_TOOL_NAMES)}; rename the tool."
            )
        if name in tools:
            raise ValueError(f"Duplicate MCP tool name {name!r} in {owner}.mcp_tools().")
        if tool.binding is None:
            raise ValueError(
                f"{owner} tool {name!r} (route {tool.path!r}) cannot be dispatched "
                f"directly: {'; '.join(tool.reasons)}. Direct MCP dispatch does not reproduce this handler shape."
            )
        tools[name] = tool
    return tools


def _take_route(app: FastAPI, path: str, why: str) -> tuple[int, APIRoute]:
    for index, route in enumerate(app.router.routes):
        if isinstance(route, APIRoute) and route.path == path:
            return index, route
    raise ValueError(f"expose_tools_over_mcp requires a {path} route ({why}), but the app has none.")


def _swap_route(app: FastAPI, index: int, path: str, endpoint: Callable[..., Any]) -> None:
    """Serve `path` with `endpoint`, at the old route's place (ahead of a catch-all, as before)."""
    app.post(path)(endpoint)
    app.router.routes[index] = app.router.routes.pop()


async def _seed_body(request: Request) -> dict[str, Any]:
    raw = await request.body()  # FastAPI's cached bytes: the model was validated from them
    try:
        body = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


MintMetadata = Callable[[Request, dict[str, Any]], dict[str, Any]]


def _wrap_seed_session(app: FastAPI, mint_metadata: MintMetadata) -> None:
    """/seed_session's answer, plus the rollout's MCP access. The wrapper presents the handler's
    own parameters to FastAPI (so its body is still validated) plus a `Request` to mint from."""
    index, route = _take_route(
        app, "/seed_session", "its response carries the MCP session token to the agent"
    )
    method = route.endpoint
    signature = inspect.signature(method)
    hints = get_type_hints(method)
    request_name = next(
        (n for n, p in signature.parameters.items() if hints.get(n, p.annotation) is Request), None
    )
    params = [p.replace(annotation=hints.get(n, p.annotation)) for n, p in signature.parameters.items()]
    passthrough = tuple(signature.parameters)
    if request_name is None:
        request_name = "__nemo_gym_request"
        params.insert(
            0, inspect.Parameter(request_name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)
        )
    response_model = route.response_model if is_model(route.response_model) else None

    async def seed_session_endpoint(**kwargs: Any) -> JSONResponse:
        request: Request = kwargs[request_name]
        result = method(**{k: kwargs[k] for k in passthrough})
        if inspect.isawaitable(result):
            result = await result
        if response_model is not None:
            result = response_model.model_validate(
                result.model_dump() if isinstance(result, BaseModel) else result
            )
        payload = jsonable_encoder(result)
        if _typed_seed_answer(result):  # an environment server's: no other key is allowed
            if result.resources_tools is None:
                task_data = (await _seed_body(request)).get("task_data")
                payload["resources_tools"] = mint_metadata(
                    request, task_data if isinstance(task_data, dict) else {}
                )
        elif isinstance(payload, dict) and NEMO_GYM_MCP_METADATA_KEY not in payload:
            payload[NEMO_GYM_MCP_METADATA_KEY] = mint_metadata(request, await _seed_body(request))
        return JSONResponse(payload)

    seed_session_endpoint.__name__ = "seed_session"
    setattr(seed_session_endpoint, "__signature__", inspect.Signature(parameters=params))  # noqa: B010
    seed_session_endpoint.__annotations__ = {p.name: p.annotation for p in params}
    _swap_route(app, index, "/seed_session", seed_session_endpoint)


def _typed_seed_answer(result: Any) -> bool:
    """NeMo Gym's `ResourcesSeedSessionResponse` (or a subclass): MCP access goes in its typed
    `resources_tools` field (read by field, so this module need not import the server base)."""
    return isinstance(result, BaseModel) and "resources_tools" in type(result).model_fields


def _function_calls(container: Any) -> list[Any]:
    output = getattr(getattr(container, "response", None), "output", None) or []
    return [item for item in output if getattr(item, "type", None) == "function_call"]


def _wrap_verify(app: FastAPI, server: Any) -> None:
    """/verify scores a copy whose `mcp__<server>__<tool>` names are `<tool>`; its answer keeps the
    names the model sent (matched by call_id). Wraps whatever handler the route holds now."""
    index, route = _take_route(app, "/verify", "its tool-call names are normalized for scoring")
    endpoint = route.endpoint

    @functools.wraps(endpoint)
    async def verify_normalized(**kwargs: Any) -> Any:
        key = next((name for name, value in kwargs.items() if _function_calls(value)), None)
        if key is None:
            result = endpoint(**kwargs)
            return await result if inspect.isawaitable(result) else result
        emitted = {item.call_id: item.name for item in _function_calls(kwargs[key])}
        normalized = kwargs[key].model_copy(deep=True)
        for item in _function_calls(normalized):
            item.name = server.normalize_tool_name(item.name)
        result = endpoint(**{**kwargs, key: normalized})
        if inspect.isawaitable(result):
            result = await result
        for item in _function_calls(result):
            if item.call_id in emitted:
                item.name = emitted[item.call_id]
        return result

    _swap_route(app, index, "/verify", verify_normalized)


def _mint_session_metadata(
    server: Any, serializer: URLSafeSerializer, request: Request, seed_body: dict[str, Any]
) -> dict[str, Any]:
    """The rollout's token: its session id (made here if the session has none yet) and the tools
    the server allows it; a hook that raises fails the seed, never mints an unrestricted token."""
    session_id = request.session.get(SESSION_ID_KEY)
    if not session_id:
        session_id = str(uuid4())
        request.session[SESSION_ID_KEY] = session_id
    allowed = server.mcp_allowed_tools_for_session(seed_body)
    token = serializer.dumps({"sid": session_id, "tools": allowed})
    return MCPServerMetadata(
        server_name=server.config.name or type(server).__name__,
        url_path=MCP_URL_PATH,
        transport="http",
        headers={TOKEN_HEADER: token},
    ).model_dump()


class _TokenError(Exception):
    """A tools/call without a usable token (the caller's fault: an `isError` result)."""


def _parse_token(
    serializer: URLSafeSerializer, token: str | None, *, required: bool
) -> tuple[str | None, frozenset[str] | None]:
    """(session id, allowed tools or None for all) from a token; without one, tools/list lists all."""
    if not token:
        if required:
            raise _TokenError(f"Missing {TOKEN_HEADER} for Gym MCP tool call.")
        return None, None
    try:
        payload = serializer.loads(token)
    except BadSignature:
        if required:
            raise _TokenError("Invalid Gym MCP session token.") from None
        return None, None
    allowed = payload.get("tools")
    return payload["sid"], None if allowed is None else frozenset(allowed)


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _result(payload: Any) -> types.CallToolResult:
    """The handler's answer as text (JSON, as the HTTP route would send it) and, for an object,
    as structured content too."""
    if isinstance(payload, str):
        text = payload
    else:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    structured = payload if isinstance(payload, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def maybe_auto_expose(server: Any, app: FastAPI) -> dict[str, MCPTool] | None:
    """Expose the tools iff the server's config sets `expose_tools_over_mcp`; the tool map, or None."""
    if not getattr(getattr(server, "config", None), "expose_tools_over_mcp", False):
        return None
    return install_auto_exposure(server, app)


def install_auto_exposure(
    server: Any, app: FastAPI, *, token_secret: str | None = None
) -> dict[str, MCPTool]:
    """Harvest the tools, wrap /seed_session and /verify, and serve `/mcp` (see the module doc).

    `token_secret` signs the rollout tokens; NeMo Gym signs with the server's session-middleware
    key (its class and instance name), which our adapter replaces with a per-process random secret:
    the tokens are minted and checked by the same process."""
    for route in app.router.routes:
        if isinstance(route, Route | Mount) and route.path == MCP_URL_PATH:
            raise ValueError(
                f"{type(server).__name__} already serves {MCP_URL_PATH}, which conflicts with MCP auto-exposure "
                "on the same server. Remove the hand-rolled /mcp mount and rely on expose_tools_over_mcp."
            )
    secret = token_secret if token_secret is not None else server.get_session_middleware_key()
    serializer = URLSafeSerializer(secret, salt=MCP_TOKEN_SALT)
    tools = harvest_tools(app, server)
    _wrap_seed_session(app, functools.partial(_mint_session_metadata, server, serializer))
    _wrap_verify(app, server)

    def claims(
        ctx: ServerRequestContext[Any, Any], *, required: bool
    ) -> tuple[str | None, frozenset[str] | None]:
        headers = getattr(ctx.request, "headers", None)
        token = headers.get(TOKEN_HEADER) if headers is not None else None
        return _parse_token(serializer, token, required=required)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        _, allowed = claims(ctx, required=False)
        return types.ListToolsResult(
            tools=[t.tool for t in tools.values() if allowed is None or t.name in allowed]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None or tool.binding is None:  # a model's made-up name: an answer, not an error
            return _error_result(f"Unknown tool: {params.name!r}. Available tools: {sorted(tools)}")
        try:
            session_id, allowed = claims(ctx, required=True)
        except _TokenError as error:
            return _error_result(str(error))
        if allowed is not None and tool.name not in allowed:
            return _error_result(f"Tool {tool.name!r} is not allowed for this session.")
        assert session_id is not None
        try:
            payload = await call_direct(
                app, tool.binding, session_id, params.arguments or {}, tool.path_value
            )
        except DirectDispatchError as error:
            return _error_result(f"HTTP {error.status} from POST /{tool.name}: {error.detail}")
        return _result(payload)

    mcp_server: LowLevelServer[Any] = LowLevelServer(
        server.config.name or type(server).__name__, on_list_tools=list_tools, on_call_tool=call_tool
    )
    manager = StreamableHTTPSessionManager(
        app=mcp_server,
        json_response=True,
        stateless=True,
        # Agents reach the server by whatever host it resolves to on a multi-node run; DNS-rebinding
        # protection guards browsers, which never call this endpoint (NeMo Gym turns it off too).
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        await manager.handle_request(scope, receive, send)

    # First, so a catch-all POST /{path} cannot take /mcp; the Route serves "/mcp" itself (no
    # redirect), the Mount its subpaths ("/mcp/").
    app.router.routes.insert(0, Route(MCP_URL_PATH, _AsgiEndpoint(endpoint), include_in_schema=False))
    app.router.routes.insert(1, Mount(MCP_URL_PATH, app=endpoint))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        async with manager.run(), outer(app_) as state:
            yield state

    app.router.lifespan_context = lifespan
    return tools


class _AsgiEndpoint:
    """An ASGI callable Starlette's `Route` serves as an app (a plain function would be read as a
    request handler)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
