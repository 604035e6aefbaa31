"""`WeightVersions`: the weight version a model server serves, and the gate every model call passes.

vLLM keeps no weight version (0.26 has none; later ones only a label), so the model server keeps
it. Every model call enters `call()`: it waits while an update holds the gate closed (vLLM
queues a request that reaches a paused engine and serves it with the new weights: vllm#51488,
so admission must stop here, not there), then gets a `Ticket` with the version at dispatch.
`Ticket.stamp()` at completion gives `{"start", "end"}`: the versions at dispatch and at
completion. An update sets the new version while its engines are still paused and before they
resume, so a call whose stamp says `start == end == v` ran on v from its first token to its last,
and the calls with `start != end` are exactly those registered when the version changed (the
update reports them as `spanning_calls`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

__all__ = ["MAX_VERSION", "Ticket", "WeightVersions"]

MAX_VERSION = 2**63 - 1
"""The largest version: every version fits a signed 64-bit integer (JSON readers, Prometheus, pandas)."""


@dataclass
class Ticket:
    """One model call as the gate saw it."""

    call_id: str
    start: int
    versions: WeightVersions

    def stamp(self) -> dict[str, int | str]:
        """`{"start", "end", "call"}` now: end is the version the call completes under."""
        return {"start": self.start, "end": self.versions.version, "call": self.call_id}


class WeightVersions:
    """The current version, the admission gate, and the calls in flight."""

    def __init__(self, version: int = 0, *, server: str = "model") -> None:
        self.version = version
        self._open = asyncio.Event()
        self._open.set()
        self._in_flight: dict[str, Ticket] = {}
        self._ids = itertools.count(1)
        self._prefix = f"{server}-"

    @property
    def is_admitting(self) -> bool:
        return self._open.is_set()

    @asynccontextmanager
    async def call(self) -> AsyncIterator[Ticket]:
        """Admit one model call (waiting while the gate is closed) and track it until it ends."""
        await self._open.wait()
        ticket = Ticket(f"{self._prefix}{next(self._ids)}", self.version, self)
        self._in_flight[ticket.call_id] = ticket
        try:
            yield ticket
        finally:
            del self._in_flight[ticket.call_id]

    def close(self) -> None:
        """Stop admitting: calls that arrive now wait until `open()`."""
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def in_flight(self) -> list[str]:
        """The ids of the calls admitted and not yet finished, oldest first."""
        return list(self._in_flight)

    def set_version(self, version: int) -> list[str]:
        """The new version from now on; returns the calls in flight, which now span two versions."""
        self.version = version
        return self.in_flight()
