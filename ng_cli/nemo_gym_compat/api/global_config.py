"""`nemo_gym.global_config`: the run's whole config as NeMo Gym's servers read it.

Under ng_run a server sees the stack's servers (name -> {server_type: {implementation: {host,
port}}}), its own block and the head server: what NeMo Gym's servers look up in it. Outside a
stack (a server's own tests) it is `NEMO_GYM_CONFIG_DICT` if set, else empty.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "AGENT_REF_KEY_NAME",
    "ATTEMPT_INDEX_KEY_NAME",
    "CACHE_DIR_KEY_NAME",
    "HEAD_SERVER_KEY_NAME",
    "OBSERVABILITY_ENABLED_KEY_NAME",
    "ROLLOUT_INDEX_KEY_NAME",
    "SKILLS_REF_KEY_NAME",
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
OBSERVABILITY_ENABLED_KEY_NAME = "observability_enabled"
"""NeMo Gym's switch for its model-call observability, never set here (ng_cli records calls itself)."""
SKILLS_REF_KEY_NAME = "skills_ref"
"""A row's skills reference (NeMo Gym's collector stamps it; ours refuses `skills`, so no row here
carries one and an agent reading it finds none)."""

_GLOBAL: DictConfig | None = None
_SERVER_TYPES = ("resources_servers", "responses_api_models", "responses_api_agents")


class GlobalConfigDictParserConfig:
    """NeMo Gym's parser options: only `initial_global_config_dict` selects anything here (the
    rest, CLI and dotenv loading, are ng_run's)."""

    NO_MODEL_GLOBAL_CONFIG_DICT: ClassVar[DictConfig] = DictConfig(
        {
            "policy_base_url": "",
            "policy_api_key": "",
            "policy_model_name": "",
            "policy_model": {"responses_api_models": {"dummy_model": {"entrypoint": "app.py"}}},
        }
    )
    """NeMo Gym's placeholder policy model, for loading a config that needs none."""

    def __init__(self, **kwargs: Any) -> None:
        self.options = kwargs


class GlobalConfigDictParser:
    """NeMo Gym parses its CLI into the global config; here ng_run composed it already. With an
    `initial_global_config_dict` (a server's verifier fixture loading its benchmark config
    offline), its `config_paths` are composed by our config code from NeMo Gym's root, the dict's
    other keys on top, as NeMo Gym's parser does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def parse(
        self, parse_config: GlobalConfigDictParserConfig | None = None, *args: Any, **kwargs: Any
    ) -> DictConfig:
        initial = parse_config.options.get("initial_global_config_dict") if parse_config is not None else None
        if initial is None:
            return get_global_config_dict()
        from ng_cli.config.compose import compose_tree
        from ng_cli.nemo_gym_compat import api

        values = OmegaConf.to_container(OmegaConf.create(initial), resolve=False)
        assert isinstance(values, dict)
        paths = values.pop("config_paths", None) or []
        tree = compose_tree(
            [str(path) for path in paths], {str(k): v for k, v in values.items()}, cwd=api.PARENT_DIR
        )
        for node in tree.values():  # NeMo Gym's parser gives every server a host and port
            for server_type in _SERVER_TYPES:
                blocks = node.get(server_type) if isinstance(node, dict) else None
                for block in (blocks or {}).values() if isinstance(blocks, dict) else ():
                    if isinstance(block, dict):
                        block.setdefault("host", "127.0.0.1")
                        block.setdefault("port", 0)  # offline: nothing is served
        return OmegaConf.create(tree)


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
