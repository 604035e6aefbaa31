"""`nemo_gym.sandbox.config`: a server's `sandbox_provider` reference -> one provider's block.

NeMo Gym accepts an inline single-key mapping (`{local: {...}}`) or the name of a top-level
block of the composed config (`sandbox`, bound by a provider's own config file). A server here
gets only its own instance block, so only the inline form resolves; a name is refused, saying
how to write it inline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["SANDBOX_BLOCK_DEFAULT_METADATA_KEY", "resolve_provider_config", "resolve_provider_metadata"]

SANDBOX_BLOCK_DEFAULT_METADATA_KEY = "default_metadata"


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


def _block(reference: Any, global_config: Mapping[str, Any] | None) -> dict[str, Any]:
    reference = _plain(reference)
    if isinstance(reference, str):
        found = _plain((global_config or {}).get(reference))
        if not isinstance(found, Mapping):
            raise ValueError(
                f"sandbox_provider names the top-level block {reference!r} (in NeMo Gym, a provider's "
                "config file binds it: docker, apptainer, opensandbox ...), which this server cannot see "
                "here; write the provider inline instead, e.g. sandbox_provider: {local: {}}"
            )
        reference = found
    if not isinstance(reference, Mapping):
        raise ValueError(f"sandbox_provider must be a provider mapping or a block name, got {reference!r}")
    return dict(reference)


def resolve_provider_config(reference: Any, global_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The single-key `{provider: {...}}` mapping, without NeMo Gym's reserved keys."""
    block = _block(reference, global_config)
    block.pop(SANDBOX_BLOCK_DEFAULT_METADATA_KEY, None)
    if len(block) != 1:
        raise ValueError(f"sandbox_provider must name exactly one provider, got {sorted(block) or 'none'}")
    return block


def resolve_provider_metadata(
    reference: Any, global_config: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The block's `default_metadata` (merged into a sandbox spec's metadata by NeMo Gym's servers)."""
    metadata = _block(reference, global_config).get(SANDBOX_BLOCK_DEFAULT_METADATA_KEY) or {}
    return {str(key): str(value) for key, value in dict(metadata).items()}
