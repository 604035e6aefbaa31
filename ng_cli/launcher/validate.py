"""`ng_validate`: everything `ng_run` checks before it starts anything, and nothing started.

    compose (files < env.yaml < overrides) -> every server block by its own class -> engine plans

As NeMo Gym 0.7.0's `gym env validate` for a config: a config that leaves the policy model's
`policy_base_url` / `policy_api_key` / `policy_model_name` unset, or its `policy_model` instance
to another file, is checked with stand-ins (`ng_cli.config.stand_ins`), and one whose servers
wait for a placeholder to be filled in (`IncompleteConfigError`) is checked but for it; both
pass with a warning ("will not start as-is"), unless `+strict=true` (the command's option).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.stand_ins import StoodIn, stand_in_warning
from ng_cli.launcher.check import check_instances

__all__ = ["Validation", "validate_config"]


@dataclass(frozen=True)
class Validation:
    composed: ComposedConfig
    warnings: list[str] = field(default_factory=list)
    stood_in: list[str] = field(default_factory=list)
    """Model keys that were unset and checked with stand-ins."""


def validate_config(stood: StoodIn, *, strict: bool = False) -> Validation:
    """Check the composed config as ng_run would; ConfigError with every problem, else the warnings.

    What only waits to be filled in (`IncompleteConfigError`: a placeholder, a null, weights not
    on this machine) is a warning that the config will not start as-is, unless `strict`; so is a
    server whose app.py needs a module this environment lacks (its block goes unchecked)."""
    # check_instances plans the stack as ng_run does (engine plans included) before the blocks
    warnings = check_instances(stood.composed, incomplete_ok=not strict, unimportable_ok=not strict)
    if stood.keys:
        warnings.append(stand_in_warning(stood.keys, strict_hint=True))
    return Validation(composed=stood.composed, warnings=warnings, stood_in=stood.keys)
