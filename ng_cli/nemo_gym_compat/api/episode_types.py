"""`nemo_gym.episode_types`: identities of episodes and tasks (NeMo Gym's environment protocol)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["BaseEpisodeRequest", "BaseEpisodeResponse", "EpisodeFailure", "EpisodeId", "TaskId"]


class EpisodeId(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rollout_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    attempt: int = Field(default=0, ge=0)

    @field_validator("rollout_id")
    @classmethod
    def _reserve_attempt_suffix(cls, rollout_id: str) -> str:
        if re.search(r"-a[1-9][0-9]*$", rollout_id):
            raise ValueError("rollout_id must not end with the reserved attempt suffix '-a<N>'")
        return rollout_id

    @property
    def capture_key(self) -> str:
        return self.rollout_id if self.attempt == 0 else f"{self.rollout_id}-a{self.attempt}"


class TaskId(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    taskset: str = Field(min_length=1)
    task_id: str = Field(min_length=1)


def is_materialized_task_row(row: Mapping[str, object]) -> bool:
    return isinstance(row.get("task_id"), Mapping) and "task_input" in row


class EpisodeFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    failure_reason: str = Field(max_length=2000)
    terminal: bool
    failure_kind: str | None = None
    stage: str | None = None


TaskInputT = TypeVar("TaskInputT", bound=BaseModel)
EpisodeResultT = TypeVar("EpisodeResultT")


class BaseEpisodeRequest(BaseModel, Generic[TaskInputT]):
    episode_id: EpisodeId
    task_id: TaskId
    task_input: TaskInputT


class BaseEpisodeResponse(BaseModel, Generic[EpisodeResultT]):
    episode_id: EpisodeId
    result: EpisodeResultT | None = None
    failure: EpisodeFailure | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
