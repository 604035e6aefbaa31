"""`nemo_gym.base_responses_api_model`: NeMo Gym's model-server base, for code that builds one
itself, and the run-wide observability flag as NeMo Gym reads it.

`SimpleResponsesAPIModel` is NeMo Gym's base of its model servers (`responses_api_models/*/app.py`:
`openai_model` ...): a subclass implements `responses` and `chat_completions`, and
`setup_webserver()` serves them at `POST /v1/responses` and `POST /v1/chat/completions` (each body
validated as NeMo Gym validates it, a 422 otherwise), with NeMo Gym's session middleware. That is
what their own tests drive (gdpval's judge panel: its `openai_model` proxies, each in a
`TestClient`). Not stood in for: its streaming dialect (`stream: true`), its Anthropic route
(`/v1/messages`) and its model-call capture (token ids are the model server's here, see
`rollout_observability`). ng_run does not serve such a class: its model servers are ours
(`ng_cli.model_server`, from the same config keys), so `__ng_server_class__` refuses, naming them.

gdpval's multistage orchestrator reads `observability_enabled` through
`observability_enabled_from_config` (NeMo Gym's `ModelCallCaptureConfig`: a capture folder, absolute,
is required when it is on); with the flag on, no `ng_perf` is assembled here.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar, NoReturn, Self

from fastapi import Body, FastAPI
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ng_cli.errors import ConfigError
from ng_cli.nemo_gym_compat.api.config_types import BaseRunServerInstanceConfig
from ng_cli.nemo_gym_compat.api.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from ng_cli.nemo_gym_compat.api.server_utils import BaseServer, SimpleServer

__all__ = [
    "BaseResponsesAPIModel",
    "BaseResponsesAPIModelConfig",
    "Body",
    "ModelCallCaptureConfig",
    "SimpleResponsesAPIModel",
    "observability_enabled_from_config",
]


class BaseResponsesAPIModelConfig(BaseRunServerInstanceConfig):
    """NeMo Gym's model-server block (its capture key accepted; nothing is captured here)."""

    token_id_capture_non_generating_requests: list[dict[str, Any]] = Field(default_factory=list)


class BaseResponsesAPIModel(BaseServer):
    config: BaseResponsesAPIModelConfig


class SimpleResponsesAPIModel(BaseResponsesAPIModel, SimpleServer):
    """NeMo Gym's model-server base: `responses` and `chat_completions` served (module doc)."""

    config: BaseResponsesAPIModelConfig
    non_generating_model_routes: ClassVar[frozenset[tuple[str, str]]] = frozenset()

    def setup_webserver(self) -> FastAPI:
        app = self.new_app()
        self.setup_session_middleware(app)
        app.post("/v1/chat/completions")(self.chat_completions)
        app.post("/v1/responses")(self.responses)
        return app

    @abstractmethod
    async def chat_completions(
        self, body: NeMoGymChatCompletionCreateParamsNonStreaming = Body()
    ) -> NeMoGymChatCompletion: ...

    @abstractmethod
    async def responses(self, body: NeMoGymResponseCreateParamsNonStreaming = Body()) -> NeMoGymResponse: ...

    @classmethod
    def __ng_server_class__(cls) -> NoReturn:
        raise ConfigError(
            f"{cls.__name__} is a NeMo Gym model server (a SimpleResponsesAPIModel); ng_run serves "
            "model servers with its own, not NeMo Gym's classes",
            hint="NeMo Gym's vllm_model and openai_model configs start unchanged under ng_run, served by "
            "ng_cli's model servers (docs/compat.md)",
        )


class ModelCallCaptureConfig(BaseModel):
    """NeMo Gym's run-wide model-call capture keys (the rest of the tree is ignored)."""

    model_config = ConfigDict(extra="ignore")

    observability_enabled: bool = False
    model_call_capture_dir: Path | None = None

    @model_validator(mode="after")
    def _capture_dir_when_on(self) -> Self:
        if not self.observability_enabled:
            return self
        if self.model_call_capture_dir is None:
            raise ValueError("model_call_capture_dir is required when observability_enabled=true")
        if not self.model_call_capture_dir.is_absolute():
            raise ValueError("model_call_capture_dir must be an absolute path")
        return self


def observability_enabled_from_config(global_config_dict: Any) -> bool:
    """The tree's `observability_enabled` (a DictConfig or a mapping), checked as NeMo Gym checks it."""
    tree = (
        OmegaConf.to_container(global_config_dict)
        if isinstance(global_config_dict, DictConfig)
        else global_config_dict
    )
    return ModelCallCaptureConfig.model_validate(tree).observability_enabled
