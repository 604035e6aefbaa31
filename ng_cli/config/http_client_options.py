"""NeMo Gym's global keys that size a stack's HTTP clients: `global_aiohttp_connector_limit*`.

NeMo Gym reads them into every server's aiohttp connector and into its collector's
(`GlobalAIOHTTPAsyncClientConfig`); trainers set them when they start a stack (TRL's NeMo Gym
example: 65,536 connections in all, 16,384 to one host; NeMo RL's actor: the same). Here they
size `ng_cli.servers.http.HttpClient`: in every server of the stack (the launcher puts them in
each child's spec), in `ng_collect_rollouts` and in `run_examples`. Like `config_paths`, every
command accepts them (`command_options`): they belong to the stack's config, which several
commands read. Unset, each client keeps its own default.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ng_cli.config.schema import validate_block
from ng_cli.config.sources import Sources

__all__ = ["HTTP_CLIENT_KEYS", "HttpClientOptions", "read_http_client_options"]


class HttpClientOptions(BaseModel):
    """The connection limits of every HTTP client of the stack (NeMo Gym's global keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    global_aiohttp_connector_limit: int | None = Field(default=None, ge=0)
    """Most connections one process's HTTP client holds open at once; 0: no limit (unset: 2,048 in
    a server, num_samples_in_parallel + 16 in the collector)."""
    global_aiohttp_connector_limit_per_host: int | None = Field(default=None, ge=0)
    """Most connections to one host:port at once; 0 or unset: no limit per host."""


HTTP_CLIENT_KEYS = tuple(HttpClientOptions.model_fields)


def read_http_client_options(tree: dict[str, Any], sources: Sources) -> HttpClientOptions:
    """The two keys from a composed tree; a bad value is a ConfigError naming its file:line."""
    values = {key: tree[key] for key in HTTP_CLIENT_KEYS if tree.get(key) is not None}
    return validate_block(HttpClientOptions, values, sources=sources)
