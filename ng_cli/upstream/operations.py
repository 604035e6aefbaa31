"""`Operations`: each weight-admin operation runs to its end, whoever waits for its answer.

A route handler is cancelled when its client goes away (`servers/disconnect.py`: a client's
timeout, Ctrl-C on `ng_update_weights`). An update cancelled between its pause and its resume
left every engine paused and admission closed, with nothing left to reopen them, while `/health`
said ok. So a handler only waits for the operation: the operation is a task of its own (`run`),
which ends in its result, its rollback, or its error; what runs now and in which phase
(`running`), and how the last operation ended (`last`), stay for a later status call.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from ng_cli.errors import NgError

__all__ = ["Operations"]

logger = logging.getLogger("ng_cli.upstream")

T = TypeVar("T")

_CURRENT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("operation", default=None)
"""The operation the running task belongs to (each `run` task has its own context)."""


class Operations:
    """The weight-admin operations of one model server: the one running now, the last one's end."""

    def __init__(self) -> None:
        self._running: list[dict[str, Any]] = []
        self.last: dict[str, Any] | None = None
        """How the last operation that touched the engines ended: `{"operation", "version", "outcome"
        (done | rolled_back | rollback_failed | failed), "error"?, "at"}`."""
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self, operation: str, work: Coroutine[Any, Any, T], *, version: int | None = None) -> T:
        """`work` as a task of its own; the caller waits for it, and going away does not cancel it."""
        task = asyncio.get_running_loop().create_task(
            self._tracked(operation, version, work), name=f"weights {operation}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)

    @property
    def running(self) -> dict[str, Any] | None:
        """`{"operation", "version", "phase", "since"}` of the oldest operation in progress."""
        return dict(self._running[0]) if self._running else None

    def phase(self, phase: str) -> None:
        """The calling operation entered `phase` (status calls show it)."""
        current = _CURRENT.get()
        if current is not None:
            current["phase"] = phase

    async def _tracked(self, operation: str, version: int | None, work: Coroutine[Any, Any, T]) -> T:
        mine = {"operation": operation, "version": version, "phase": "admit", "since": time.time()}
        _CURRENT.set(mine)
        self._running.append(mine)
        try:
            result = await work
        except BaseException as error:
            outcome = _outcome_of(error)
            if outcome["outcome"] != "refused":  # a refusal touched nothing, and its caller was told
                self.last = {"operation": operation, "version": version, **outcome, "at": time.time()}
            if not isinstance(error, NgError):
                logger.error("weights: %s failed: %r", operation, error)
            raise
        else:
            self.last = {"operation": operation, "version": version, "outcome": "done", "at": time.time()}
            return result
        finally:
            self._running.remove(mine)


def _outcome_of(error: BaseException) -> dict[str, Any]:
    outcome = getattr(error, "outcome", None)
    message = error.message if isinstance(error, NgError) else f"{type(error).__name__}: {error}"
    return {"outcome": outcome if isinstance(outcome, str) else "failed", "error": message}
