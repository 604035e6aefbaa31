"""NeMo Gym keys our config classes accept although they have no field of their own here.

NeMo Gym 0.7.0's config classes define keys for features this project either does differently
(one uvicorn worker per server, MCP for NeMo Gym's own servers only) or does not have (vLLM's `/v1/completions` path, audio).
A config written for NeMo Gym must not fail on them as "unknown", and must not be changed
silently either, so each class lists them in `nemo_gym_keys`:

* at NeMo Gym's default (or null), the key asks for nothing: it is dropped before validation and
  reported once as a warning that says why it changes nothing here;
* set to anything else, it asks for behaviour we do not have: a config error naming the key,
  its line and what NeMo Gym would have done, instead of a run that quietly does something else.

Keys NeMo Gym defines that we do implement are ordinary fields of the config classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NemoGymKey", "NemoGymKeyUse", "split_nemo_gym_keys"]


@dataclass(frozen=True)
class NemoGymKey:
    """One NeMo Gym key that has no effect here at its default value."""

    default: Any
    """NeMo Gym's default; this value (or null) is accepted with a warning."""
    why: str
    """Why the key changes nothing here (shown in the warning), or what is missing (in the error)."""


@dataclass(frozen=True)
class NemoGymKeyUse:
    """A NeMo Gym key found in a block: a warning (`is_error` false) or a refusal."""

    key: str
    value: Any
    message: str
    is_error: bool


def catalogue_of(model_cls: type) -> dict[str, NemoGymKey]:
    """Every `nemo_gym_keys` entry of the class and its bases (a subclass's entry wins)."""
    merged: dict[str, NemoGymKey] = {}
    for klass in reversed(model_cls.__mro__):
        merged.update(getattr(klass, "__dict__", {}).get("nemo_gym_keys", {}))
    return merged


def split_nemo_gym_keys(
    model_cls: type, block: Mapping[str, Any]
) -> tuple[dict[str, Any], list[NemoGymKeyUse]]:
    """The block without the catalogued NeMo Gym keys, and what each one found means."""
    catalogue = catalogue_of(model_cls)
    fields = getattr(model_cls, "model_fields", {})
    kept: dict[str, Any] = {}
    uses: list[NemoGymKeyUse] = []
    for key, value in block.items():
        entry = catalogue.get(key) if key not in fields else None
        if entry is None:
            kept[key] = value
        elif value is None or value == entry.default:
            uses.append(
                NemoGymKeyUse(key, value, f"NeMo Gym's '{key}' changes nothing here: {entry.why}", False)
            )
        else:
            uses.append(
                NemoGymKeyUse(
                    key,
                    value,
                    f"NeMo Gym's '{key}' set to {value!r} is not supported here ({entry.why}); "
                    f"remove it or set it to {entry.default!r}",
                    True,
                )
            )
    return kept, uses
