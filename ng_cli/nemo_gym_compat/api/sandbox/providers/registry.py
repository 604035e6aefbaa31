"""`nemo_gym.sandbox.providers.registry`: `create_provider` and `list_providers` (only `local`)."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.sandbox import create_provider, list_providers

__all__ = ["create_provider", "list_providers"]
