"""`nemo_gym.global_config`: the run's whole config as NeMo Gym's servers read it.

Under ng_run a server sees the stack's servers (name -> {server_type: {implementation: {host,
port}}}), its own block and the head server: what NeMo Gym's servers look up in it. Outside a
stack (a server's own tests) it is `NEMO_GYM_CONFIG_DICT` if set, else empty.
"""

from __future__ import annotations

import json
import os
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "AGENT_REF_KEY_NAME",
    "ATTEMPT_INDEX_KEY_NAME",
    "CACHE_DIR_KEY_NAME",
    "HEAD_SERVER_KEY_NAME",
    "ROLLOUT_INDEX_KEY_NAME",
    "TASK_INDEX_KEY_NAME",
    "GlobalConfigDictParser",
    "GlobalConfigDictParserConfig",
    "get_first_server_config_dict",
    "get_global_config_dict",
    "maybe_get_global_config_dict",
    "set_global_config_dict",
]

NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME = "NEMO_GYM_CONFIG_DICT"
NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME = "NEMO_GYM_CONFIG_PATH"
HEAD_SERVER_KEY_NAME = "head_server"
CACHE_DIR_KEY_NAME = "cache_dir"
TASK_INDEX_KEY_NAME = "_ng_task_index"
ROLLOUT_INDEX_KEY_NAME = "_ng_rollout_index"
ATTEMPT_INDEX_KEY_NAME = "_ng_attempt_index"
AGENT_REF_KEY_NAME = "agent_ref"

_GLOBAL: DictConfig | None = None


class GlobalConfigDictParserConfig:
    """NeMo Gym's parser options; the config is ng_run's here, so they select nothing."""

    def __init__(self, **kwargs: Any) -> None:
        self.options = kwargs


class GlobalConfigDictParser:
    """NeMo Gym parses its CLI into the global config; here ng_run composed it already."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def parse(self, *args: Any, **kwargs: Any) -> DictConfig:
        return get_global_config_dict()


def set_global_config_dict(tree: dict[str, Any]) -> None:
    """What `get_global_config_dict` answers in this process (the adapter sets it at start)."""
    global _GLOBAL
    _GLOBAL = OmegaConf.create(tree)


def maybe_get_global_config_dict() -> DictConfig | None:
    if _GLOBAL is not None:
        return _GLOBAL
    raw = os.environ.get(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME)
    return OmegaConf.create(json.loads(raw)) if raw else None


def get_global_config_dict(*args: Any, **kwargs: Any) -> DictConfig:
    found = maybe_get_global_config_dict()
    return found if found is not None else OmegaConf.create({})


def get_first_server_config_dict(global_config_dict: DictConfig | dict[str, Any], top_level_path: str) -> Any:
    """`tree[name][server_type][implementation]`: one instance's block."""
    node: Any = global_config_dict[top_level_path]
    for _ in range(2):
        node = next(iter(node.values()))
    return node
