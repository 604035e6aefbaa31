"""`nemo_gym.cli` for a trainer: `RunHelper` and `GlobalConfigDictParserConfig`, as NeMo Gym 0.7.0
re-exports them there (TRL's example and NeMo RL's actor import both from `nemo_gym.cli`)."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.global_config import GlobalConfigDictParserConfig
from ng_cli.trainer_api.run_helper import RunHelper

__all__ = ["GlobalConfigDictParserConfig", "RunHelper"]
