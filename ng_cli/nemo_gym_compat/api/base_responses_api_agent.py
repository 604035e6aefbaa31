"""`nemo_gym.base_responses_api_agent`: `SimpleResponsesAPIAgent`, the base of NeMo Gym's agents.

A NeMo Gym agent subclasses `SimpleResponsesAPIAgent`, implements `responses` (one turn, or its
loop) and `run` (one whole rollout: its model calls, then the resources server's `/verify`), and
calls the stack's servers through `self.server_client` by instance name, itself included (an
agent's `run` posts to its own `/v1/responses`). Here `setup_webserver()` starts from the app our
agent adapter hands it (`ng_cli.nemo_gym_compat.agent_adapter`: health, error envelope, body
limits, our `ng_session` cookie, downstream failures mapped to typed statuses) and adds NeMo Gym's
routes `/v1/responses`, `/run` and `/aggregate_metrics`.

Not stood in for: NeMo Gym's episode sessions (`/v1/agent_sessions`, seeded by its environment
servers for harness agents); an agent that needs them fails at `/run` naming the route, as NeMo
Gym's own default does. Its rollout-id path prefixes (`/ng-rollout/<id>/...`, token-id capture)
are off here (the helpers return paths unchanged): token ids come from the model server's
responses.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from fastapi import Body, FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from ng_cli.nemo_gym_compat.api.base_resources_server import BaseRunRequest, BaseVerifyResponse
from ng_cli.nemo_gym_compat.api.config_types import (
    AggregateMetrics,
    AggregateMetricsRequest,
    BaseRunServerInstanceConfig,
)
from ng_cli.nemo_gym_compat.api.episode_types import EpisodeId, TaskId
from ng_cli.nemo_gym_compat.api.global_config import get_first_server_config_dict
from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from ng_cli.nemo_gym_compat.api.reward_profile import AggregateMetricsMixin, compute_aggregate_metrics
from ng_cli.nemo_gym_compat.api.server_utils import BaseServer, SimpleServer

__all__ = [
    "AGENT_SESSION_COOKIE_KEY",
    "AgentCloseSessionRequest",
    "AgentCloseSessionResponse",
    "AgentSeedSessionRequest",
    "AgentSeedSessionResponse",
    "AgentSessionSetupError",
    "AgentSessionState",
    "BaseResponsesAPIAgent",
    "BaseResponsesAPIAgentConfig",
    "Body",
    "SimpleResponsesAPIAgent",
]

AGENT_SESSION_COOKIE_KEY = "agent_session_id"


class BaseResponsesAPIAgentConfig(BaseRunServerInstanceConfig):
    """NeMo Gym's agent keys; its agents read them (`skip_verification` ...) as NeMo Gym's do."""

    session_close_retry_window_seconds: float = Field(default=300, gt=0, allow_inf_nan=False)
    skip_verification: bool = False
    skip_verification_reward: float = 0.0
    token_id_capture: bool = False
    tool_accesses: list[Any] = Field(default_factory=list)


class BaseResponsesAPIAgent(BaseServer):
    config: BaseResponsesAPIAgentConfig


class AgentSeedSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_session_id: str = Field(min_length=1)
    episode_id: EpisodeId
    task_id: TaskId
    tool_accesses: list[Any] = Field(default_factory=list)
    sandbox_access: Any = None


class AgentSeedSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_session_id: str


class AgentCloseSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_session_id: str
    episode_id: EpisodeId


class AgentCloseSessionResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_session_id: str
    agent_observations: Any = None
    resources_cookies: dict[str, str] | None = None


@dataclass
class AgentSessionState:
    """Harness-owned session state (NeMo Gym's); only its type is needed here."""

    request: AgentSeedSessionRequest


class AgentSessionSetupError(Exception):
    def __init__(self, state: AgentSessionState, *, error: BaseException) -> None:
        super().__init__(str(error))
        self.state = state
        self.error = error


class SimpleResponsesAPIAgent(BaseResponsesAPIAgent, AggregateMetricsMixin, SimpleServer):
    """Base of NeMo Gym's agents; under ng_run the agent adapter serves it (`__ng_server_class__`)."""

    config: BaseResponsesAPIAgentConfig
    ray_enabled: ClassVar[bool | None] = None

    def setup_webserver(self) -> FastAPI:
        app = self.new_app()
        self.setup_session_middleware(app)
        app.post("/v1/responses")(self.responses)
        app.post("/run")(self.run)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    @staticmethod
    def _agent_session_id_from_request(request: Request | None) -> str | None:
        """Always None: no episode session is ever seeded here (see the module doc)."""
        return None

    def _require_agent_session(self, agent_session_id: str) -> AgentSessionState:
        raise HTTPException(
            409, "NeMo Gym's agent sessions (/v1/agent_sessions) are not served by ng_cli's stand-in"
        )

    def effective_tool_accesses(self, request: AgentSeedSessionRequest) -> list[Any]:
        accesses = {access.name: access for access in self.config.tool_accesses}
        accesses.update((access.name, access) for access in request.tool_accesses)
        return list(accesses.values())

    def _capture_correlation_enabled(self) -> bool:
        return False

    def _model_call_capture_enabled(self) -> bool:
        return False

    def _token_id_capture_enabled(self) -> bool:
        return False

    def rollout_id_from_run(self, body: Any) -> str | None:
        return None

    def url_path_for_run(self, url_path: str, body: Any) -> str:
        return url_path

    def base_url_for_run(self, base_url: str, body: Any) -> str:
        return base_url

    def url_path_for_request(self, url_path: str, request: Request | None) -> str:
        return url_path

    def resolve_model_base_url(self, model_server_name: str, rollout_id: str | None = None) -> str:
        block = get_first_server_config_dict(self.server_client.global_config_dict, model_server_name)
        return f"{self.server_client._build_server_base_url(block)}/v1"

    @abstractmethod
    async def responses(self, body: NeMoGymResponseCreateParamsNonStreaming = Body()) -> NeMoGymResponse: ...

    @abstractmethod
    async def run(self, body: BaseRunRequest = Body()) -> BaseVerifyResponse: ...

    async def aggregate_metrics(self, body: AggregateMetricsRequest = Body()) -> AggregateMetrics:
        """NeMo Gym's default: the resources server's aggregation, with this agent's hooks."""
        if self.config.skip_verification:
            return AggregateMetrics()
        return compute_aggregate_metrics(
            body.verify_responses,
            compute_metrics_fn=self.compute_metrics,
            get_key_metrics_fn=self.get_key_metrics,
            compute_repeat_metrics_fn=self.compute_repeat_metrics,
        )

    @classmethod
    def __ng_server_class__(cls) -> type:
        """Our `AgentServer` serving this class (what `ng_cli.servers.loading` asks for)."""
        from ng_cli.nemo_gym_compat.agent_adapter import agent_adapter_for

        return agent_adapter_for(cls)
