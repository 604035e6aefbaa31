"""`nemo_gym.sandbox.adapters`: NeMo Gym's Compose adapter, refused here (see `docker_compose`)."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.sandbox import AsyncSandboxCompose

__all__ = ["AsyncSandboxCompose"]
