"""Writing a new environment from a template (`ng_init_resources_server`)."""

from __future__ import annotations

from ng_cli.scaffold.environment import NewEnvironment, init_resources_server, parse_entrypoint

__all__ = ["NewEnvironment", "init_resources_server", "parse_entrypoint"]
