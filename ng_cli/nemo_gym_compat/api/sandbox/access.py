"""`nemo_gym.sandbox.access`: NeMo Gym's serializable access to an owner-managed sandbox.

A resources server that owns a sandbox hands its agent a `SandboxAccess` (a provider config's
name and the sandbox's descriptor) so the agent can reconnect to it. Only providers that can
reattach in another process (`ConnectableProvider`) serve one, and none here can, so a server
that seeds one stops at its provider; the models are NeMo Gym's shapes, for its imports.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = ["DirectSandboxConnection", "SandboxAccess"]


class DirectSandboxConnection(BaseModel):
    """Reconnect through a named top-level sandbox-provider configuration."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["direct"] = "direct"
    provider_config_ref: str
    descriptor: dict[str, JsonValue]


class SandboxAccess(BaseModel):
    """Borrower access to an owner-managed sandbox."""

    model_config = ConfigDict(extra="forbid")

    connection: DirectSandboxConnection
    workdir: str
