"""`nemo_gym.tool_access`: how NeMo Gym describes an agent's access to tools (wire shapes only).

NeMo Gym's own `simple_agent` (which other agents of theirs subclass) imports these; here agents
call the resources server's tool routes directly, so a `tool_accesses` entry is checked for shape
and otherwise unused (an agent that requires an MCP access says so itself).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field

__all__ = ["DirectHTTPToolAccess", "MCPStreamableHTTPConnection", "MCPToolAccess", "ToolAccess"]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class DirectHTTPToolAccess(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["direct_http"] = "direct_http"
    name: str = Field(min_length=1, pattern=_NAME)
    required: bool
    base_url: AnyHttpUrl
    cookies: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)


class MCPStreamableHTTPConnection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transport: Literal["streamable_http"] = "streamable_http"
    url: AnyHttpUrl
    headers: dict[str, str] = Field(default_factory=dict)


class MCPToolAccess(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["mcp"] = "mcp"
    name: str = Field(min_length=1, pattern=_NAME)
    required: bool
    connection: MCPStreamableHTTPConnection


ToolAccess = Annotated[DirectHTTPToolAccess | MCPToolAccess, Field(discriminator="kind")]
