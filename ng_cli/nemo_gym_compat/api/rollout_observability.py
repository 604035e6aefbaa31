"""`nemo_gym.rollout_observability`: the names of NeMo Gym's rollout observation records.

NeMo Gym's agents build these only when its model-call observability is on
(`observability_enabled`, read through `SimpleResponsesAPIAgent._model_call_capture_enabled`),
which is never the case here: ng_cli records each call's token ids, usage and timings itself
(the collector's rows and metrics). So the records are open models: importable, constructible
with whatever fields a caller passes, serialised as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse

__all__ = [
    "AgentEpisode",
    "AgentInvocation",
    "AgentObservationBundle",
    "ContextCompactionObservation",
    "ModelCallRef",
    "ObservationGap",
    "ObservationModel",
    "SandboxObservation",
    "ToolCallObservation",
    "TrajectoryModelCall",
    "TrajectoryRecord",
    "TrajectoryResponseMetadata",
    "TrajectoryTokenStats",
    "TrajectoryToolCall",
    "TrajectoryTurn",
]


class ObservationModel(BaseModel):
    model_config = ConfigDict(extra="allow")


class ModelCallRef(ObservationModel):
    model_call_id: str | None = None
    response_id: str | None = None


class TrajectoryTokenStats(ObservationModel):
    pass


class TrajectoryResponseMetadata(ObservationModel):
    pass


class TrajectoryModelCall(ObservationModel):
    pass


class TrajectoryTurn(ObservationModel):
    model_calls: list[Any] = Field(default_factory=list)


class AgentInvocation(ObservationModel):
    kind: str = "agent_invocation"
    model_calls: list[Any] = Field(default_factory=list)


class ToolCallObservation(ObservationModel):
    kind: str = "tool_call"


class TrajectoryToolCall(ToolCallObservation):
    output: Any = None


class SandboxObservation(ObservationModel):
    kind: str = "sandbox"


class ContextCompactionObservation(ObservationModel):
    kind: str = "context_compaction"


class ObservationGap(ObservationModel):
    code: str | None = None


class AgentObservationBundle(ObservationModel):
    gaps: list[Any] = Field(default_factory=list)


class TrajectoryRecord(ObservationModel):
    gaps: list[Any] = Field(default_factory=list)
    turns: list[Any] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AgentEpisode:
    """An agent's response and the observations at its execution boundary (NeMo Gym's)."""

    response: NeMoGymResponse
    observations: AgentObservationBundle
