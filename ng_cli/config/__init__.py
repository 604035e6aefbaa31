"""Config: YAML fragments + env.yaml + command-line overrides -> one checked, resolved tree.

    compose_config(overrides, cwd=...) -> ComposedConfig(tree, instances, sources)

See `compose.py` for the merge order and `overrides.py` for the command-line grammar.
Names are imported lazily: a server child that only needs `schema` does not pay for Hydra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ng_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ng_cli.config.compose import ComposedConfig, compose_config
    from ng_cli.config.instances import SERVER_TYPES, ServerInstance
    from ng_cli.config.render import render_yaml
    from ng_cli.config.schema import (
        AgentServerConfig,
        DatasetConfig,
        ModelServerConfig,
        ResourcesServerConfig,
        ServerConfig,
        ServerRef,
        validate_block,
    )
    from ng_cli.config.secrets import Secret, is_secret_key, mask
    from ng_cli.config.sources import Sources

_HOMES = {
    "ComposedConfig": "compose",
    "compose_config": "compose",
    "SERVER_TYPES": "instances",
    "ServerInstance": "instances",
    "render_yaml": "render",
    "AgentServerConfig": "schema",
    "DatasetConfig": "schema",
    "ModelServerConfig": "schema",
    "ResourcesServerConfig": "schema",
    "ServerConfig": "schema",
    "ServerRef": "schema",
    "validate_block": "schema",
    "Secret": "secrets",
    "is_secret_key": "secrets",
    "mask": "secrets",
    "Sources": "sources",
}

__all__ = [
    "SERVER_TYPES",
    "AgentServerConfig",
    "ComposedConfig",
    "DatasetConfig",
    "ModelServerConfig",
    "ResourcesServerConfig",
    "Secret",
    "ServerConfig",
    "ServerInstance",
    "ServerRef",
    "Sources",
    "compose_config",
    "is_secret_key",
    "mask",
    "render_yaml",
    "validate_block",
]

__getattr__ = lazy_exports(__name__, _HOMES)
