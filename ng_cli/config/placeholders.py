"""Values a config leaves for the user to fill in before the server that reads them starts.

NeMo Gym's files write them several ways: `base_url: http://<host_url>:<port>/v1` and
`api_key: <api_key>` (a name in angle brackets), `${oc.env:NVIDIA_API_KEY,null}` (null while the
variable is unset), `judge_base_url: null`, `${oc.env:ARENA_JUDGE_BASE_URL,MISSING}`. NeMo Gym
reads a server's block only when that server starts, so its `validate` passes them. Here every
block is checked by its own class when the config is read, so a placeholder is told apart from a
wrong value: a block refused only because of placeholders raises `IncompleteConfigError`, which
`ng_validate` reports as "will not start as-is" and every command that starts servers refuses,
naming the key and showing the placeholder as written (never masked: it is no secret).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["is_placeholder", "is_placeholder_text", "placeholder_names"]

_NAMED = re.compile(r"<([A-Za-z][\w.-]*)>")
_SENTINELS = frozenset({"", "MISSING", "???"})
"""Whole values that stand for "not set yet": NeMo Gym's NO_MODEL stand-in (""), the `MISSING`
default of its `${oc.env:...}` lookups, OmegaConf's `???` read as text."""


def placeholder_names(value: str) -> list[str]:
    """The `<name>` placeholders in a text, in order (`http://<host>:<port>/v1` -> host, port)."""
    return _NAMED.findall(value)


def is_placeholder_text(value: Any) -> bool:
    """Whether a whole value is nothing but a placeholder (`<api_key>`, `MISSING`, ""), so that
    showing it reveals nothing (a secret is never shown, even one holding `<...>`)."""
    return isinstance(value, str) and (value.strip() in _SENTINELS or bool(_NAMED.fullmatch(value.strip())))


def is_placeholder(value: Any) -> bool:
    """Whether a value is (or holds) a placeholder: null, empty, `MISSING`, or text with `<name>`."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() in _SENTINELS or bool(_NAMED.search(value))
    if isinstance(value, list):  # one endpoint of several still to be filled is enough
        return any(is_placeholder(item) for item in value)
    return False
