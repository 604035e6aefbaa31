"""`nemo_gym.rollout_collection` for a trainer: the servers' record keys (the stand-in
`ng_cli.nemo_gym_compat.api.rollout_collection`) and NeMo Gym's collection driver,
`RolloutCollectionHelper`, with `RolloutCollectionConfig` (the collector's options)."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.rollout_collection import *  # noqa: F403 - the module's names, as NeMo Gym's
from ng_cli.nemo_gym_compat.api.rollout_collection import __all__ as _RECORD_NAMES
from ng_cli.rollouts.config import CollectConfig as RolloutCollectionConfig
from ng_cli.trainer_api.collection import ExamplesError, RolloutCollectionHelper

__all__ = [*_RECORD_NAMES, "ExamplesError", "RolloutCollectionConfig", "RolloutCollectionHelper"]
