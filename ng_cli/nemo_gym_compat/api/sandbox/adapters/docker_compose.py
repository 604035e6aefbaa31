"""`nemo_gym.sandbox.adapters.docker_compose`: `AsyncSandboxCompose`, which no provider here can run
(each Compose service is a container of its image); the class is `nemo_gym.sandbox`'s."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.sandbox import AsyncSandboxCompose

__all__ = ["AsyncSandboxCompose"]
