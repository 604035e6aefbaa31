"""A NeMo Gym `SimpleResponsesAPIAgent` subclass served as one of our `AgentServer`s.

`agent_adapter_for(cls)` is the agents' twin of `adapter.adapter_for`: its config class accepts
the NeMo Gym block as written (our agent keys checked as for any agent, so a missing
`resources_server` or a reference to no instance is refused before start; `model_server` may be
left out, as NeMo Gym's agents that call a model of their own (claude_code_agent's
`anthropic_base_url`) declare it optional; the rest validated by the agent's own config class,
which refuses a missing `model_server` where it needs one), and its app is the one the agent's `setup_webserver()` builds,
started from our plumbing: `/health`, the error envelope, body limits and our signed
`ng_session` cookie (which the agent forwards, as it forwards every cookie it is sent, so the
resources server sees the rollout's session).

NeMo Gym's agents call their neighbours through `server_client` (aiohttp), whose failures NeMo
Gym lets escape as bare 500s. Here they are typed at this boundary: an error status from a
neighbour is an `UpstreamHTTPError` (its 4xx kept, else 502), a connection that failed is
`UpstreamUnavailableError` (503), a timeout `UpstreamTimeoutError` (504), each naming the URL, so
the collector classifies and retries them as it does our own agents' failures. A neighbour that
moved (restarted on another node) is followed through the head (`ServerClient`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

import aiohttp
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ng_cli.config.nemo_gym import NemoGymKey
from ng_cli.config.schema import AgentServerConfig, ServerRef
from ng_cli.errors import (
    NgError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from ng_cli.nemo_gym_compat.adapter import (
    _our_session_first,
    _revalidation_error,
    their_block,
    their_server,
)
from ng_cli.nemo_gym_compat.api.server_utils import SimpleServer, close_client_session
from ng_cli.servers.agent import AgentServer
from ng_cli.servers.answers import error_response, status_for
from ng_cli.servers.spec import ServerAddress

__all__ = ["NemoGymAgentConfig", "NemoGymAgentServer", "agent_adapter_for", "typed_failure"]

logger = logging.getLogger(__name__)


class NemoGymAgentConfig(AgentServerConfig):
    """A NeMo Gym agent's block: our agent keys, plus whatever its own config class reads."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {}
    """None dropped: NeMo Gym's agent keys (`skip_verification` ...) are read by its own agent."""
    nemo_gym_config_class: ClassVar[type[BaseModel]] = BaseModel
    model_server: ServerRef | None = None  # type: ignore[assignment]  # their class decides
    """The model server the agent calls, when it calls one through the stack."""

    @model_validator(mode="after")
    def _check_reference_types(self) -> NemoGymAgentConfig:
        if self.resources_server.type != "resources_servers":
            raise ValueError(
                f"resources_server must refer to resources_servers, not {self.resources_server.type}"
            )
        if self.model_server is not None and self.model_server.type != "responses_api_models":
            raise ValueError(f"model_server must refer to responses_api_models, not {self.model_server.type}")
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _check_with_their_class(cls, data: Any, handler: Any) -> Any:
        ours = handler(data)
        if isinstance(data, Mapping):
            try:
                cls.nemo_gym_config_class.model_validate(their_block(data, name="?", port=0))
            except ValidationError as exc:
                raise _revalidation_error(cls.__name__, exc) from None
        return ours


def typed_failure(error: Exception, *, server: str) -> UpstreamError:
    """One of our upstream errors for an aiohttp failure escaping a NeMo Gym agent's handler."""
    if isinstance(error, aiohttp.ClientResponseError):
        body = getattr(error, "response_content", b"") or b""
        text = body.decode("utf-8", "replace")[:500] if isinstance(body, bytes) else str(body)[:500]
        url = str(error.request_info.real_url)
        return UpstreamHTTPError(
            f"{server}: {error.request_info.method} {url} answered {error.status}: {text or error.message}",
            status=error.status, body=text, endpoint=url,
        )  # fmt: skip
    if isinstance(error, TimeoutError | aiohttp.ServerTimeoutError):
        return UpstreamTimeoutError(f"{server}: a call to a neighbour server timed out ({error!r})")
    return UpstreamUnavailableError(f"{server}: a call to a neighbour server failed to connect: {error}")


class NemoGymAgentServer(AgentServer[NemoGymAgentConfig]):
    """Serves one NeMo Gym agent object (`self.inner`) on our framework."""

    nemo_gym_class: ClassVar[type[SimpleServer]]
    run_in_own_folder: ClassVar[bool] = True
    """Works in the app's folder, as NeMo Gym starts it; prompt files resolve from there, then
    from NeMo Gym's root (`load_prompt_config`)."""

    def __init__(
        self,
        config: NemoGymAgentConfig,
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
        """None of ours: the NeMo Gym agent's `setup_webserver()` adds its routes."""

    def build_app(self, *, exit_on_startup_error: bool = False) -> FastAPI:
        def plumbing() -> FastAPI:
            app = super(NemoGymAgentServer, self).build_app(exit_on_startup_error=exit_on_startup_error)
            self._type_neighbour_failures(app)
            return app

        self.inner._ng_app_factory = plumbing
        self.inner._ng_cookie_secret = secrets.token_hex(32)
        app = self.inner.setup_webserver()
        if getattr(app.state, "server", None) is not self:
            raise NgError(
                f"{self.name}: {type(self.inner).__name__}.setup_webserver() built its own app; "
                "only agents that start from SimpleResponsesAPIAgent.setup_webserver() are served here"
            )
        _our_session_first(app)
        return app

    def _type_neighbour_failures(self, app: FastAPI) -> None:
        async def on_aiohttp_error(request: Request, exc: Exception) -> Response:
            error = typed_failure(exc, server=self.name)
            logger.warning("%s %s -> %s", request.method, request.url.path, error)
            return error_response(
                status_for(error), error.message, server=self.name, type_=error.error_type,
                extra=error.envelope_fields(),
            )  # fmt: skip

        for kind in (aiohttp.ClientError, TimeoutError):
            app.add_exception_handler(kind, on_aiohttp_error)

    async def on_shutdown(self) -> None:
        await close_client_session()


_ADAPTERS: dict[type, type[NemoGymAgentServer]] = {}


def agent_adapter_for(agent_class: type[SimpleServer]) -> type[NemoGymAgentServer]:
    """The `AgentServer` subclass (one per NeMo Gym class) that serves `agent_class`."""
    found = _ADAPTERS.get(agent_class)
    if found is None:
        their_config = agent_class.model_fields["config"].annotation
        config_class = type(
            f"{agent_class.__name__}Block",
            (NemoGymAgentConfig,),
            {"nemo_gym_config_class": their_config, "__module__": __name__},
        )
        found = type(
            agent_class.__name__,
            (NemoGymAgentServer,),
            {"config_class": config_class, "nemo_gym_class": agent_class, "__module__": __name__},
        )
        _ADAPTERS[agent_class] = found
    return found
