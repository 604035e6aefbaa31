"""`nemo_gym.base_responses_api_model`: the run-wide observability flag, as NeMo Gym reads it.

gdpval's multistage orchestrator reads `observability_enabled` through
`observability_enabled_from_config` (NeMo Gym's `ModelCallCaptureConfig`: a capture folder, absolute,
is required when it is on). That reading is given here. NeMo Gym's model-server bases
(`SimpleResponsesAPIModel`, `BaseResponsesAPIModelConfig`) are not: ng_run serves model servers
with ours (`ng_cli.model_server`), so an `app.py` under `responses_api_models/` that imports them
stops with "cannot import name", naming the base it needs. Model-call capture itself is not done
here either (see `rollout_observability`): with the flag on, no `ng_perf` is assembled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["ModelCallCaptureConfig", "observability_enabled_from_config"]


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
