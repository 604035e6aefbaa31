"""What a weight update does on each engine, whatever the operation: the engines it covers
(`PhaseEngine`), one phase run on all of them at once and timed (`on_all`, `on_all_quietly`), and
how a failed operation is told (`WeightUpdateError`, `failure`). `weights.WeightUpdater` orders the
phases; this module knows nothing of versions, checkpoints or pushes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ng_cli.errors import NgError
from ng_cli.upstream.engine_admin import EngineAdmin, PhaseError
from ng_cli.upstream.pool import Endpoint

__all__ = ["PhaseEngine", "WeightUpdateError", "failure", "live", "on_all", "on_all_quietly"]

logger = logging.getLogger("ng_cli.upstream")

_ANSWER_S = 5.0
"""How long an engine that failed a phase has to answer `/health` before it counts as lost."""


class WeightUpdateError(NgError):
    """An update refused or rolled back: the version did not change and the old weights serve."""

    exit_code = 2
    http_status = 409

    def __init__(
        self,
        message: str,
        *,
        phase: str,
        engine: str | None = None,
        rolled_back: bool = False,
        version: int | None = None,
        hint: str | None = None,
        timings: Mapping[str, Mapping[str, float]] | None = None,
        rollback_failed: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.phase = phase
        self.engine = engine
        self.rolled_back = rolled_back
        self.version = version
        self.timings = dict(timings or {})
        self.rollback_failed = dict(rollback_failed or {})
        """Engine -> why it could not be put back (held out of the pool until an update succeeds)."""
        if self.rollback_failed:
            self.exit_code = 3

    @property
    def outcome(self) -> str:
        """How the operation ended, for the status (`operations.Operations.last`)."""
        if self.rollback_failed:
            return "rollback_failed"
        return "rolled_back" if self.rolled_back else "refused"

    def envelope_fields(self) -> dict[str, object]:
        return {
            "phase": self.phase,
            "engine": self.engine,
            "rolled_back": self.rolled_back,
            "rollback_failed": self.rollback_failed,
            "version": self.version,
            "timings": self.timings,
        }


@dataclass
class PhaseEngine:
    endpoint: Endpoint
    admin: EngineAdmin
    timings: dict[str, float] = field(default_factory=dict)
    paused: bool = False
    held_out: bool = False
    """Out of the pool since its rollback or restore failed: this update may bring it back, and its
    failing again fails only itself (`dropped`), not the update of the engines that serve."""
    dropped: bool = False
    lost: str | None = None
    """Why it is out of this operation: it failed a phase and its server no longer answers (its
    node lost, its process gone); the others go on without it."""

    async def timed(self, phase: str, call: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.timings[phase] = round(time.perf_counter() - started, 4)


def live(engines: list[PhaseEngine]) -> list[PhaseEngine]:
    """The engines still in the operation (a held-out one that failed again has dropped out)."""
    return [engine for engine in engines if not engine.dropped]


async def on_all(
    phase: str, engines: list[PhaseEngine], call: Callable[[PhaseEngine], Awaitable[Any]]
) -> list[Any]:
    """`call` on every live engine at once, timed; the first failure (after all ended) is raised.

    A held-out engine that fails is dropped from the operation instead: it stays held out. So is
    an engine that fails and then does not answer `/health` (`lost`): a lost node costs the
    operation only its engines, which load the current weights before they serve again."""
    running = live(engines)
    results = await _gathered(phase, running, call)
    failed = [
        engine
        for engine, result in zip(running, results, strict=True)
        if isinstance(result, PhaseError) and not engine.held_out
    ]
    answers = await asyncio.gather(*(engine.admin.answers(deadline_s=_ANSWER_S) for engine in failed))
    for engine, result in zip(running, results, strict=True):
        if isinstance(result, PhaseError) and engine.held_out:
            logger.warning("held-out engine %s: %s", engine.endpoint.root_url, result.message)
            engine.dropped = True
        elif isinstance(result, PhaseError) and engine in failed and not answers[failed.index(engine)]:
            logger.warning(
                "engine %s is gone (no answer to /health): %s", engine.endpoint.root_url, result.message
            )
            engine.lost = f"lost in phase {phase} ({result.reason})"
            engine.dropped = True
    kept = [result for engine, result in zip(running, results, strict=True) if not engine.dropped]
    for result in kept:
        if isinstance(result, BaseException):
            raise result
    if not live(engines):
        raise PhaseError("every engine", phase, "no engine is up: each one held out failed again")
    return kept


async def on_all_quietly(
    phase: str, engines: list[PhaseEngine], call: Callable[[PhaseEngine], Awaitable[Any]]
) -> dict[str, str]:
    """`call` on every engine at once, timed; engine -> why it failed (none raised)."""
    results = await _gathered(phase, engines, call)
    return {
        engine.endpoint.root_url: (result.reason if isinstance(result, PhaseError) else repr(result))
        for engine, result in zip(engines, results, strict=True)
        if isinstance(result, BaseException)
    }


def failure(
    error: PhaseError,
    version: int,
    engines: list[PhaseEngine],
    problems: Mapping[str, str],
    *,
    serving: str,
    serving_version: int,
    held_out: int,
) -> WeightUpdateError:
    """The error of an operation that failed in `error`'s phase and was rolled back (`problems`:
    the engines whose rollback failed too); `serving` says what the others are back on."""
    back = [e.endpoint.root_url for e in engines if e.endpoint.root_url not in problems]
    if not problems:
        told = f"every engine is back on {serving}"
        if held_out:
            told = f"every engine that served is back on {serving} ({held_out} still held out)"
    else:
        told = (
            "ROLLBACK FAILED on "
            + "; ".join(f"{url}: {reason}" for url, reason in problems.items())
            + f". {'That engine is' if len(problems) == 1 else 'Those engines are'} held out of the pool, "
            "paused, until an update succeeds on "
            + ("it" if len(problems) == 1 else "them")
            + " (send the next checkpoint)"
            + (f"; {', '.join(back)} back on {serving}" if back else "; no engine serves now")
        )
    return WeightUpdateError(
        f"update to version {version} failed on engine {error.engine} in phase {error.phase}: {error.reason}; "
        + told,
        phase=error.phase,
        engine=error.engine,
        rolled_back=not problems,
        version=serving_version,
        timings={e.endpoint.root_url: e.timings for e in engines},
        rollback_failed=problems,
    )


async def _gathered(
    phase: str, engines: list[PhaseEngine], call: Callable[[PhaseEngine], Awaitable[Any]]
) -> list[Any]:
    """Each engine's result of `call`, or the exception it raised, in engine order."""
    return await asyncio.gather(
        *(engine.timed(phase, call(engine)) for engine in engines), return_exceptions=True
    )
