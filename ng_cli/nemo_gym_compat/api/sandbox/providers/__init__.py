"""`nemo_gym.sandbox.providers`: the provider names NeMo Gym's agents import from here.

Each name is the one in `nemo_gym.sandbox` (`ng_cli.nemo_gym_compat.api.sandbox`), imported by
its full name: a NeMo Gym app reaches this package as `nemo_gym.sandbox.providers`, a second
module object, and the classes must still be the same ones for its `isinstance` checks.
"""

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
    create_provider,
    list_providers,
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
    "create_provider",
    "list_providers",
]
