"""What `weight_updates: true` adds to an engine's start, and the combinations it refuses.

vLLM registers its weight routes (`/pause`, `/resume`, `/collective_rpc`, `/reset_prefix_cache`,
`/sleep`, `/wake_up`, the tensor-push routes) only with `VLLM_SERVER_DEV_MODE=1`, and checks its
key only under `/v1`. So an engine that takes updates also gets:

* `--middleware engine_guard.KeyOnEveryRoute`: the engines' key on every route but `/health`;
* `--worker-extension-cls engine_worker.WeightsExtension`: the reload that keeps tied embeddings
  tied, and the weights' fingerprint the update verifies with;
* `--weight-transfer-config {"backend": ...}` when a trainer pushes tensors (`weight_transfer`).

Each engine ng_run starts gets its own admin key as well (`ADMIN_KEY_ENV`): HMAC-SHA256 of the
instance's admin secret and the engine's root URL. The guard opens every route to that key; the
engines' key (which the trainer, agents and `ng_update_weights` hold) opens only the inference
routes to a request that arrives on a network address (a Ray node's, or `engine_host: 0.0.0.0`
reached from elsewhere), and every route on loopback, as before. Only ng_run and the model server
hold the secret (its 0600 spec file), so only the model server can derive a key, and an engine's
key opens no other engine (docs/ray.md, "Weight updates on a cluster", says why this and not a
relay).

Refused before anything starts (ConfigError naming the key): `load_format: dummy` without a
tensor push (vLLM cannot reload a dummy-loaded model from disk: "NotImplementedError: Model
reloading with dummy format"), and the user's own `middleware` / `worker_extension_cls` (they
would replace ours).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Callable
from typing import Any

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.engine_guard import MIDDLEWARE
from ng_cli.engines.engine_worker import EXTENSION
from ng_cli.errors import ConfigError

__all__ = [
    "ADMIN_KEY_ENV",
    "DEV_MODE_ENV",
    "engine_admin_key",
    "is_loopback",
    "weight_update_kwargs",
]

DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
ADMIN_KEY_ENV = "NG_ENGINE_ADMIN_KEY"
"""The engine's own admin key (`engine_guard` reads it)."""
_OURS = ("middleware", "worker_extension_cls", "weight_transfer_config")


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def engine_admin_key(secret: str, root_url: str) -> str:
    """The admin key of the engine at `root_url` (as `EngineSpec.root_url` writes it).

    Bound to the URL: a node that reads its engine's environment learns that engine's key only,
    and a re-placed engine (a new URL) gets a new one."""
    if not secret:
        raise ValueError("no admin secret: ng_run gives one with weight_updates: true")
    return hmac.new(secret.encode(), root_url.rstrip("/").encode(), hashlib.sha256).hexdigest()


def weight_update_kwargs(
    config: LocalVllmModelConfig, kwargs: dict[str, Any], *, at: Callable[[str], str]
) -> dict[str, Any]:
    """`kwargs` (vllm_serve_kwargs, normalised) with what updates need; ConfigError if they cannot work."""
    if not config.weight_updates:
        if config.weight_transfer != "none":
            raise ConfigError(
                f"{at('weight_transfer')}weight_transfer: {config.weight_transfer} needs weight_updates: true",
                hint="set weight_updates: true (the pause, version and cache handling come with it)",
            )
        return kwargs
    for key in _OURS:
        if key in kwargs:
            raise ConfigError(
                f"{at(f'vllm_serve_kwargs.{key}')}vllm_serve_kwargs.{key} is set by ng_run when weight_updates is true",
                hint=f"remove vllm_serve_kwargs.{key}",
            )
    if kwargs.get("load_format") == "dummy" and config.weight_transfer == "none":
        raise ConfigError(
            f"{at('vllm_serve_kwargs.load_format')}load_format: dummy with weight_updates: true cannot be "
            "reloaded from a checkpoint directory (vLLM: 'Model reloading with dummy format' is not implemented)",
            hint="start from a real checkpoint (the trainer's step-0 weights), or set weight_transfer: nccl|ipc "
            "if the trainer pushes tensors",
        )
    updated = {**kwargs, "middleware": MIDDLEWARE, "worker_extension_cls": EXTENSION}
    if config.weight_transfer != "none":
        updated["weight_transfer_config"] = {"backend": config.weight_transfer}
    return updated
