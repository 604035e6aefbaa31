"""The caller's deadline, carried down every hop: budgets compose instead of multiplying.

The collector gives each rollout attempt `rollout_timeout_s`. It sends what is left of it in the
`X-NG-Deadline-S` header (seconds, relative, so clocks need not agree), as gRPC does with
`grpc-timeout`. `DeadlineMiddleware` turns the header into a deadline for the request (a
context variable, so it follows the request's coroutines), and `HttpClient` caps each call's
timeouts by what is left and forwards the rest in the same header. A server that waits (for an
upstream to come back, between retries) asks `remaining_s()` first. Nothing below the collector
can outlive it, and a retry that could not finish in time is not started.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the collector imports this module through HttpClient: no web framework
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["DEADLINE_HEADER", "DeadlineMiddleware", "deadline_scope", "remaining_s"]

DEADLINE_HEADER = "X-NG-Deadline-S"
"""Seconds the caller will still wait for this request's answer."""

_HEADER_KEY = DEADLINE_HEADER.lower().encode()
_deadline: ContextVar[float | None] = ContextVar("ng_deadline", default=None)


def remaining_s() -> float | None:
    """Seconds left before the caller gives up on the current request; None without a deadline."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


@contextmanager
def deadline_scope(seconds: float | None) -> Iterator[None]:
    """Run the block under a deadline `seconds` from now (never later than an enclosing one)."""
    if seconds is None:
        yield
        return
    new = time.monotonic() + seconds
    current = _deadline.get()
    token = _deadline.set(new if current is None else min(current, new))
    try:
        yield
    finally:
        _deadline.reset(token)


class DeadlineMiddleware:
    """Reads `X-NG-Deadline-S` and runs the request under that deadline."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        seconds = _header_seconds(scope) if scope["type"] == "http" else None
        with deadline_scope(seconds):
            await self.app(scope, receive, send)


def _header_seconds(scope: Scope) -> float | None:
    for name, value in scope.get("headers", ()):
        if name == _HEADER_KEY:
            try:
                seconds = float(value)
            except ValueError:
                return None
            return seconds if seconds == seconds else None  # NaN: no deadline
    return None
