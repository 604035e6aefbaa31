"""`nemo_gym.config_types`: the config models NeMo Gym's servers name in their own configs.

A server's config class subclasses `BaseResourcesServerConfig` (in `base_resources_server`),
which keeps NeMo Gym's fields: `host`, `port`, `entrypoint`, `name`, `domain`, `num_workers`.
References to other servers (`judge_model_server: {type: responses_api_models, name: ...}`)
are `ModelServerRef`s; ng_run checks that each names an instance of the stack.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AgentServerRef",
    "AggregateMetrics",
    "AggregateMetricsRequest",
    "BaseNeMoGymCLIConfig",
    "BaseRunServerConfig",
    "BaseRunServerInstanceConfig",
    "BaseServerConfig",
    "Domain",
    "ModelServerRef",
    "ResourcesServerRef",
]


class ModelServerRef(BaseModel):
    type: Literal["responses_api_models"]
    name: str


class ResourcesServerRef(BaseModel):
    type: Literal["resources_servers"]
    name: str


class AgentServerRef(BaseModel):
    type: Literal["responses_api_agents"]
    name: str


class Domain(StrEnum):
    MATH = "math"
    CODING = "coding"
    AGENT = "agent"
    KNOWLEDGE = "knowledge"
    INSTRUCTION_FOLLOWING = "instruction_following"
    LONG_CONTEXT = "long_context"
    SAFETY = "safety"
    GAMES = "games"
    TRANSLATION = "translation"
    E2E = "e2e"
    RLHF = "rlhf"
    OTHER = "other"


class BaseServerConfig(BaseModel):
    host: str
    port: int
    num_workers: int | None = None


class BaseRunServerConfig(BaseServerConfig):
    entrypoint: str
    domain: str | None = None
    """A string here (NeMo Gym: its `Domain` enum): ng_run's own check of the block names the
    domains it knows; a server reading `self.config.domain` gets the same text."""


class BaseRunServerInstanceConfig(BaseRunServerConfig):
    name: str


class BaseNeMoGymCLIConfig(BaseModel):
    """NeMo Gym's base of command options; its commands are ours here (`ng_*`)."""

    model_config = ConfigDict(extra="allow")


class AggregateMetricsRequest(BaseModel):
    verify_responses: list[dict[str, Any]]


class AggregateMetrics(BaseModel):
    """`/aggregate_metrics`' answer, NeMo Gym 0.7.0's shape (servers build it from a base one)."""

    group_level_metrics: list[dict[str, Any]] = Field(default_factory=list)
    agent_metrics: dict[str, Any] = Field(default_factory=dict)
    key_metrics: dict[str, Any] = Field(default_factory=dict)
    perf_summary: dict[str, Any] | None = None
    """From the rollouts' `ng_perf` (NeMo Gym's observability); none here."""
    repeat_level_metrics: list[dict[str, Any]] = Field(default_factory=list)
    """Per repeat (rollout index) summaries; the collector's `_aggregate_metrics.json` has them here."""
