"""`nemo_gym.rollout_correlation`: the rollout id a request belongs to, in a context variable.

NeMo Gym prefixes paths with `/_ng_rollout/<id>/` when observability is on; we never do, so the
middleware only strips such a prefix if a client sends one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel

__all__ = [
    "RolloutContextMiddleware",
    "current_rollout_id",
    "maybe_rollout_id_from_run_body",
    "rollout_context",
]

ROLLOUT_PATH_PREFIX = "_ng_rollout"
_ROLLOUT_ID: ContextVar[str | None] = ContextVar("nemo_gym_rollout_id", default=None)
_PREFIX = re.compile(rf"^/{ROLLOUT_PATH_PREFIX}/(?P<rollout_id>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<rest>/.*)$")


def current_rollout_id() -> str | None:
    return _ROLLOUT_ID.get()


@contextmanager
def rollout_context(rollout_id: str | None) -> Iterator[None]:
    token = _ROLLOUT_ID.set(rollout_id)
    try:
        yield
    finally:
        _ROLLOUT_ID.reset(token)


def maybe_rollout_id_from_run_body(body: BaseModel | Mapping[str, Any] | None) -> str | None:
    if isinstance(body, BaseModel):
        body = body.model_dump(by_alias=True)
    value = body.get("_ng_rollout_id") if isinstance(body, Mapping) else None
    return value if isinstance(value, str) else None


class RolloutContextMiddleware:
    """Strips a `/_ng_rollout/<id>` prefix and exposes the id to the request's calls."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = _PREFIX.match(scope.get("path", "")) if scope.get("type") == "http" else None
        if match is None:
            await self._app(scope, receive, send)
            return
        path = match.group("rest")
        with rollout_context(match.group("rollout_id")):
            await self._app({**scope, "path": path, "raw_path": path.encode()}, receive, send)
