"""`ng_validate`: everything `ng_run` checks before it starts anything, and nothing started.

    compose (files < env.yaml < overrides) -> every server block by its own class -> engine plans

As NeMo Gym 0.7.0's `gym env validate` for a config: a config that leaves the policy model's
`policy_base_url` / `policy_api_key` / `policy_model_name` unset is checked with stand-ins and
passes with a warning ("will not start as-is"), unless `+strict=true`. NeMo Gym's manifest-backed
workloads (`+onboarding_name`, `+manifest_path`) have no counterpart here and are refused by name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.errors import ConfigError
from ng_cli.launcher.check import check_instances
from ng_cli.launcher.plan import engine_plans

__all__ = ["STAND_INS", "Validation", "validate_config"]

STAND_INS = {
    "policy_base_url": "http://policy-model.invalid/v1",
    "policy_api_key": "stand-in",
    "policy_model_name": "stand-in",
}
"""Values for the model keys a config may leave to env.yaml (NeMo Gym's NO_MODEL stand-ins)."""
_MANIFEST_KEYS = ("onboarding_name", "manifest_path", "catalog_kind", "sync")
_STRICT = re.compile(r"^\+{0,2}strict=(true|yes|on|1)$", re.IGNORECASE)


@dataclass(frozen=True)
class Validation:
    composed: ComposedConfig
    warnings: list[str] = field(default_factory=list)
    stood_in: list[str] = field(default_factory=list)
    """Model keys that were unset and checked with stand-ins."""


def validate_config(overrides: Sequence[str]) -> Validation:
    """Compose and check as ng_run would; ConfigError with every problem, else the warnings."""
    strict = any(_STRICT.match(o.strip()) for o in overrides)
    args = [o for o in overrides if not _STRICT.match(o.strip())]
    try:
        composed, stood_in = compose_config(args), []
    except ConfigError as exc:
        stood_in = [key for key in STAND_INS if f"'{key}' is not set" in exc.message]
        if strict or not stood_in:
            raise
        composed = compose_config([*args, *(f"++{key}={STAND_INS[key]}" for key in stood_in)])
    for key in _MANIFEST_KEYS:
        if key in composed.tree:
            raise ConfigError(
                f"{key}: NeMo Gym's manifest-backed workloads (its environment catalog) have no counterpart here",
                hint='validate a config instead: ng_validate "+config_paths=[env.yaml,model.yaml]"',
            )
    warnings = check_instances(composed)
    engine_plans(composed, env=os.environ, python=None)  # refuses an impossible engine plan
    if stood_in:
        warnings.append(
            f"{', '.join(stood_in)} unset: checked with stand-ins; this config will not start as-is "
            "(set them in env.yaml or on the command line; +strict=true makes this an error)"
        )
    return Validation(composed=composed, warnings=warnings, stood_in=stood_in)
