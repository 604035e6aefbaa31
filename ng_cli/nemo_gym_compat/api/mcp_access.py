"""What a rollout's MCP client is told, and how its tool-call names are read back (NeMo Gym
defines these in `nemo_gym.base_resources_server`, which re-exports them from here).

Its own module so that `mcp_auto_exposure`, which needs the optional `mcp` package, and
`base_resources_server`, which every NeMo Gym server imports, share them without importing each
other.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = [
    "MCP_TOKEN_SALT",
    "NEMO_GYM_MCP_METADATA_KEY",
    "NEMO_GYM_MCP_SESSION_TOKEN_HEADER",
    "RESERVED_MCP_TOOL_NAMES",
    "MCPServerMetadata",
    "normalize_tool_name",
]

NEMO_GYM_MCP_SESSION_TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
"""The header an MCP client replays on every call: the rollout's signed session token."""
NEMO_GYM_MCP_METADATA_KEY = "mcp"
"""The key of a /seed_session answer that tells the agent where the rollout's MCP tools are."""
MCP_TOKEN_SALT = "nemo-gym-mcp-session-token"
RESERVED_MCP_TOOL_NAMES = frozenset({"verify", "seed_session", "close_session", "aggregate_metrics", "mcp"})
"""Routes of every resources server that are never tools."""


class MCPServerMetadata(BaseModel):
    """Where one rollout's MCP tools are: a /seed_session answer carries it under `mcp`."""

    server_name: str
    url_path: str = "/mcp"
    transport: str = "http"
    headers: dict[str, str]


def normalize_tool_name(name: str, server_name: str | None = None) -> str:
    """A tool-call name as the verifier knows it: MCP clients record `mcp__<server>__<tool>`, HTTP
    agents `<tool>`. With `server_name`, only that server's prefix is taken off."""
    if not name.startswith("mcp__"):
        return name
    if server_name is not None:
        prefix = f"mcp__{server_name}__"
        return name[len(prefix) :] if name.startswith(prefix) else name
    _, sep, tool = name[len("mcp__") :].partition("__")
    return tool if sep else name
