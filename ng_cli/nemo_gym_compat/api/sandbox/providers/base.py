"""`nemo_gym.sandbox.providers.base`: NeMo Gym's provider types, the ones `nemo_gym.sandbox` has."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.sandbox import (
    ConnectableProvider,
    ExecResult,
    SandboxCreateError,
    SandboxEndpoint,
    SandboxExecResult,
    SandboxResources,
    SandboxSpec,
    SupportsSandboxEndpoint,
)

__all__ = [
    "ConnectableProvider",
    "ExecResult",
    "SandboxCreateError",
    "SandboxEndpoint",
    "SandboxExecResult",
    "SandboxResources",
    "SandboxSpec",
    "SupportsSandboxEndpoint",
]
