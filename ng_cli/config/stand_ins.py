"""Composing a config whose policy model is left to other files, for commands that never call it.

`ng_validate` and `ng_prepare_data` read a stack's config but send nothing to its policy model, so
a config must not fail there for want of it, as in NeMo Gym (its `NO_MODEL_GLOBAL_CONFIG_DICT`,
which `gym env validate` and its data commands fall back to):

* `policy_base_url` / `policy_api_key` / `policy_model_name` unset (or `???`): each is filled with
  a stand-in value;
* no `policy_model` instance, while a block refers to it (an environment's file validated
  without the model's): a stand-in `vllm_model` instance of that name, over the stand-in values;
* with `fragments` (ng_validate), a block without `entrypoint` (an override fragment, such as
  `vllm_model_supply_prefix.yaml`, loaded without the file it overrides): NeMo Gym's validate does
  not count it as a server and passes; here it is given `entrypoint: app.py` so that its keys are
  still checked by its server's class (what the file it overrides leaves out then "will not start
  as-is").

The command says which were stood in. Commands that do call the model compose without stand-ins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.errors import ConfigError

__all__ = ["POLICY_MODEL", "STAND_INS", "StoodIn", "compose_with_stand_ins", "stand_in_warning"]

STAND_INS = {
    "policy_base_url": "http://policy-model.invalid/v1",
    "policy_api_key": "stand-in",
    "policy_model_name": "stand-in",
}
"""Values for the model keys a config may leave to env.yaml (NeMo Gym's NO_MODEL stand-ins)."""

POLICY_MODEL = "policy_model"
"""The instance NeMo Gym's NO_MODEL dict defines (as `dummy_model`) when no file does."""

_POLICY_MODEL_BLOCK: dict[str, Any] = {
    "responses_api_models": {
        "vllm_model": {
            "entrypoint": "app.py",
            "base_url": STAND_INS["policy_base_url"],
            "api_key": STAND_INS["policy_api_key"],
            "model": STAND_INS["policy_model_name"],
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
        }
    }
}
_NO_POLICY_MODEL = f"no responses_api_models instance named '{POLICY_MODEL}'"
_NO_ENTRYPOINT = re.compile(r"(\S+)\.entrypoint: missing required key 'entrypoint'")
"""A block's key (`<name>.<server_type>.<implementation>`) in find_instances' message."""
_FRAGMENT = "entrypoint of "
"""The prefix of a stood-in key that names a fragment given an entrypoint (`entrypoint of <key>`)."""


@dataclass(frozen=True)
class StoodIn:
    """The composed config, what was stood in for, and the error without the stand-ins."""

    composed: ComposedConfig
    keys: list[str]
    """The stood-in keys (`policy_base_url`, ...) and `policy_model` when its instance was."""
    error: ConfigError | None


def compose_with_stand_ins(overrides: Sequence[str], *, fragments: bool = False) -> StoodIn:
    """Compose; when only the policy model's settings or instance are missing, compose again
    with stand-ins for what is missing (each pass may reveal the next: values, then the instance).
    `fragments`: a block without `entrypoint` is given one (see the module's docstring)."""
    keys: list[str] = []
    first: ConfigError | None = None
    while True:
        edits = [f"++{key}={STAND_INS[key]}" for key in keys if key in STAND_INS]
        edits += [
            f"++{key.removeprefix(_FRAGMENT)}.entrypoint=app.py" for key in keys if key.startswith(_FRAGMENT)
        ]
        values = {POLICY_MODEL: _POLICY_MODEL_BLOCK} if POLICY_MODEL in keys else None
        try:
            return StoodIn(compose_config([*overrides, *edits], values=values), keys, first)
        except ConfigError as exc:
            found = _missing(exc.message) + (_fragments(exc.message) if fragments else [])
            missing = [key for key in found if key not in keys]
            if not missing:
                raise
            first = first or exc
            keys.extend(missing)


def _missing(message: str) -> list[str]:
    """What the composition error says is missing that a stand-in can take the place of."""
    missing = [
        key
        for key in STAND_INS
        if f"'{key}' is not set" in message
        or re.search(rf"(^|\s){key}: required value is not set \(\?\?\?\)", message)
    ]
    if _NO_POLICY_MODEL in message:
        missing.append(POLICY_MODEL)
    return missing


def _fragments(message: str) -> list[str]:
    """The blocks the composition error says have no `entrypoint`, as stood-in keys."""
    return [f"{_FRAGMENT}{key}" for key in _NO_ENTRYPOINT.findall(message)]


def stand_in_warning(keys: Sequence[str], *, strict_hint: bool) -> str:
    """The warning a command prints when it ran with stand-ins."""
    tail = "; +strict=true makes this an error" if strict_hint else ""
    values = [key for key in keys if key in STAND_INS]
    parts = [f"{', '.join(values)} unset"] if values else []
    if POLICY_MODEL in keys:
        parts.append(f"no '{POLICY_MODEL}' instance (a file that defines it is not given)")
    blocks = [key.removeprefix(_FRAGMENT) for key in keys if key.startswith(_FRAGMENT)]
    if blocks:
        parts.append(
            f"no entrypoint in {', '.join(blocks)} (an override of a block that another file defines; "
            "NeMo Gym does not count it as a server): given entrypoint: app.py"
        )
    return (
        f"{' and '.join(parts)}: checked with stand-ins; this config will not start as-is "
        f"(set them in env.yaml or on the command line, or add the model's config{tail})"
    )
