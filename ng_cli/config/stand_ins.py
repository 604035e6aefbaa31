"""Composing a config whose model credentials are unset, for commands that never call the model.

`ng_validate` and `ng_prepare_data` read a stack's config but send nothing to its policy model, so
a config that leaves `policy_base_url` / `policy_api_key` / `policy_model_name` to env.yaml must not
fail there for want of them: each unset one is filled with a stand-in (NeMo Gym's NO_MODEL
values), and the command says so. Commands that do call the model compose without stand-ins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.errors import ConfigError

__all__ = ["STAND_INS", "StoodIn", "compose_with_stand_ins", "stand_in_warning"]

STAND_INS = {
    "policy_base_url": "http://policy-model.invalid/v1",
    "policy_api_key": "stand-in",
    "policy_model_name": "stand-in",
}
"""Values for the model keys a config may leave to env.yaml (NeMo Gym's NO_MODEL stand-ins)."""


@dataclass(frozen=True)
class StoodIn:
    """The composed config, the keys that were unset and stood in for, and the error without them."""

    composed: ComposedConfig
    keys: list[str]
    error: ConfigError | None


def compose_with_stand_ins(overrides: Sequence[str]) -> StoodIn:
    """Compose; when only model credentials are unset, compose again with stand-ins for them."""
    try:
        return StoodIn(compose_config(overrides), [], None)
    except ConfigError as exc:
        keys = [key for key in STAND_INS if f"'{key}' is not set" in exc.message]
        if not keys:
            raise
        composed = compose_config([*overrides, *(f"++{key}={STAND_INS[key]}" for key in keys)])
        return StoodIn(composed, keys, exc)


def stand_in_warning(keys: Sequence[str], *, strict_hint: bool) -> str:
    """The warning a command prints when it ran with stand-ins."""
    tail = "; +strict=true makes this an error" if strict_hint else ""
    return (
        f"{', '.join(keys)} unset: checked with stand-ins; this config will not start as-is "
        f"(set them in env.yaml or on the command line{tail})"
    )
