"""A NeMo Gym `SimpleResourcesServer` subclass served as one of our `ResourcesServer`s.

`adapter_for(cls)` makes the class `ng_cli.servers.child` constructs: its config class accepts
the NeMo Gym block as written (our keys checked as for any environment; the rest validated by
the server's own config class, so a bad key is a ConfigError naming it), and its app is the one
the NeMo Gym server's `setup_webserver()` builds, started from our plumbing (health, error
envelope, body limits, our `ng_session` cookie) instead of a bare FastAPI app; a server that
builds its own `FastAPI()` anyway is served inside that plumbing. A server whose block sets
`expose_tools_over_mcp` also serves its tools on `/mcp` (`api.mcp_auto_exposure`, the `mcp` extra).

The session a NeMo Gym server reads is our signed one (`api.server_utils.SignedSession`): our
session middleware runs before NeMo Gym's, and NeMo Gym's cookie is signed with a secret of this
process instead of its public key, so knowing a rollout's session id (an MCP token's payload
shows it) selects nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails
from pydantic_core import ValidationError as CoreValidationError

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.errors import ConfigError
from ng_cli.nemo_gym_compat.api.global_config import HEAD_SERVER_KEY_NAME, set_global_config_dict
from ng_cli.nemo_gym_compat.api.server_utils import (
    ServerClient,
    SignedSession,
    SimpleServer,
    close_client_session,
)
from ng_cli.nemo_gym_compat.mcp_extra import install_hint, mcp_problem
from ng_cli.servers.app import install_error_handlers
from ng_cli.servers.resources import ResourcesServer
from ng_cli.servers.session import SESSION_COOKIE, SessionMiddleware
from ng_cli.servers.spec import ServerAddress

__all__ = ["NemoGymResourcesConfig", "NemoGymResourcesServer", "adapter_for"]

_OUR_KEYS = frozenset(ResourcesServerConfig.model_fields)


class NemoGymResourcesConfig(ResourcesServerConfig):
    """A NeMo Gym resources server's block: our keys, plus whatever its own config class reads."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    domain: str | None = None  # type: ignore[assignment]
    """NeMo Gym's domain names (a superset of ours); the server's own config class checks it."""
    expose_tools_over_mcp: bool = False
    """Serve the server's `POST /<tool>` routes as MCP tools on `/mcp` too, as NeMo Gym does (for
    MCP-native agents); needs the `mcp` extra."""

    nemo_gym_config_class: ClassVar[type[BaseModel]] = BaseModel

    @field_validator("expose_tools_over_mcp")
    @classmethod
    def _mcp_installed(cls, value: bool) -> bool:
        problem = mcp_problem() if value else None
        if problem is not None:
            raise ValueError(f"NeMo Gym's MCP exposure is asked for, but {problem}; {install_hint()}")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _check_with_their_class(cls, data: Any, handler: Any) -> Any:
        if isinstance(data, Mapping) and data.get("sandbox_provider"):
            from ng_cli.nemo_gym_compat.api.sandbox import unavailable_provider

            problem = unavailable_provider(data["sandbox_provider"])
            if problem is not None:
                raise ValueError(f"sandbox_provider: {problem}")
        ours = handler(data)
        if isinstance(data, Mapping):
            try:
                cls.nemo_gym_config_class.model_validate(their_block(data, name="?", port=0))
            except ValidationError as exc:
                raise _revalidation_error(cls.__name__, exc) from None
        return ours


def their_block(block: Mapping[str, Any], *, name: str, port: int) -> dict[str, Any]:
    """The block as NeMo Gym hands it to the server: its name, a host and port always set."""
    found = dict(block)
    found["name"] = name
    found.setdefault("entrypoint", "app.py")
    found.setdefault("num_workers", None)  # NeMo Gym's key, split off as ours (None is all we accept)
    if found.get("host") is None:
        found["host"] = "127.0.0.1"
    if found.get("port") is None:
        found["port"] = port
    return found


def _revalidation_error(title: str, exc: ValidationError) -> CoreValidationError:
    details: list[InitErrorDetails] = []
    for error in exc.errors():
        detail: dict[str, Any] = {"type": error["type"], "loc": error["loc"], "input": error.get("input")}
        if "ctx" in error:
            detail["ctx"] = error["ctx"]
        details.append(detail)  # type: ignore[arg-type]
    return CoreValidationError.from_exception_data(title, details)


def their_server(
    nemo_gym_class: type[SimpleServer],
    config: BaseModel,
    *,
    name: str,
    servers: Mapping[str, ServerAddress],
    head_url: str | None,
) -> SimpleServer:
    """A NeMo Gym server object (a resources server or an agent) built as NeMo Gym builds it: its
    block, the global config dict it reads, its own config class and a ServerClient."""
    own = servers.get(name)
    port = urlsplit(own.url).port if own is not None else None
    # exclude_unset, not exclude_none: a key the block sets to null (`style_length_ratio_range:
    # null`) may be one their class requires, as NeMo Gym hands the block over with it.
    block = their_block(config.model_dump(exclude_unset=True), name=name, port=port or 0)
    tree = global_config_tree(name, block, servers, head_url)
    set_global_config_dict(tree)
    their_config_class = nemo_gym_class.model_fields["config"].annotation
    assert isinstance(their_config_class, type)
    assert issubclass(their_config_class, BaseModel)
    client = ServerClient.model_validate(
        {"head_server_config": tree[HEAD_SERVER_KEY_NAME], "global_config_dict": tree}
    )
    their_config = their_config_class.model_validate(block)
    return nemo_gym_class.model_validate({"config": their_config, "server_client": client})


class NemoGymResourcesServer(ResourcesServer[NemoGymResourcesConfig]):
    """Serves one NeMo Gym server object (`self.inner`) on our framework."""

    nemo_gym_class: ClassVar[type[SimpleServer]]
    run_in_own_folder: ClassVar[bool] = True
    """The server process works in the app's folder, as NeMo Gym starts it (`cd <folder> && python
    app.py`): servers open their files by paths relative to it (`prompt_templates/judge.txt`)."""

    def __init__(
        self,
        config: NemoGymResourcesConfig,
        *,
        name: str,
        servers: Mapping[str, ServerAddress] | None = None,
        head_url: str | None = None,
        session_secret: str | None = None,
    ) -> None:
        super().__init__(config, name=name, servers=servers, head_url=head_url, session_secret=session_secret)
        self.inner = their_server(
            self.nemo_gym_class, config, name=name, servers=self.servers, head_url=head_url
        )

    def setup_routes(self, app: FastAPI) -> None:
        """None of ours: the NeMo Gym server's `setup_webserver()` adds its routes."""

    def build_app(self, *, exit_on_startup_error: bool = False) -> FastAPI:
        def plumbing() -> FastAPI:
            return super(NemoGymResourcesServer, self).build_app(exit_on_startup_error=exit_on_startup_error)

        self.inner._ng_app_factory = plumbing
        self.inner._ng_session_of = self.signed_session
        self.inner._ng_cookie_secret = secrets.token_hex(32)
        app = self.inner.setup_webserver()
        if self.config.expose_tools_over_mcp:
            self._expose_tools_over_mcp(app)
        if getattr(app.state, "server", None) is self:
            _our_session_first(app)
            return app
        return self._served_inside(app, plumbing())

    def _expose_tools_over_mcp(self, app: FastAPI) -> None:
        """NeMo Gym's MCP exposure on the app its `setup_webserver()` built, as its `run_webserver`
        does; a setup it refuses is a config error naming the key and the route."""
        from ng_cli.nemo_gym_compat.api.mcp_auto_exposure import install_auto_exposure

        try:
            install_auto_exposure(self.inner, app, token_secret=secrets.token_hex(32))
        except ValueError as error:
            raise ConfigError(
                f"{self.name}.expose_tools_over_mcp: {error}",
                hint="set expose_tools_over_mcp: false to serve the tools over HTTP only",
            ) from None

    def _served_inside(self, theirs: FastAPI, ours: FastAPI) -> FastAPI:
        """An app the server built itself (`FastAPI()`, as NeMo Gym's `GymnasiumServer` does), served
        inside our plumbing: without it ng_run would wait for a `/health` it never answers, and an
        error would be a bare "Internal Server Error". Our routes come first, every other path is
        theirs; their unexpected errors get our envelope; their lifespan runs inside ours."""
        install_error_handlers(theirs, self.name)
        ours.mount("/", theirs)
        outer = ours.router.lifespan_context

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[None]:
            async with outer(app), theirs.router.lifespan_context(theirs):
                yield

        ours.router.lifespan_context = lifespan
        return ours

    def signed_session(self, request: Request) -> SignedSession | None:
        """The call's session of ours, as our session middleware set it: the verified one the call
        carries, or one made for it (None where that middleware did not run)."""
        session = getattr(request.state, "session_id", None)
        if session is None:
            return None
        carried = request.cookies.get(SESSION_COOKIE) == request.state.session_cookie
        return SignedSession(str(session), is_carried=carried)

    async def on_shutdown(self) -> None:
        await close_client_session()


def _our_session_first(app: FastAPI) -> None:
    """Our session middleware outermost: added by our plumbing before the server's `setup_webserver`
    added NeMo Gym's, it would run after it, and NeMo Gym's could not read the session ours sets."""
    session: object = SessionMiddleware  # `Middleware.cls` is typed as a factory protocol
    ours = [middleware for middleware in app.user_middleware if middleware.cls is session]
    app.user_middleware[:] = ours + [
        middleware for middleware in app.user_middleware if middleware.cls is not session
    ]


def global_config_tree(
    name: str, block: dict[str, Any], servers: Mapping[str, ServerAddress], head_url: str | None
) -> dict[str, Any]:
    """NeMo Gym's global config as far as a server reads it: each instance's host and port
    under `<name>.<server_type>.<implementation>`, this server's whole block, the head server."""
    tree: dict[str, Any] = {}
    for other, address in servers.items():
        parts = urlsplit(address.url)
        tree[other] = {
            address.server_type: {address.implementation: {"host": parts.hostname, "port": parts.port}}
        }
    own = servers.get(name)
    kind, implementation = (own.server_type, own.implementation) if own else ("resources_servers", name)
    tree[name] = {kind: {implementation: block}}
    head = urlsplit(head_url) if head_url else None
    tree[HEAD_SERVER_KEY_NAME] = {
        "host": head.hostname if head else "127.0.0.1",
        "port": head.port if head and head.port else 11000,
    }
    return tree


_ADAPTERS: dict[type, type[NemoGymResourcesServer]] = {}


def adapter_for(server_class: type[SimpleServer]) -> type[NemoGymResourcesServer]:
    """The `ResourcesServer` subclass (one per NeMo Gym class) that serves `server_class`."""
    found = _ADAPTERS.get(server_class)
    if found is None:
        their_config = server_class.model_fields["config"].annotation
        config_class = type(
            f"{server_class.__name__}Block",
            (NemoGymResourcesConfig,),
            {"nemo_gym_config_class": their_config, "__module__": __name__},
        )
        found = type(
            server_class.__name__,
            (NemoGymResourcesServer,),
            {"config_class": config_class, "nemo_gym_class": server_class, "__module__": __name__},
        )
        _ADAPTERS[server_class] = found
    return found
