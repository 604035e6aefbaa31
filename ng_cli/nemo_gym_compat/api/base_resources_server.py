"""`nemo_gym.base_resources_server`: `SimpleResourcesServer` and the request/response models.

A NeMo Gym environment subclasses `SimpleResourcesServer`, keeps its state in pydantic fields,
and adds tool routes in `setup_webserver()`. Here `setup_webserver()` starts from the app our
adapter hands it (our health route, error envelope, body limits and session cookie), and adds
NeMo Gym's session middleware and its routes: `/seed_session`, `/verify` (judge failures become
a masked row, as NeMo Gym's `judge_failsafe` does), `/aggregate_metrics`, `/close_session`.
"""

from __future__ import annotations

from abc import abstractmethod
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from ng_cli.nemo_gym_compat.api.config_types import (
    AggregateMetrics,
    AggregateMetricsRequest,
    BaseRunServerInstanceConfig,
)
from ng_cli.nemo_gym_compat.api.episode_types import EpisodeId, TaskId
from ng_cli.nemo_gym_compat.api.failure_kinds import validate_failure_kind
from ng_cli.nemo_gym_compat.api.judge import judge_failsafe
from ng_cli.nemo_gym_compat.api.mcp_access import (
    MCP_TOKEN_SALT,
    NEMO_GYM_MCP_METADATA_KEY,
    NEMO_GYM_MCP_SESSION_TOKEN_HEADER,
    RESERVED_MCP_TOOL_NAMES,
    MCPServerMetadata,
    normalize_tool_name,
)
from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from ng_cli.nemo_gym_compat.api.reward_profile import AggregateMetricsMixin, compute_aggregate_metrics
from ng_cli.nemo_gym_compat.api.rollout_correlation import RolloutContextMiddleware
from ng_cli.nemo_gym_compat.api.server_utils import BaseServer, SimpleServer

if TYPE_CHECKING:  # the module needs the optional `mcp` package; imported only by a server that opts in
    from ng_cli.nemo_gym_compat.api.mcp_auto_exposure import CatchAll, MCPTool

__all__ = [
    "NEMO_GYM_MCP_METADATA_KEY",
    "NEMO_GYM_MCP_SESSION_TOKEN_HEADER",
    "RESERVED_MCP_TOOL_NAMES",
    "BaseMultiRewardVerifyResponse",
    "BaseResourcesServer",
    "BaseResourcesServerConfig",
    "BaseRunRequest",
    "BaseSeedSessionRequest",
    "BaseSeedSessionResponse",
    "BaseVerifyRequest",
    "BaseVerifyResponse",
    "MCPServerMetadata",
    "ResourcesCloseSessionRequest",
    "ResourcesCloseSessionResponse",
    "ResourcesSeedSessionRequest",
    "ResourcesSeedSessionResponse",
    "ResourcesVerifyRequest",
    "ReverifyMode",
    "SimpleResourcesServer",
    "normalize_tool_name",
]

_MCP_TOKEN_SALT = MCP_TOKEN_SALT


class ReverifyMode(StrEnum):
    STATELESS = "stateless"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


class BaseResourcesServerConfig(BaseRunServerInstanceConfig):
    expose_tools_over_mcp: bool = False
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.UNKNOWN


class BaseResourcesServer(BaseServer):
    config: BaseResourcesServerConfig


class BaseRunRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    responses_create_params: NeMoGymResponseCreateParamsNonStreaming
    capture_rollout_id: str | None = Field(default=None, alias="_ng_rollout_id", exclude=True)


class BaseVerifyRequest(BaseRunRequest):
    response: NeMoGymResponse


class BaseVerifyResponse(BaseVerifyRequest):
    reward: float
    mask_sample: bool = False
    """The reward is not a measurement of the policy (a lost session, a failed judge)."""
    failure_kind: str | None = None
    failure_reason: str | None = None

    @field_validator("failure_kind")
    @classmethod
    def _known_failure_kind(cls, value: str | None) -> str | None:
        return validate_failure_kind(value)


class BaseMultiRewardVerifyResponse(BaseVerifyResponse):
    reward_components: dict[str, float]


class BaseSeedSessionRequest(BaseModel):
    pass


class BaseSeedSessionResponse(BaseModel):
    pass


class ResourcesSeedSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str = Field(min_length=1)
    episode_id: EpisodeId
    task_id: TaskId
    task_data: dict[str, JsonValue]


class ResourcesSeedSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str
    resources_tools: MCPServerMetadata | None = None
    sandbox_access: dict[str, Any] | None = None


VerificationInputT = TypeVar("VerificationInputT")


class ResourcesVerifyRequest(BaseModel, Generic[VerificationInputT]):
    model_config = ConfigDict(extra="forbid")

    episode_id: EpisodeId
    task_id: TaskId
    verification_input: VerificationInputT


class ResourcesCloseSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str
    episode_id: EpisodeId


class ResourcesCloseSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resources_session_id: str


class SimpleResourcesServer(BaseResourcesServer, AggregateMetricsMixin, SimpleServer):
    """Base of NeMo Gym's environments; under ng_run the adapter serves it (`__ng_server_class__`)."""

    config: BaseResourcesServerConfig

    def setup_webserver(self) -> FastAPI:
        app = self.new_app()
        self.setup_session_middleware(app)
        app.add_middleware(RolloutContextMiddleware)
        app.post("/seed_session")(self.seed_session)
        app.post("/close_session")(self.close_resources_session)
        app.post("/verify")(judge_failsafe(self.verify))
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        app.get("/reverify_mode")(self.get_reverify_mode)
        return app

    async def seed_session(
        self, body: ResourcesSeedSessionRequest | BaseSeedSessionRequest
    ) -> ResourcesSeedSessionResponse | BaseSeedSessionResponse:
        """Keeps no state. An Environment Server's seed (`ResourcesSeedSessionRequest`) gets its
        `resources_session_id` back, an agent's legacy seed an empty answer (NeMo Gym's default)."""
        if isinstance(body, ResourcesSeedSessionRequest):
            return ResourcesSeedSessionResponse(resources_session_id=body.resources_session_id)
        return BaseSeedSessionResponse()

    def normalize_tool_name(self, name: str) -> str:
        """This server's MCP namespace taken off a tool-call name, before /verify reads it."""
        return normalize_tool_name(name, self.config.name or type(self).__name__)

    def mcp_tools(self, harvested: list[MCPTool], catchall: CatchAll | None) -> list[MCPTool] | None:
        """The tools `expose_tools_over_mcp` serves: by default every typed `POST /<tool>` route.
        A server may filter them, add tools served by its catch-all route
        (`harvested + [catchall.tool(name, schema, description)]`), or return None for none."""
        return harvested

    def mcp_allowed_tools_for_session(self, seed_body: dict[str, Any]) -> list[str] | None:
        """The tools one rollout's token may list and call (None: all); `seed_body` is the
        /seed_session body (an environment server's: its `task_data`)."""
        return None

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)

    @abstractmethod
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse: ...

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> AggregateMetrics:
        return compute_aggregate_metrics(
            body.verify_responses,
            compute_metrics_fn=self.compute_metrics,
            get_key_metrics_fn=self.get_key_metrics,
        )

    async def get_reverify_mode(self) -> ReverifyMode:
        return self.config.REVERIFY_MODE

    @classmethod
    def __ng_server_class__(cls) -> type:
        """Our `ResourcesServer` serving this class (what `ng_cli.servers.loading` asks for)."""
        from ng_cli.nemo_gym_compat.adapter import adapter_for

        return adapter_for(cls)
