"""`nemo_gym.failure_kinds`: the shared names of failure kinds on a verify answer."""

from __future__ import annotations

import re
import warnings

__all__ = [
    "AGENT_RUN_ERROR",
    "JUDGE_FAILED",
    "JUDGE_UNPARSEABLE",
    "VERIFIER_ERROR",
    "is_namespaced",
    "is_registered",
    "validate_failure_kind",
]

JUDGE_FAILED = "judge_failed"
JUDGE_UNPARSEABLE = "judge_unparseable"
VERIFIER_ERROR = "verifier_error"
SESSION_LOST = "session_lost"
SESSION_EXPIRED = "session_expired"
PROVIDER_UNAVAILABLE = "provider_unavailable"
AGENT_RUN_ERROR = "agent_run_error"

_REGISTERED = frozenset(
    {
        JUDGE_FAILED,
        JUDGE_UNPARSEABLE,
        VERIFIER_ERROR,
        SESSION_LOST,
        SESSION_EXPIRED,
        PROVIDER_UNAVAILABLE,
        AGENT_RUN_ERROR,
    }
)
_NAMESPACED = re.compile(r"[a-z][a-z0-9_]*:[a-z][a-z0-9_]*")


def is_registered(name: str) -> bool:
    return name in _REGISTERED


def is_namespaced(name: str) -> bool:
    return _NAMESPACED.fullmatch(name) is not None


def validate_failure_kind(name: str | None) -> str | None:
    """Warns (never refuses) on a kind outside the vocabulary, as NeMo Gym does."""
    if name is not None and not (is_registered(name) or is_namespaced(name)):
        warnings.warn(f"failure_kind {name!r} is not a registered kind", stacklevel=2)
    return name
